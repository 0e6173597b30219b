//! A global as a node: what GLOBAL, STACK_GLOBAL, INST and EXT1/2/4 push once the interpreter
//! resolved it through the policy (`src/vm/globals.rs`).

use std::borrow::Cow;

use super::machine::Machine;
use crate::error::Result;
use crate::value::{Fat, Global, NodeId};

impl<'a, 'p> Machine<'a, 'p> {
    /// The node of the global `module.name`, allowed by the policy as its rule `rule`.
    /// Protocols below 3 name Python 2 modules, which CPython maps (`fix_imports`).
    pub(super) fn global_node(
        &mut self,
        module: Cow<'a, str>,
        name: Cow<'a, str>,
        rule: usize,
    ) -> Result<NodeId> {
        let fix_imports = self.proto < 3;
        let global = Global {
            module,
            name,
            rule,
            fix_imports,
        };
        self.fat(Fat::Global(global), 0)
    }
}
