//! Errors by the one pass: when the build refuses on grounds only it can see (a constructor's
//! argument contents, an unhashable key, the node, item, allocation and key-work budgets, the
//! nesting depth), a scan takes over from the opcode it refused at, on the symbols of what the
//! machine holds there ([`crate::scan::resume`]). A refusal the scan finds is the one reported,
//! as a scan of the whole input would report it: the scan's every rule is the interpreter's
//! (`src/vm/`), which the build ran on every opcode before, and the interpreter leaves the
//! stack and the MARKs as they were before an opcode whose value operation refuses. Any other
//! refusal of the build is one of those rules, at the opcode where the scan meets it too.

use std::time::Instant;

use super::machine::Machine;
use crate::error::{Error, ErrorKind};
use crate::limits::LimitName;
use crate::opcode::Opcode;
use crate::scan::{resume, Resume};
use crate::value::{NodeId, Value};
use crate::vm::Kind;

/// Whether the build may refuse with `kind` where the scan passes: the limits and checks that
/// need the values.
fn build_only(kind: &ErrorKind) -> bool {
    match kind {
        ErrorKind::LimitExceeded { limit, .. } => matches!(
            limit,
            LimitName::MaxNestingDepth
                | LimitName::MaxContainerItems
                | LimitName::MaxNodes
                | LimitName::MaxAllocBytes
                | LimitName::MaxKeySteps
                | LimitName::MaxKeyStepsPerByte
                | LimitName::MaxKeyCollisions
                | LimitName::MaxCopyBytesPerByte
        ),
        ErrorKind::ConstructorRejected(_)
        | ErrorKind::NonCanonical(_)
        | ErrorKind::UnhashableKey
        | ErrorKind::AllocationFailed { .. } => true,
        _ => false,
    }
}

impl<'a> Machine<'a, '_> {
    /// What node `id` is, as the scan sees it.
    fn kind_of(&self, id: NodeId) -> Kind {
        if let Some(
            crate::value::Node::Str { start, len } | crate::value::Node::Surrogates { start, len },
        ) = self.arena.node(id)
        {
            return Kind::InputStr {
                start: start as usize,
                len: len as usize,
            };
        }
        match self.arena.get(id) {
            Some(Value::Str(s)) => Kind::OwnedStr(s.as_bytes().to_vec(), s.has_surrogates()),
            Some(Value::Bytes(_)) => Kind::Bytes,
            Some(Value::ByteArray(_)) => Kind::ByteArray,
            Some(Value::List(_)) => Kind::List,
            Some(Value::Tuple(_)) => Kind::Tuple,
            Some(Value::Dict(_)) => Kind::Dict,
            Some(Value::Set(_)) => Kind::Set,
            Some(Value::FrozenSet(_)) => Kind::FrozenSet,
            Some(Value::Global(g)) => Kind::Global(g.rule),
            Some(Value::Object(o)) => match self.arena.get(o.callable) {
                Some(Value::Global(g)) => Kind::Object(g.rule),
                _ => Kind::Scalar,
            },
            _ => Kind::Scalar,
        }
    }

    /// The error a decode in one pass reports for the build's refusal `e`, met by
    /// [`Machine::run`]: `e`, unless it is one only the build sees and the scan, taking over
    /// from there, refuses the input.
    pub(super) fn rescan(
        &self,
        e: Error,
        stream: bool,
        allow_trailing: bool,
        deadline: Option<Instant>,
    ) -> Error {
        let input = self.r.input;
        if !build_only(e.kind()) {
            return crate::sniff::explain(input, e);
        }
        let memo_put = [
            Opcode::Put,
            Opcode::Binput,
            Opcode::LongBinput,
            Opcode::Memoize,
        ]
        .iter()
        .any(|o| o.byte() == self.r.op);
        // A memo entry set but its tables' growth refused: the entry is in the memo, so the
        // scan goes on after it, once it has seen the growth it refuses too.
        let after = memo_put
            && matches!(
                e.kind(),
                ErrorKind::LimitExceeded {
                    limit: LimitName::MaxAllocBytes,
                    ..
                }
            );
        if after {
            let bytes = self.memo.charged_bytes();
            if bytes > self.limits.max_alloc_bytes {
                return self.limit(LimitName::MaxAllocBytes, bytes);
            }
        }
        let kind_of = |id| self.kind_of(id);
        let at = Resume {
            pos: if after { self.r.pos } else { self.r.op_pos },
            frame_end: self.r.frame_end,
            proto: self.r.proto,
            opcodes: if after {
                self.opcodes
            } else {
                self.opcodes.saturating_sub(1)
            },
            stack: &self.stack,
            marks: &self.marks,
            memo: &self.memo,
            kind_of: &kind_of,
            buffers: self.buffers.as_ref().map(|b| b.len()),
            deadline,
        };
        match resume(input, self.policy, self.limits, stream, allow_trailing, at) {
            Err(scan) => scan,
            Ok(()) => e,
        }
    }
}
