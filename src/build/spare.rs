//! The stack, MARK and memo vectors of the last small decode on this thread, kept for the
//! next one ([`Spare`]): a tiny pickle (a Mitogen message, a service request, `[1, 2, 3]`)
//! otherwise allocates and frees all three, which costs it more than its opcodes.

use std::cell::Cell;

use crate::value::NodeId;

/// The most entries a vector may hold room for to be kept: 4,096 (16 KiB of node ids, 32 KiB
/// of MARK positions), so that a thread keeps at most about 64 KiB, whatever it decoded.
const KEEP_MAX: usize = 4096;

/// The machine's vectors that do not go into the document, empty, with their allocations.
#[derive(Default)]
pub(super) struct Spare {
    pub(super) stack: Vec<NodeId>,
    pub(super) marks: Vec<usize>,
    pub(super) memo: Vec<NodeId>,
}

thread_local! {
    /// What the last decode on this thread left ([`Spare::take`], [`Spare::keep`]).
    static SPARE: Cell<Spare> = const {
        Cell::new(Spare {
            stack: Vec::new(),
            marks: Vec::new(),
            memo: Vec::new(),
        })
    };
}

impl Spare {
    /// The vectors the last decode on this thread left (empty ones when there are none, or
    /// while the thread is being torn down).
    pub(super) fn take() -> Spare {
        SPARE.try_with(Cell::take).unwrap_or_default()
    }

    /// Keeps the vectors for the next decode on this thread, emptied; one holding room for
    /// more than [`KEEP_MAX`] entries is dropped instead.
    pub(super) fn keep(self) {
        let Spare {
            mut stack,
            mut marks,
            mut memo,
        } = self;
        let small = |cap: usize| cap <= KEEP_MAX;
        stack.clear();
        marks.clear();
        memo.clear();
        let spare = Spare {
            stack: if small(stack.capacity()) {
                stack
            } else {
                Vec::new()
            },
            marks: if small(marks.capacity()) {
                marks
            } else {
                Vec::new()
            },
            memo: if small(memo.capacity()) {
                memo
            } else {
                Vec::new()
            },
        };
        let _ = SPARE.try_with(|s| s.set(spare));
    }
}
