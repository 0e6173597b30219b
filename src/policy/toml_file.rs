//! The TOML form of a policy (`policy/*.toml`), read with serde.

use std::collections::{BTreeMap, HashMap};

use serde::Deserialize;

use super::message::{HandleRule, MessagePolicy, PayloadRule, FIRST_REPLY_HANDLE};
use super::names::is_python_name;
use super::{
    ArgSpec, ArgType, ArgsSchema, Check, Constructor, Cost, Forms, GlobalRule, PersistentIds,
    Policy, PolicyError, Python2Str, RecordKey, TextEncoding,
};
use crate::error::escape_for_display;
use crate::limits::{parse_size, LimitName, Limits};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    python2_str: Option<String>,
    #[serde(default)]
    python2_str_encoding: Option<String>,
    #[serde(default)]
    persistent_ids: Option<String>,
    /// With `persistent_ids = "record"`: the schema of the id's tuple items.
    #[serde(default)]
    persistent_id_args: Option<Vec<ArgEntry>>,
    #[serde(default)]
    persistent_id_min_args: Option<usize>,
    #[serde(default)]
    /// A number, or text with a K, M or G suffix (powers of 1024) as `--limit` takes it.
    limits: BTreeMap<String, toml::Value>,
    #[serde(default, rename = "global")]
    globals: Vec<GlobalEntry>,
    #[serde(default, rename = "extension")]
    extensions: Vec<ExtensionEntry>,
    #[serde(default)]
    mitogen: Option<MitogenEntry>,
}

/// The `[mitogen]` section: the message policy ([`MessagePolicy`]). When present it is the
/// whole handle allowlist (nothing inherited); when absent the policy gets
/// [`MessagePolicy::mitogen`].
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MitogenEntry {
    reply_handles: bool,
    max_new_contexts_per_frame: u64,
    max_new_contexts_per_stream: u64,
    #[serde(default, rename = "handle")]
    handles: Vec<HandleEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HandleEntry {
    handle: u32,
    name: String,
    payload: String,
    #[serde(default)]
    packages: Option<Vec<String>>,
    #[serde(default)]
    top_level_packages: Option<Vec<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GlobalEntry {
    module: String,
    name: String,
    constructor: String,
    #[serde(default)]
    forms: Option<Vec<String>>,
    #[serde(default)]
    args: Option<Vec<ArgEntry>>,
    #[serde(default)]
    min_args: Option<usize>,
    #[serde(default)]
    key: Option<String>,
    #[serde(default)]
    call_cost: Option<String>,
    #[serde(default)]
    build_cost: Option<String>,
    check: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ArgEntry {
    #[serde(rename = "type")]
    ty: String,
    #[serde(default)]
    nullable: bool,
    #[serde(default)]
    min: Option<i64>,
    #[serde(default)]
    max: Option<i64>,
    #[serde(default)]
    max_len: Option<u64>,
    #[serde(default)]
    keys: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ExtensionEntry {
    code: u32,
    module: String,
    name: String,
}

fn err(msg: impl Into<String>) -> PolicyError {
    PolicyError(msg.into())
}

fn arg_type(name: &str) -> Result<ArgType, PolicyError> {
    ArgType::from_name(name).ok_or_else(|| err(format!("unknown argument type {name:?}")))
}

/// Refuses an argument constraint that could never take effect (it would otherwise be
/// ignored, or refuse every call, without a word at load time).
fn check_arg(
    module: &str,
    name: &str,
    i: usize,
    ty: ArgType,
    a: &ArgEntry,
) -> Result<(), PolicyError> {
    let at = || format!("{module}.{name} argument {} ({:?})", i + 1, a.ty);
    // `any` takes every constraint: each applies to the values it fits (src/policy/schema.rs).
    let any = ty == ArgType::Any;
    if (a.min.is_some() || a.max.is_some()) && ty != ArgType::Int && !any {
        return Err(err(format!(
            "{}: min and max apply to int and any arguments only",
            at()
        )));
    }
    if let (Some(min), Some(max)) = (a.min, a.max) {
        if min > max {
            return Err(err(format!(
                "{}: min {min} is above max {max}, so no value matches",
                at()
            )));
        }
    }
    let has_len = matches!(
        ty,
        ArgType::Str | ArgType::Bytes | ArgType::Tuple | ArgType::List | ArgType::Dict
    );
    if a.max_len.is_some() && !has_len && !any {
        return Err(err(format!(
            "{}: max_len applies to str, bytes, tuple, list, dict and any arguments only",
            at()
        )));
    }
    if a.keys.is_some() && ty != ArgType::Dict && !any {
        return Err(err(format!(
            "{}: keys applies to dict and any arguments only",
            at()
        )));
    }
    if matches!(a.keys.as_deref(), Some("list" | "dict")) {
        return Err(err(format!(
            "{}: keys = {:?} can match no key (a list or dict is unhashable)",
            at(),
            a.keys.as_deref().unwrap_or_default()
        )));
    }
    Ok(())
}

pub(super) fn parse(text: &str) -> Result<Policy, PolicyError> {
    let file: PolicyFile = toml::from_str(text).map_err(|e| err(e.to_string()))?;
    let mut policy = Policy::empty(&file.name);
    policy.description = file.description;
    if file.python2_str_encoding.is_some() && file.python2_str.as_deref() != Some("str") {
        return Err(err(
            "python2_str_encoding applies only with python2_str = \"str\" (with \"bytes\", \
             the default, Python 2 strings stay bytes)",
        ));
    }
    policy.python2_str = match file.python2_str.as_deref() {
        None | Some("bytes") => Python2Str::Bytes,
        Some("str") => Python2Str::Str(match file.python2_str_encoding.as_deref() {
            None | Some("ascii") => TextEncoding::Ascii,
            Some("latin1" | "latin-1") => TextEncoding::Latin1,
            Some("utf-8" | "utf8") => TextEncoding::Utf8,
            Some(other) => return Err(err(format!("unknown python2_str_encoding {other:?}"))),
        }),
        Some(other) => {
            return Err(err(format!(
                "python2_str must be \"bytes\" or \"str\", not {other:?}"
            )))
        }
    };
    policy.persistent_ids = match file.persistent_ids.as_deref() {
        None | Some("reject") => {
            if file.persistent_id_args.is_some() || file.persistent_id_min_args.is_some() {
                return Err(err(
                    "persistent_id_args applies only with persistent_ids = \"record\"",
                ));
            }
            PersistentIds::Reject
        }
        Some("record") => PersistentIds::Record(match file.persistent_id_args {
            None if file.persistent_id_min_args.is_some() => {
                return Err(err(
                    "persistent_id_min_args applies only with persistent_id_args",
                ))
            }
            None => None,
            Some(entries) => Some(args_schema(
                "persistent id",
                "",
                entries,
                file.persistent_id_min_args,
            )?),
        }),
        Some(other) => {
            return Err(err(format!(
                "persistent_ids must be \"reject\" or \"record\", not {other:?}"
            )))
        }
    };
    let mut limits = Limits::default();
    for (name, value) in &file.limits {
        let limit: LimitName = name.parse().map_err(err)?;
        let value = match value {
            toml::Value::Integer(n) => u64::try_from(*n).ok(),
            toml::Value::String(t) => parse_size(t),
            _ => None,
        }
        .ok_or_else(|| {
            let shown = match value {
                toml::Value::Integer(n) => n.to_string(),
                toml::Value::Float(x) => x.to_string(),
                toml::Value::String(t) => format!("{t:?}"),
                other => format!("a {}", other.type_str()),
            };
            err(format!(
                "limit {name}: {shown} is not a count from 0 to 2**64 - 1 (an integer, or text \
                 of digits with an optional K, M or G suffix, as \"64M\")"
            ))
        })?;
        limits.set(limit, value);
    }
    policy.limits = limits;
    let mut seen = HashMap::new();
    for g in file.globals {
        let constructor = Constructor::from_name(&g.constructor).ok_or_else(|| {
            err(format!(
                "unknown constructor {:?} for {}.{}",
                g.constructor, g.module, g.name
            ))
        })?;
        if !is_python_name(&g.module) || !is_python_name(&g.name) {
            return Err(err(format!(
                "global {:?}.{:?}: a module and a name are Python identifiers joined by dots, \
                 as a pickler writes them",
                escape_for_display(&g.module),
                escape_for_display(&g.name)
            )));
        }
        if seen
            .insert((g.module.clone(), g.name.clone()), ())
            .is_some()
        {
            return Err(err(format!("global {}.{} listed twice", g.module, g.name)));
        }
        let check = match g.check.as_deref() {
            None => None,
            Some(c) => Some(Check::from_name(c).ok_or_else(|| {
                err(format!(
                    "{}.{}: unknown check {c:?} (one of: {})",
                    g.module,
                    g.name,
                    Check::NAMES.map(|(n, _)| n).join(", ")
                ))
            })?),
        };
        let forms = match g.forms {
            // A rule with a check takes the forms the check follows.
            None => check.map_or(constructor.supported_forms(), Check::forms),
            Some(names) => {
                let mut f = Forms::NONE;
                for n in &names {
                    if !f.set_by_name(n) {
                        return Err(err(format!(
                            "unknown form {n:?}; known: {}",
                            Forms::NAMES.join(", ")
                        )));
                    }
                }
                let supported = constructor.supported_forms().names();
                let lacking: Vec<&str> = f
                    .names()
                    .into_iter()
                    .filter(|n| !supported.contains(n))
                    .collect();
                if !lacking.is_empty() {
                    return Err(err(format!(
                        "{}.{}: constructor {:?} supports only the forms {} (not {})",
                        g.module,
                        g.name,
                        g.constructor,
                        supported.join(", "),
                        lacking.join(", ")
                    )));
                }
                f
            }
        };
        if g.args.is_none() && g.min_args.is_some() {
            return Err(err(format!(
                "{}.{}: min_args applies only with an args list",
                g.module, g.name
            )));
        }
        let args = match g.args {
            None => None,
            Some(entries) => {
                if constructor != Constructor::Record {
                    return Err(err(format!(
                        "args schemas apply to record globals only ({}.{})",
                        g.module, g.name
                    )));
                }
                Some(args_schema(&g.module, &g.name, entries, g.min_args)?)
            }
        };
        let key = match g.key.as_deref() {
            None => RecordKey::Identity,
            Some(k) => {
                let Some(&(_, key)) = RecordKey::NAMES.iter().find(|(n, _)| *n == k) else {
                    return Err(err(format!(
                        "{}.{}: unknown key {k:?} (one of: {})",
                        g.module,
                        g.name,
                        RecordKey::NAMES.map(|(n, _)| n).join(", ")
                    )));
                };
                if constructor != Constructor::Record {
                    return Err(err(format!(
                        "key applies to record globals only ({}.{})",
                        g.module, g.name
                    )));
                }
                let datetime_type = g.module == "datetime"
                    && ["date", "time", "datetime", "timedelta", "timezone"]
                        .contains(&g.name.as_str());
                if key == RecordKey::Datetime && !datetime_type {
                    return Err(err(format!(
                        "key \"datetime\" applies to datetime.date, time, datetime, timedelta \
                         and timezone only ({}.{})",
                        g.module, g.name
                    )));
                }
                key
            }
        };
        let cost = |setting: &str, given: Option<&str>| -> Result<Cost, PolicyError> {
            let Some(name) = given else {
                return Ok(Cost::Walks);
            };
            if constructor != Constructor::Record {
                return Err(err(format!(
                    "{setting} applies to record globals only ({}.{})",
                    g.module, g.name
                )));
            }
            Cost::NAMES
                .iter()
                .find(|(n, _)| *n == name)
                .map(|&(_, c)| c)
                .ok_or_else(|| {
                    err(format!(
                        "{}.{}: unknown {setting} {name:?} (one of: {})",
                        g.module,
                        g.name,
                        Cost::NAMES.map(|(n, _)| n).join(", ")
                    ))
                })
        };
        let call_cost = cost("call_cost", g.call_cost.as_deref())?;
        let build_cost = cost("build_cost", g.build_cost.as_deref())?;
        if let Some(check) = check {
            super::builder::check_forms(&g.module, &g.name, constructor, forms, check)?;
        }
        policy.allow(GlobalRule {
            module: g.module,
            name: g.name,
            constructor,
            forms,
            args,
            key,
            call_cost,
            build_cost,
            check,
        });
    }
    if let Some(m) = file.mitogen {
        policy.mitogen = message_policy(m)?;
    }
    for e in file.extensions {
        // As CPython's copyreg.add_extension: codes 1 to 0x7fffffff, each mapped once. And the
        // global must be one this policy allows, or the code could never decode: a mistake
        // better reported here than as a refusal of every pickle that uses it.
        let at = format!("[[extension]] code {}", e.code);
        if e.code == 0 || e.code > 0x7fff_ffff {
            return Err(err(format!("{at}: codes run from 1 to 2147483647")));
        }
        if policy.find(&e.module, &e.name).is_none() {
            return Err(err(format!(
                "{at}: {}.{} is not allowed by any [[global]] of this policy",
                e.module, e.name
            )));
        }
        if policy.extensions.contains_key(&e.code) {
            return Err(err(format!("{at} is mapped twice")));
        }
        policy.extensions.insert(e.code, (e.module, e.name));
    }
    Ok(policy)
}

fn message_policy(m: MitogenEntry) -> Result<MessagePolicy, PolicyError> {
    let mut handles = BTreeMap::new();
    for h in m.handles {
        let at = format!("[[mitogen.handle]] {} ({})", h.handle, h.name);
        if h.handle >= FIRST_REPLY_HANDLE {
            return Err(err(format!(
                "{at}: handles from {FIRST_REPLY_HANDLE} up are reply handles, allowed by \
                 reply_handles, not listed"
            )));
        }
        if h.top_level_packages.is_some() && h.payload != "module_name" {
            return Err(err(format!(
                "{at}: top_level_packages applies to payload = \"module_name\" only"
            )));
        }
        let payload = match (h.payload.as_str(), h.packages) {
            ("resource_request", packages) => PayloadRule::ResourceRequest {
                packages: packages.unwrap_or_default(),
            },
            (_, Some(_)) => {
                return Err(err(format!(
                    "{at}: packages applies to payload = \"resource_request\" only"
                )))
            }
            ("empty", None) => PayloadRule::Empty,
            ("raw", None) => PayloadRule::Raw,
            ("module_name", None) => PayloadRule::ModuleName {
                top_level_packages: h.top_level_packages,
            },
            ("route", None) => PayloadRule::Route,
            ("route_id", None) => PayloadRule::RouteId,
            ("service_call", None) => PayloadRule::ServiceCall,
            ("pickles", None) => PayloadRule::Pickles,
            (other, None) => {
                return Err(err(format!(
                    "{at}: unknown payload {other:?} (one of: {})",
                    PayloadRule::NAMES.join(", ")
                )))
            }
        };
        let rule = HandleRule {
            name: h.name,
            payload,
        };
        if handles.insert(h.handle, rule).is_some() {
            return Err(err(format!("{at} is listed twice")));
        }
    }
    Ok(MessagePolicy {
        handles,
        reply_handles: m.reply_handles,
        max_new_contexts_per_frame: m.max_new_contexts_per_frame,
        max_new_contexts_per_stream: m.max_new_contexts_per_stream,
    })
}

/// The argument schema of `module.name` (or of the persistent id) from its `args` entries.
fn args_schema(
    module: &str,
    name: &str,
    entries: Vec<ArgEntry>,
    min_args: Option<usize>,
) -> Result<ArgsSchema, PolicyError> {
    let mut specs = Vec::with_capacity(entries.len());
    for (i, a) in entries.into_iter().enumerate() {
        let ty = arg_type(&a.ty)?;
        check_arg(module, name, i, ty, &a)?;
        specs.push(ArgSpec {
            ty,
            nullable: a.nullable,
            min: a.min,
            max: a.max,
            max_len: a.max_len,
            keys: a.keys.as_deref().map(arg_type).transpose()?,
        });
    }
    let min_args = min_args.unwrap_or(specs.len());
    if min_args > specs.len() {
        return Err(err(format!(
            "min_args {min_args} is more than the {} args listed",
            specs.len()
        )));
    }
    Ok(ArgsSchema {
        args: specs,
        min_args,
    })
}
