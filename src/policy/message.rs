//! The Mitogen message policy: which handles a child may send to (its parent, or through it any
//! context upstream) and what each payload may be, plus the bounds on the Contexts a child can
//! make its parent keep. The `[mitogen]` section of a policy file
//! ([`super::Policy::mitogen`]); checked by [`crate::mitogen::StreamCheck`].
//!
//! Every rule is read from Mitogen 0.3.54 (`mitogen/core.py`, `master.py`, `parent.py`,
//! `service.py`): a child's message reaches `Router._invoke` in the context it is addressed to,
//! which looks the handle up and runs its receiver there. A handle with no receiver is answered
//! `invalid handle` and never read; a receiver registered with `policy=has_parent_authority`
//! refuses every message a child sends (its `auth_id` is the child's own, which the parent
//! checks against the stream it came in on in `Router._async_route`), so a child has no reason
//! to send to it.

use std::collections::BTreeMap;

/// The first handle a Router hands out for replies and receivers (`Router._last_handle =
/// itertools.count(1000)` in `mitogen/core.py`): handles from here up are the parent's own
/// receivers, which wait for a child's replies.
pub const FIRST_REPLY_HANDLE: u32 = 1000;

/// Default of [`MessagePolicy::max_new_contexts_per_frame`]: 100 Context ids.
pub const DEFAULT_MAX_NEW_CONTEXTS_PER_FRAME: u64 = 100;

/// Default of [`MessagePolicy::max_new_contexts_per_stream`]: 10,000 Context ids.
pub const DEFAULT_MAX_NEW_CONTEXTS_PER_STREAM: u64 = 10_000;

/// Longest module name a `module_name` payload may hold, in bytes: `PATH_MAX` (4096), longer
/// than any module the parent's finder could find a file for.
pub const MAX_MODULE_NAME_BYTES: usize = 4096;

/// What a handle's payload may be: a closed set, each checked in Rust
/// ([`crate::mitogen::StreamCheck`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PayloadRule {
    /// `"empty"`: no payload bytes (ALLOCATE_ID and DETACHING: `Message(handle=...)` with no
    /// data; their receivers never read it).
    Empty,
    /// `"raw"`: any bytes, never unpickled (FORWARD_LOG: `LogForwarder._on_forward_log` splits
    /// `name\0level\0message` decoded as UTF-8 with `'replace'`).
    Raw,
    /// `"module_name"`: a dotted Python module name (UTF-8; parts of letters, digits and `_`,
    /// none empty or starting with a digit; at most [`MAX_MODULE_NAME_BYTES`]), as
    /// `Importer._request_module` sends it to GET_MODULE (`ModuleResponder._on_get_module`:
    /// `msg.data.decode()`).
    ModuleName {
        /// When set (`top_level_packages`), the name's first part must be one of these: the
        /// master's `ModuleFinder` imports the parent package of a name it looks up
        /// (`importlib.util.find_spec('pkg.mod')` imports `pkg`, `mitogen/master.py`
        /// `_find_loader`), so a child naming `this.x` makes the master import `this`.
        /// `None` accepts any.
        top_level_packages: Option<Vec<String>>,
    },
    /// `"route"`: `ID` or `ID:NAME`, ID decimal digits up to `Context.ID_MAX` (2**32 - 1) and
    /// NAME UTF-8, as `RouteMonitor._send_one` writes ADD_ROUTE; `_on_add_route` makes the
    /// parent's Router keep a Context for ID (`context_by_id(target_id)`), so a new ID counts
    /// against the Context bounds.
    Route,
    /// `"route_id"`: `ID` alone, decimal digits up to 2**32 - 1 (DEL_ROUTE:
    /// `_on_del_route`'s `int(msg.data)`).
    RouteId,
    /// `"service_call"`: one pickle holding `(service_name, method_name, kwargs)` with two
    /// str or bytes and a dict or `mitogen.core.Kwargs`, what `service.Pool._validate` demands
    /// of CALL_SERVICE (`Context.call_service_async` writes it).
    ServiceCall,
    /// `"resource_request"`: one pickle holding `(package, resource)`, two str, `package`
    /// exactly one of `packages` (GET_RESOURCE: `ResourceResponder._on_get_resource` runs
    /// `importlib.resources.read_binary(package, resource)` in the master, which imports
    /// `package`).
    ResourceRequest {
        /// The packages whose resources a child may read; empty refuses every request.
        packages: Vec<String>,
    },
    /// `"pickles"`: any pickles the policy's globals and limits accept (replies).
    Pickles,
}

impl PayloadRule {
    /// The names policy files use, in [`PayloadRule`]'s order.
    pub const NAMES: [&'static str; 8] = [
        "empty",
        "raw",
        "module_name",
        "route",
        "route_id",
        "service_call",
        "resource_request",
        "pickles",
    ];

    /// The rule's name as policy files spell it.
    pub fn name(&self) -> &'static str {
        match self {
            PayloadRule::Empty => "empty",
            PayloadRule::Raw => "raw",
            PayloadRule::ModuleName { .. } => "module_name",
            PayloadRule::Route => "route",
            PayloadRule::RouteId => "route_id",
            PayloadRule::ServiceCall => "service_call",
            PayloadRule::ResourceRequest { .. } => "resource_request",
            PayloadRule::Pickles => "pickles",
        }
    }
}

/// One standard handle (below [`FIRST_REPLY_HANDLE`]) a child may send to.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct HandleRule {
    /// Mitogen's name for it (`"GET_MODULE"`), shown in refusals.
    pub name: String,
    /// What its payload may be.
    pub payload: PayloadRule,
}

/// The Mitogen message policy of a [`super::Policy`] (its `[mitogen]` section): see the module
/// docs. A policy file without the section gets [`MessagePolicy::mitogen`], so a frame checker
/// never runs without one.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct MessagePolicy {
    /// The standard handles a child may send to, by number; every other handle below
    /// [`FIRST_REPLY_HANDLE`] is refused (`handle_not_allowed`).
    pub handles: BTreeMap<u32, HandleRule>,
    /// Whether a child may send to handles from [`FIRST_REPLY_HANDLE`] up (replies to the
    /// parent's calls, messages to its Receivers), with any payload the policy's globals and
    /// limits accept, and dead messages (a child closing a channel, `Sender.close`).
    pub reply_handles: bool,
    /// Most distinct Context ids not seen before on the stream that one frame may name, through
    /// `mitogen.core._unpickle_context` calls (every call the child's pickle makes counts, kept
    /// or popped: the parent's unpickler runs them all) and ADD_ROUTE. Unit: Context ids.
    /// Reason: `Router.context_by_id` keeps every Context it makes in `_context_by_id` for the
    /// life of the parent and never drops one, so a child could make its parent hold a million
    /// Contexts (hundreds of megabytes) with one 10 MB frame.
    pub max_new_contexts_per_frame: u64,
    /// Most distinct Context ids one stream (one child) may name over its life, counted as for
    /// [`MessagePolicy::max_new_contexts_per_frame`]. Unit: Context ids. Reason: the same, over
    /// many frames each under the per-frame bound.
    pub max_new_contexts_per_stream: u64,
}

impl MessagePolicy {
    /// Mitogen 0.3.54's parent, as `policy/mitogen.toml` writes it (the two must agree; a test
    /// checks it): GET_MODULE (`module_name`), FORWARD_LOG (`raw`), ADD_ROUTE (`route`),
    /// DEL_ROUTE (`route_id`), ALLOCATE_ID and DETACHING (`empty`), CALL_SERVICE
    /// (`service_call`); GET_RESOURCE with no package (refused); reply handles allowed; the
    /// default Context bounds. See `policy/mitogen.toml` for the source line of each decision.
    pub fn mitogen() -> MessagePolicy {
        let rule = |name: &str, payload| HandleRule {
            name: name.to_owned(),
            payload,
        };
        let handles = BTreeMap::from([
            (
                100,
                rule(
                    "GET_MODULE",
                    PayloadRule::ModuleName {
                        top_level_packages: None,
                    },
                ),
            ),
            (102, rule("FORWARD_LOG", PayloadRule::Raw)),
            (103, rule("ADD_ROUTE", PayloadRule::Route)),
            (104, rule("DEL_ROUTE", PayloadRule::RouteId)),
            (105, rule("ALLOCATE_ID", PayloadRule::Empty)),
            (109, rule("DETACHING", PayloadRule::Empty)),
            (110, rule("CALL_SERVICE", PayloadRule::ServiceCall)),
            (
                112,
                rule(
                    "GET_RESOURCE",
                    PayloadRule::ResourceRequest {
                        packages: Vec::new(),
                    },
                ),
            ),
        ]);
        MessagePolicy {
            handles,
            reply_handles: true,
            max_new_contexts_per_frame: DEFAULT_MAX_NEW_CONTEXTS_PER_FRAME,
            max_new_contexts_per_stream: DEFAULT_MAX_NEW_CONTEXTS_PER_STREAM,
        }
    }

    /// The name of a handle for messages: the rule's name, `reply` for a reply handle, or
    /// Mitogen's constant name for a standard handle the policy does not list.
    pub fn handle_name(&self, handle: u32) -> &str {
        if let Some(r) = self.handles.get(&handle) {
            return &r.name;
        }
        if handle >= FIRST_REPLY_HANDLE {
            return "reply";
        }
        match handle {
            100 => "GET_MODULE",
            101 => "CALL_FUNCTION",
            102 => "FORWARD_LOG",
            103 => "ADD_ROUTE",
            104 => "DEL_ROUTE",
            105 => "ALLOCATE_ID",
            106 => "SHUTDOWN",
            107 => "LOAD_MODULE",
            108 => "FORWARD_MODULE",
            109 => "DETACHING",
            110 => "CALL_SERVICE",
            111 => "STUB_CALL_SERVICE",
            112 => "GET_RESOURCE",
            113 => "LOAD_RESOURCE",
            _ => "no receiver",
        }
    }
}

impl Default for MessagePolicy {
    /// [`MessagePolicy::mitogen`].
    fn default() -> MessagePolicy {
        MessagePolicy::mitogen()
    }
}
