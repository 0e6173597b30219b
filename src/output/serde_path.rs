//! The path bookkeeping of the serde walks ([`crate::de`], [`crate::ser`]): how deep the walk
//! is, and which containers are open on its path, to refuse a cycle.

use crate::de::DeError;
use crate::value::{NodeId, Value};

/// The containers open on the walk's path: a depth count, and one bit per arena node for the
/// containers a cycle can pass through.
///
/// Only a mutable container (list, dict, set, record object) can close a cycle: a tuple or
/// frozenset is made from values that exist before it, so every edge out of one goes to an
/// older node, and a cycle needs an edge to a younger one, which only a container filled after
/// it was made (APPENDS, SETITEMS, ADDITEMS, BUILD) has. So marking those finds every cycle.
/// The bits (one per node: an eighth of a byte against the arena's 12 bytes a node) are
/// allocated at the first such container.
#[derive(Debug)]
pub(crate) struct OnPath {
    bits: Vec<u64>,
    nodes: usize,
    depth: u64,
    max_depth: u64,
}

impl OnPath {
    pub(crate) fn new(nodes: usize, max_depth: u64) -> OnPath {
        OnPath {
            bits: Vec::new(),
            nodes,
            depth: 0,
            max_depth,
        }
    }

    pub(crate) fn max_depth(&mut self, max: u64) {
        self.max_depth = max;
    }

    pub(crate) fn clear(&mut self) {
        self.bits.clear();
        self.depth = 0;
    }

    fn marks(value: &Value<'_>) -> bool {
        matches!(
            value,
            Value::List(_) | Value::Dict(_) | Value::Set(_) | Value::Object(_)
        )
    }

    /// Opens the container `id` (whose value is `value`).
    #[inline]
    pub(crate) fn enter(&mut self, id: NodeId, value: &Value<'_>) -> Result<(), DeError> {
        if self.depth >= self.max_depth {
            return Err(DeError::TooDeep {
                max: self.max_depth,
            });
        }
        if Self::marks(value) {
            if self.bits.is_empty() {
                self.bits = vec![0; self.nodes.div_ceil(64).max(1)];
            }
            let (word, bit) = (id.index() / 64, 1u64 << (id.index() % 64));
            let Some(w) = self.bits.get_mut(word) else {
                return Err(DeError::Message(
                    "a node id outside the document".to_owned(),
                ));
            };
            if *w & bit != 0 {
                return Err(DeError::Cycle {
                    type_name: value.type_name(),
                });
            }
            *w |= bit;
        }
        self.depth += 1;
        Ok(())
    }

    /// Closes the container `id` opened by [`OnPath::enter`].
    #[inline]
    pub(crate) fn leave(&mut self, id: NodeId, value: &Value<'_>) {
        self.depth = self.depth.saturating_sub(1);
        if Self::marks(value) {
            if let Some(w) = self.bits.get_mut(id.index() / 64) {
                *w &= !(1u64 << (id.index() % 64));
            }
        }
    }
}
