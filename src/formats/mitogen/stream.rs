//! The Mitogen message policy applied to a child's stream, frame by frame ([`StreamCheck`]),
//! what a refusal does to the stream ([`Disposition`]), and the dead messages that fail the
//! refused frame's call ([`refusal_notices`]).

use std::collections::HashSet;
use std::sync::OnceLock;

use super::{Content, Enc, Frame, FrameError, Header, HEADER_LEN, IS_DEAD};
use crate::error::{Category, ErrorKind};
use crate::limits::Limits;
use crate::policy::message::{
    MessagePolicy, PayloadRule, FIRST_REPLY_HANDLE, MAX_MODULE_NAME_BYTES,
};
use crate::policy::Policy;
use crate::value::{Document, Value};

/// Longest refusal reason a dead notice carries, in bytes (the rest is cut at a character
/// boundary): the reason names the kind, the offset and an escaped, truncated excerpt, which
/// fit well within it.
pub const MAX_NOTICE_REASON_BYTES: usize = 1024;

/// The message policy's running state for one child's stream: the Context ids it named so far
/// (at most [`MessagePolicy::max_new_contexts_per_stream`] of them, 4 bytes each plus the
/// set's overhead).
#[derive(Debug, Default)]
pub struct StreamCheck {
    contexts: HashSet<u32>,
}

impl StreamCheck {
    /// A stream that has named no Context yet.
    pub fn new() -> StreamCheck {
        StreamCheck::default()
    }

    /// How many distinct Context ids the stream's accepted frames named.
    pub fn contexts_seen(&self) -> usize {
        self.contexts.len()
    }

    /// Checks one frame a child sent towards its parent: its handle against `policy.mitogen`
    /// (before anything is decoded), its payload under the policy's globals and `limits`
    /// ([`Frame::decode`]), the payload's shape against the handle's [`PayloadRule`], and the
    /// Context ids it names against the per-frame and per-stream bounds. The ids of an
    /// accepted frame are added to the stream's; a refused frame adds none.
    ///
    /// # Errors
    /// [`FrameError::HandleNotAllowed`] for a handle the policy does not list (or a dead
    /// message to a standard handle), [`FrameError::Payload`] for a refused payload,
    /// [`FrameError::PayloadNotAllowed`] for a payload of the wrong shape,
    /// [`FrameError::MessageLimit`] naming `max_new_contexts_per_frame` or
    /// `max_new_contexts_per_stream` with the count the frame would reach. Offsets are the
    /// frame's header offset, but for payload refusals (the refused opcode).
    pub fn check_frame<'f>(
        &mut self,
        frame: &'f Frame,
        policy: &Policy,
        limits: Limits,
    ) -> Result<Content<'f>, FrameError> {
        let messages = &policy.mitogen;
        let h = frame.header;
        let rule = check_handle(&h, frame.offset, messages)?;
        let not_allowed = |why: String| FrameError::PayloadNotAllowed {
            handle: h.handle,
            name: messages.handle_name(h.handle).to_owned(),
            why,
            offset: frame.offset,
        };
        let payload = frame.payload();
        let mut new_ids = Vec::new();
        // The receivers of these handles read the payload as bytes whatever the enc says, and
        // never unpickle it: so it is checked as bytes and handed on as received.
        let raw = match rule {
            Some(PayloadRule::Raw) => true,
            Some(PayloadRule::Empty) => {
                if !payload.is_empty() {
                    return Err(not_allowed(format!(
                        "{} payload bytes where Mitogen sends none",
                        payload.len()
                    )));
                }
                true
            }
            Some(PayloadRule::ModuleName { top_level_packages }) => {
                module_name(payload).map_err(not_allowed)?;
                if let Some(list) = top_level_packages {
                    top_level_package(payload, list).map_err(not_allowed)?;
                }
                true
            }
            Some(PayloadRule::Route) => {
                let (id, name) = match payload.iter().position(|&b| b == b':') {
                    Some(at) => (
                        payload.get(..at).unwrap_or_default(),
                        payload.get(at + 1..).unwrap_or_default(),
                    ),
                    None => (payload, &b""[..]),
                };
                new_ids.push(context_id(id).map_err(not_allowed)?);
                std::str::from_utf8(name)
                    .map_err(|_| not_allowed("the route's name is not UTF-8".into()))?;
                true
            }
            Some(PayloadRule::RouteId) => {
                context_id(payload).map_err(not_allowed)?;
                true
            }
            _ => false,
        };
        let content = if raw {
            Content::Raw(payload)
        } else {
            frame.decode(policy, limits)?
        };
        match (rule, &content) {
            (Some(PayloadRule::ServiceCall), Content::Values(doc)) => {
                service_call(doc).map_err(not_allowed)?;
            }
            (Some(PayloadRule::ResourceRequest { packages }), Content::Values(doc)) => {
                resource_request(doc, packages).map_err(not_allowed)?;
            }
            (Some(PayloadRule::ServiceCall | PayloadRule::ResourceRequest { .. }), _) => {
                return Err(not_allowed(
                    "not pickled (Mitogen's receiver unpickles it)".into(),
                ));
            }
            _ => {}
        }
        if let Content::Values(doc) = &content {
            new_ids.extend(context_ids(doc));
        }
        self.count_contexts(new_ids, messages, frame.offset)?;
        Ok(content)
    }

    fn count_contexts(
        &mut self,
        mut ids: Vec<u32>,
        messages: &MessagePolicy,
        offset: u64,
    ) -> Result<(), FrameError> {
        ids.sort_unstable();
        ids.dedup();
        ids.retain(|id| !self.contexts.contains(id));
        let new = ids.len() as u64;
        if new > messages.max_new_contexts_per_frame {
            return Err(FrameError::MessageLimit {
                setting: "max_new_contexts_per_frame",
                seen: new,
                max: messages.max_new_contexts_per_frame,
                offset,
            });
        }
        let total = self.contexts.len() as u64 + new;
        if total > messages.max_new_contexts_per_stream {
            return Err(FrameError::MessageLimit {
                setting: "max_new_contexts_per_stream",
                seen: total,
                max: messages.max_new_contexts_per_stream,
                offset,
            });
        }
        self.contexts.extend(ids);
        Ok(())
    }
}

/// The handle's rule (`None` for a reply handle), or the refusal.
fn check_handle<'p>(
    h: &Header,
    offset: u64,
    messages: &'p MessagePolicy,
) -> Result<Option<&'p PayloadRule>, FrameError> {
    let refused = || FrameError::HandleNotAllowed {
        handle: h.handle,
        name: messages.handle_name(h.handle).to_owned(),
        dead: h.is_dead(),
        offset,
    };
    if h.handle >= FIRST_REPLY_HANDLE {
        return if messages.reply_handles {
            Ok(None)
        } else {
            Err(refused())
        };
    }
    // A dead message to a standard handle: CALL_SERVICE's `service.Pool` worker ends on one
    // (`Select.get_event` raises ChannelError from `Receiver.get`, `_worker_run` returns), the
    // others ignore it; Mitogen's own child sends none upstream.
    if h.is_dead() {
        return Err(refused());
    }
    messages
        .handles
        .get(&h.handle)
        .map(|r| Some(&r.payload))
        .ok_or_else(refused)
}

/// `_unpickle_context` calls' first arguments, every one the document made.
fn context_ids(doc: &Document<'_>) -> Vec<u32> {
    let mut ids = Vec::new();
    for v in doc.nodes() {
        let Value::Object(o) = v else { continue };
        let Some(Value::Global(g)) = doc.get(o.callable) else {
            continue;
        };
        if g.module != "mitogen.core" || g.name != "_unpickle_context" {
            continue;
        }
        let Some(Value::Tuple(args)) = doc.get(o.args) else {
            continue;
        };
        if let Some(Value::Int(i)) = args.first().and_then(|&a| doc.get(a)) {
            if let Ok(id) = u32::try_from(i) {
                ids.push(id);
            }
        }
    }
    ids
}

/// A Context id as Mitogen writes it in route messages (`str(target_id)`): ASCII digits, at
/// most `Context.ID_MAX` (2**32 - 1).
fn context_id(text: &[u8]) -> Result<u32, String> {
    let shown = || crate::error::escape_bytes_for_display(text);
    if text.is_empty() || !text.iter().all(u8::is_ascii_digit) {
        return Err(format!(
            "{:?} is not a context id (decimal digits)",
            shown()
        ));
    }
    std::str::from_utf8(text)
        .ok()
        .and_then(|t| t.parse::<u32>().ok())
        .ok_or_else(|| format!("context id {} is over 2**32 - 1", shown()))
}

fn module_name(bytes: &[u8]) -> Result<(), String> {
    if bytes.len() > MAX_MODULE_NAME_BYTES {
        return Err(format!(
            "a module name of {} bytes (at most {MAX_MODULE_NAME_BYTES})",
            bytes.len()
        ));
    }
    let bad = || {
        format!(
            "{:?} is not a dotted module name",
            crate::error::escape_bytes_for_display(bytes)
        )
    };
    let text = std::str::from_utf8(bytes).map_err(|_| bad())?;
    let part_ok = |p: &str| {
        p.chars()
            .next()
            .is_some_and(|c| c.is_alphabetic() || c == '_')
            && p.chars().all(|c| c.is_alphanumeric() || c == '_')
    };
    if text.split('.').all(part_ok) {
        Ok(())
    } else {
        Err(bad())
    }
}

/// The first part of a module name (already checked by [`module_name`]) must be listed.
fn top_level_package(name: &[u8], list: &[String]) -> Result<(), String> {
    let text = std::str::from_utf8(name).unwrap_or_default();
    let top = text.split('.').next().unwrap_or_default();
    if list.iter().any(|p| p == top) {
        Ok(())
    } else {
        Err(format!(
            "top-level package {:?} is not one the policy lets a child import from (the \
             master's finder imports the parent package of a name it looks up)",
            crate::error::escape_for_display(top)
        ))
    }
}

/// The one value of a payload that Mitogen's receiver reads with `msg.unpickle()`.
fn one_tuple<'d>(doc: &'d Document<'_>, len: usize) -> Result<Vec<Value<'d>>, String> {
    let [root] = doc.roots() else {
        return Err(format!(
            "{} pickles where Mitogen sends one",
            doc.roots().len()
        ));
    };
    match doc.get(*root) {
        Some(Value::Tuple(items)) if items.len() == len => {
            Ok(items.iter().filter_map(|&i| doc.get(i)).collect())
        }
        Some(Value::Tuple(items)) => Err(format!(
            "a tuple of {} where Mitogen sends a tuple of {len}",
            items.len()
        )),
        Some(v) => Err(format!(
            "a {} where Mitogen sends a tuple of {len}",
            v.type_name()
        )),
        None => Err("no value".into()),
    }
}

fn is_global(doc: &Document<'_>, v: &Value<'_>, module: &str, name: &str) -> bool {
    match v {
        Value::Object(o) => {
            matches!(doc.get(o.callable), Some(Value::Global(g)) if g.module == module && g.name == name)
        }
        _ => false,
    }
}

/// `service.Pool._validate`: `(str|bytes, str|bytes, dict)`, a `Kwargs` being a dict.
fn service_call(doc: &Document<'_>) -> Result<(), String> {
    let items = one_tuple(doc, 3)?;
    let text = |v: &Value<'_>| matches!(v, Value::Str(_) | Value::Bytes(_));
    match items.as_slice() {
        [name, method, kwargs]
            if text(name)
                && text(method)
                && (matches!(kwargs, Value::Dict(_))
                    || is_global(doc, kwargs, "mitogen.core", "Kwargs")) =>
        {
            Ok(())
        }
        _ => Err(
            "not (service name, method name, kwargs dict) as service.Pool._validate \
                  demands"
                .into(),
        ),
    }
}

/// `ResourceResponder._on_get_resource`: `(package, resource)`, the package one of those the
/// policy lists.
fn resource_request(doc: &Document<'_>, packages: &[String]) -> Result<(), String> {
    let items = one_tuple(doc, 2)?;
    match items.as_slice() {
        [Value::Str(package), Value::Str(_)] => {
            let name = package.as_str().unwrap_or_default();
            if packages.iter().any(|p| p == name) {
                Ok(())
            } else {
                Err(format!(
                    "package {:?} is not one whose resources the policy lets a child read \
                     (the master would import it: importlib.resources.read_binary)",
                    crate::error::escape_for_display(name)
                ))
            }
        }
        _ => Err("not (package, resource) as two str".into()),
    }
}

/// What a refusal does to the stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Disposition {
    /// The refused frame fails only its own call ([`refusal_notices`]); the child stays
    /// connected, as stock Mitogen's parent stays connected when its unpickler or a handler's
    /// policy refuses one message.
    FailCall,
    /// The stream is cut: the frame shows a child that is not stock Mitogen and means harm,
    /// or frame boundaries are lost.
    Disconnect,
}

impl FrameError {
    /// Whether the refusal fails one call or cuts the stream:
    /// - [`Disposition::Disconnect`] for a framing error (bad enc, oversized length, a stream
    ///   ending inside a frame: Mitogen itself disconnects, and frame boundaries are lost), a
    ///   malformed or truncated pickle (Mitogen's Pickler never writes one; CPython may read it
    ///   otherwise than picklewarden), and a global that is neither Mitogen's nor plain data
    ///   (allowed by the built-in `data` or `mitogen-plus` policies): `os.system`,
    ///   `builtins.eval`, any class of the child's choosing;
    /// - [`Disposition::FailCall`] for everything else, one bad value a stock child can send:
    ///   a limit, a plain-data global Mitogen refuses (`__builtin__.set`: a function returning
    ///   a set), a constructor's arguments, a frame with no canonical pickle, a handle or
    ///   payload the message policy refuses, the Context bounds.
    pub fn disposition(&self) -> Disposition {
        let hostile = match self {
            FrameError::BadEnc { .. }
            | FrameError::TooLarge { .. }
            | FrameError::Truncated { .. } => true,
            FrameError::Payload(e) | FrameError::CanonicalRefused { error: e, .. } => {
                // A payload that is no pickle at all is judged by the refusal its first
                // opcode met (a zip archive's PERSID fails the call, as before).
                let e = e.read_as_pickle().unwrap_or(e);
                match e.kind() {
                    ErrorKind::GlobalNotAllowed { module, name } => {
                        !is_plain_data_global(module, name)
                    }
                    _ => matches!(
                        e.category(),
                        Category::Malformed | Category::Truncated | Category::Io
                    ),
                }
            }
            FrameError::NoCanonical { .. }
            | FrameError::HandleNotAllowed { .. }
            | FrameError::PayloadNotAllowed { .. }
            | FrameError::MessageLimit { .. } => false,
        };
        if hostile {
            Disposition::Disconnect
        } else {
            Disposition::FailCall
        }
    }
}

/// Whether the built-in `data` or `mitogen-plus` policy allows `module.name`: the globals
/// CPython's pickler writes for plain data (set, frozenset, bytearray, complex, the datetime
/// family, ...).
fn is_plain_data_global(module: &str, name: &str) -> bool {
    static DATA: OnceLock<Vec<Policy>> = OnceLock::new();
    DATA.get_or_init(|| {
        ["data", "mitogen-plus"]
            .into_iter()
            .filter_map(Policy::builtin)
            .collect()
    })
    .iter()
    .any(|p| p.find(module, name).is_some())
}

/// The dead messages that fail a refused frame's call, addressed as Mitogen's
/// `Router._maybe_send_dead` (`mitogen/core.py`) addresses its own when a message cannot be
/// delivered, each a whole frame (26-byte header, the UTF-8 reason, at most
/// [`MAX_NOTICE_REASON_BYTES`]) for the parent's side of the stream:
/// - to the parent's receiver the frame was for, when that is a reply handle (from
///   [`FIRST_REPLY_HANDLE`] up): `dst_id` and `handle` of the frame, `reply_to` [`IS_DEAD`];
///   the parent's `Receiver.get` raises `ChannelError(reason)`, so the call waiting for the
///   reply fails and nothing else does;
/// - to the child's own receiver when the frame asked for a reply (`reply_to` set): `dst_id`
///   the frame's `src_id`, `handle` its `reply_to`; the parent routes it back down the stream it
///   came from (`Router._async_route`; not in `unidirectional` routing mode, and only for a
///   frame from the child itself, not from a context behind it, whose parent checks `auth_id`
///   on the way down), so the child's request fails instead of waiting forever.
///
/// Both keep the frame's `src_id` and `auth_id`, which the parent checks against the stream
/// they arrive on. A dead frame gets no notice (as `_maybe_send_dead` never answers one), and
/// neither does a frame to a standard handle without `reply_to` (nothing waits for it).
/// The reason starts `refused by picklewarden`, like Mitogen's own `refused by policy`: its
/// first byte fails as a pickle at once (LONG_BINPUT on an empty stack), so a receiver that
/// unpickles it with `throw_dead=False` runs nothing.
pub fn refusal_notices(header: &Header, reason: &str) -> Vec<u8> {
    let mut text = format!("refused by picklewarden: {reason}");
    if text.len() > MAX_NOTICE_REASON_BYTES {
        let mut cut = MAX_NOTICE_REASON_BYTES;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
    }
    let mut out = Vec::new();
    if header.is_dead() {
        return out;
    }
    let mut push = |dst_id: u32, handle: u32| {
        let h = Header {
            enc: Enc::Legacy,
            dst_id,
            src_id: header.src_id,
            auth_id: header.auth_id,
            handle,
            reply_to: IS_DEAD,
            length: u32::try_from(text.len()).unwrap_or(0),
        };
        out.reserve(HEADER_LEN + text.len());
        out.extend_from_slice(&h.to_bytes());
        out.extend_from_slice(text.as_bytes());
    };
    if header.handle >= FIRST_REPLY_HANDLE {
        push(header.dst_id, header.handle);
    }
    if header.reply_to != 0 {
        push(header.src_id, header.reply_to);
    }
    out
}

#[cfg(test)]
#[path = "stream_test.rs"]
mod tests;
