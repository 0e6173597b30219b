//! The checks a policy rule names ([`Check`], `src/policy/check/`), applied by the build: at
//! the call that makes a record ([`Machine::check_call`]) and at its BUILD
//! ([`Machine::check_build`]). What a check found about a record is kept here by node: a
//! dtype's size and flags, whether it was built or used, whether an ndarray or a joblib wrapper
//! was built. Inside a joblib file (`Decoder::decode_joblib`) a wrapper's
//! BUILD also reads the array joblib reads after it, moving the reader past it.

use std::collections::HashMap;

use super::budget::ITEM_BYTES;
use super::keys::mix::MixState;
use super::machine::{internal, Machine};
use crate::error::{Error, ErrorKind, Result};
use crate::opcode::Opcode;
use crate::policy::check::joblib::{self, ArraySpan, Refusal};
use crate::policy::check::numpy::{self, Dtype};
use crate::policy::Check;
use crate::value::{CallKind, NodeId, Value};

/// What the checks know of the records they saw.
#[derive(Default)]
pub(super) struct Checks {
    records: HashMap<NodeId, Seen>,
    /// Whether a wrapper's BUILD reads joblib's array after it (a joblib file's decode).
    pub(super) joblib: bool,
    /// The arrays read after wrappers, in order (joblib files only).
    pub(super) arrays: Vec<ArraySpan>,
}

/// One checked record.
#[derive(Clone, Copy, Debug)]
enum Seen {
    /// A `numpy.dtype`: what it is now; whether its BUILD came; whether a state used it.
    Dtype {
        dtype: Dtype,
        built: bool,
        used: bool,
    },
    /// A joblib wrapper: whether its BUILD came.
    Built(bool),
    /// An ndarray (`_reconstruct`): whether its BUILD came.
    Array(bool),
}

impl Checks {
    /// The records whose BUILD a check accepted as their writer's and which a canonical
    /// pickle can write again as their call and that BUILD, sorted: built dtypes and
    /// ndarrays (a joblib wrapper's BUILD stands for bytes outside the pickle: never).
    pub(super) fn canonical_builds(&self) -> Vec<NodeId> {
        let mut ids: Vec<NodeId> = self
            .records
            .iter()
            .filter(|(_, seen)| matches!(seen, Seen::Dtype { built: true, .. } | Seen::Array(true)))
            .map(|(&id, _)| id)
            .collect();
        ids.sort_unstable();
        ids
    }
}

/// What each entry is charged (its map slot, a few words).
const ENTRY_BYTES: u64 = 4 * ITEM_BYTES;

impl Machine<'_, '_> {
    /// [`ErrorKind::NonCanonical`] at the current opcode, naming the global of `record`'s
    /// call (`numpy.dtype: ...`).
    #[cold]
    fn non_canonical(&self, callable: NodeId, why: &str) -> Error {
        let what = match self.get(callable) {
            Ok(Value::Global(g)) => format!("{}.{}: {why}", g.module, g.name),
            _ => why.to_owned(),
        };
        self.err(ErrorKind::NonCanonical(what))
    }

    /// Checks the call that made `record` (of `callable`, with `argv`) under `check`, and
    /// keeps what it found.
    pub(super) fn check_call(
        &mut self,
        check: Check,
        record: NodeId,
        callable: NodeId,
        argv: &[NodeId],
        kind: CallKind,
        kwargs: Option<NodeId>,
    ) -> Result<()> {
        let want = if check == Check::JoblibArrayWrapper {
            CallKind::NewObj
        } else {
            CallKind::Reduce
        };
        if kind != want || (kwargs.is_some() && check != Check::JoblibArrayWrapper) {
            return Err(self.non_canonical(callable, "not made the way its writer makes it"));
        }
        let found = match check {
            Check::NumpyDtype => numpy::dtype_args(&self.arena, argv).map(|dtype| Seen::Dtype {
                dtype,
                built: false,
                used: false,
            }),
            Check::NumpyReconstruct => {
                numpy::reconstruct_args(&self.arena, argv).map(|()| Seen::Array(false))
            }
            Check::NumpyScalar => {
                let records = &mut self.checks.records;
                let r = numpy::scalar_args(&self.arena, argv, &mut |id| use_dtype(records, id));
                return r.map_err(|why| self.non_canonical(callable, &why));
            }
            Check::JoblibArrayWrapper => {
                joblib::wrapper_call(argv, kwargs).map(|()| Seen::Built(false))
            }
        };
        let seen = found.map_err(|why| self.non_canonical(callable, &why))?;
        self.charge(ENTRY_BYTES)?;
        let records = &mut self.checks.records;
        if records.try_reserve(1).is_err() {
            return Err(self.err(ErrorKind::AllocationFailed { bytes: ENTRY_BYTES }));
        }
        records.insert(record, seen);
        Ok(())
    }

    /// Checks the BUILD of `state` on `target`, a record of `callable` whose rule names
    /// `check`; inside a joblib file, reads the array after a wrapper's BUILD.
    pub(super) fn check_build(
        &mut self,
        check: Check,
        target: NodeId,
        callable: NodeId,
        state: NodeId,
    ) -> Result<()> {
        let seen = self.checks.records.get(&target).copied();
        let refuse = |m: &Self, why: &str| m.non_canonical(callable, why);
        match (check, seen) {
            (Check::NumpyDtype, Some(Seen::Dtype { dtype, built, used })) => {
                // numpy writes one BUILD, right after the call (pickle's save_reduce); a BUILD
                // after an array used the dtype would change that array's dtype.
                if built {
                    return Err(refuse(self, "a second BUILD (numpy builds a dtype once)"));
                }
                if used {
                    return Err(refuse(
                        self,
                        "a BUILD after an array, scalar or dtype used it (numpy builds a dtype \
                         right after making it)",
                    ));
                }
                let records = &mut self.checks.records;
                let made = numpy::dtype_state(&self.arena, state, &dtype, &mut |id| {
                    if id == target {
                        return Err("a dtype in its own state".into());
                    }
                    use_dtype(records, id)
                });
                let made = made.map_err(|why| refuse(self, &why))?;
                if made.layout == numpy::Layout::Structured {
                    // numpy keeps the fields dict itself (`self->fields = fields`): a SETITEM
                    // on it later would change the dtype after this check.
                    if let Ok(Value::Tuple(&[_, _, _, _, fields, ..])) = self.get(state) {
                        self.seal(fields, callable);
                    }
                }
                self.checks.records.insert(
                    target,
                    Seen::Dtype {
                        dtype: made,
                        built: true,
                        used: false,
                    },
                );
                Ok(())
            }
            (Check::NumpyReconstruct, Some(Seen::Array(false))) => {
                let records = &mut self.checks.records;
                let r = numpy::ndarray_state(&self.arena, state, &mut |id| use_dtype(records, id));
                r.map_err(|why| refuse(self, &why))?;
                self.checks.records.insert(target, Seen::Array(true));
                Ok(())
            }
            (Check::JoblibArrayWrapper, Some(Seen::Built(false))) => {
                if !self.checks.joblib {
                    return Err(refuse(
                        self,
                        "a BUILD outside a joblib file (joblib.load reads an array after it, \
                         pickle.loads reads opcodes: only a joblib file's scan reads it)",
                    ));
                }
                let records = &mut self.checks.records;
                let w = joblib::wrapper_state(&self.arena, state, &mut |id| use_dtype(records, id));
                let w = w.map_err(|why| refuse(self, &why))?;
                self.checks.records.insert(target, Seen::Built(true));
                self.read_array(callable, &w)
            }
            (_, Some(Seen::Built(true) | Seen::Array(true))) => Err(refuse(
                self,
                "a second BUILD (its writer builds each object once)",
            )),
            // A check that saw no call: the record was made by a form the check does not
            // follow (the policy refuses such forms), or the table lost it.
            _ => Err(self.err(internal())),
        }
    }

    /// Inside a joblib file: the array after a wrapper's BUILD, read as joblib's
    /// `read_array` reads it, and the reader moved past it. The BUILD must end the protocol-4
    /// frame, as joblib's writer makes it (`commit_frame(force=True)`): joblib's unpickler
    /// (`pickle._Unpickler`) holds a whole frame in memory while `read_array` reads the file
    /// after it, so a frame running on past the BUILD would have joblib read other bytes as
    /// the array than the ones after the BUILD.
    fn read_array(&mut self, callable: NodeId, w: &joblib::Wrapper) -> Result<()> {
        let build = self.r.op_pos;
        let start = self.r.pos;
        match self.r.frame_end {
            Some(end) if end == start => self.r.frame_end = None,
            Some(_) => {
                return Err(self.non_canonical(
                    callable,
                    "the FRAME runs on past the BUILD (joblib's writer ends it there)",
                ))
            }
            None => {}
        }
        let span = |end| ArraySpan {
            build,
            start,
            end,
            pickle: w.objects,
        };
        if self.checks.arrays.try_reserve(1).is_err() {
            return Err(self.err(ErrorKind::AllocationFailed { bytes: ITEM_BYTES }));
        }
        let end = if w.objects {
            self.checks.arrays.push(span(None));
            self.nested_pickle(callable, w, start)?
        } else {
            match joblib::array_end(self.r.input, start, w) {
                Ok(end) => end,
                Err(Refusal::NonCanonical(why)) => return Err(self.non_canonical(callable, &why)),
                Err(Refusal::Truncated) => return Err(self.err(ErrorKind::Truncated)),
            }
        };
        match self.checks.arrays.last_mut() {
            Some(s) if s.start == start => s.end = Some(end),
            _ => self.checks.arrays.push(span(Some(end))),
        }
        self.r.pos = end;
        Ok(())
    }

    /// The pickle joblib writes after the wrapper of an array holding objects, at `start`:
    /// decoded by the machine under the same policy and limits (joblib reads it with
    /// `pickle.load`, or a fresh `pickle._Unpickler` since 1.6, with no further checks), as
    /// joblib's writer writes it (`pickle.dump(array, fh, protocol=2)`, no FRAME; protocol 5
    /// since joblib 1.5): an ndarray the `numpy_reconstruct` check accepted, holding objects,
    /// of the wrapper's shape. Anything after its STOP is the outer pickle's. Where it ends.
    fn nested_pickle(
        &mut self,
        callable: NodeId,
        w: &joblib::Wrapper,
        start: usize,
    ) -> Result<usize> {
        let input = self.r.input;
        let rest = input.get(start..).unwrap_or_default();
        let protocol = match rest {
            [0x80, p @ (2 | 5), ..] => *p,
            _ => {
                return Err(self.non_canonical(
                    callable,
                    "the pickle of an array holding objects is not protocol 2 or 5 (joblib \
                     writes pickle.dump(array, fh, protocol=2), protocol=5 since 1.5)",
                ))
            }
        };
        // The scan finds where the pickle ends (and refuses a FRAME running past its STOP);
        // the decode then reads that pickle alone.
        let deadline = self.clock.deadline();
        let report = crate::Scanner::new(rest, self.policy)
            .limits(self.limits)
            .allow_trailing(true)
            .deadline(deadline)
            .run();
        if let Err(e) = report.result {
            return Err(e.shifted(start as u64));
        }
        let len = report.trailing.map_or(rest.len(), |t| {
            usize::try_from(t.offset).unwrap_or(rest.len())
        });
        let frames = report
            .opcode_counts
            .get(usize::from(Opcode::Frame.byte()))
            .copied()
            .unwrap_or_default();
        if protocol == 2 && frames > 0 {
            return Err(self.non_canonical(
                callable,
                "a FRAME in the protocol-2 pickle of an array holding objects",
            ));
        }
        let doc = crate::Decoder::new(rest.get(..len).unwrap_or_default(), self.policy)
            .limits(self.limits)
            .deadline(deadline)
            .decode()
            .map_err(|e| e.shifted(start as u64))?;
        let ok = doc
            .roots
            .first()
            .and_then(|&root| match doc.arena.get(root) {
                Some(Value::Object(o)) => {
                    let rule = match doc.arena.get(o.callable) {
                        Some(Value::Global(g)) => self.policy.rule(g.rule),
                        _ => None,
                    };
                    let checked = rule.is_some_and(|r| r.check == Some(Check::NumpyReconstruct));
                    let items = match o.state.and_then(|s| doc.arena.get(s)) {
                        Some(Value::Tuple(items)) => Some(items),
                        _ => None,
                    };
                    match items {
                        Some(&[_, shape, _, _, data]) if checked => Some(
                            matches!(doc.arena.get(data), Some(Value::List(_)))
                                && numpy::same_shape(&self.arena, w.shape, &doc.arena, shape),
                        ),
                        _ => None,
                    }
                }
                _ => None,
            });
        if ok != Some(true) {
            return Err(self.non_canonical(
                callable,
                "the pickle after the wrapper is not an ndarray of objects of the wrapper's \
                 shape",
            ));
        }
        Ok(start + len)
    }
}

impl Machine<'_, '_> {
    /// Refuses any later change of the list or dict `id` (APPEND, SETITEM...), as the
    /// arguments an argument schema checked are (`Machine::items_allowed`).
    fn seal(&mut self, id: NodeId, callable: NodeId) {
        if self.sealed.capacity() == 0 {
            self.sealed = HashMap::with_capacity_and_hasher(8, MixState::random());
        }
        self.sealed.entry(id).or_insert(callable);
    }
}

/// The dtype record `id` as a state uses it, marked used (a later BUILD of it is refused);
/// a node no `numpy_dtype` check saw is refused.
fn use_dtype(records: &mut HashMap<NodeId, Seen>, id: NodeId) -> Result<Dtype, String> {
    match records.get_mut(&id) {
        Some(Seen::Dtype { dtype, used, .. }) => {
            *used = true;
            Ok(*dtype)
        }
        _ => Err("a dtype that is not a numpy.dtype record the numpy_dtype check saw".into()),
    }
}
