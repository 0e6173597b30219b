//! GLOBAL, STACK_GLOBAL and EXT1/2/4: globals named by text, resolved through the policy.

use std::borrow::Cow;

use super::machine::Machine;
use crate::error::{escape_bytes_for_display, ErrorKind, Result};
use crate::text::Text;
use crate::value::{Fat, Global, Node, NodeId, Value};

impl<'a, 'p> Machine<'a, 'p> {
    pub(super) fn global(&mut self, module: Cow<'a, str>, name: Cow<'a, str>) -> Result<NodeId> {
        let rule = self
            .policy
            .resolve(&module, &name)
            .map_err(|k| self.err(k))?;
        let fix_imports = self.proto < 3;
        let global = Global {
            module,
            name,
            rule,
            fix_imports,
        };
        self.fat(Fat::Global(global), 0)
    }

    pub(super) fn global_line(&mut self) -> Result<NodeId> {
        let module = self.r.read_line()?;
        let name = self.r.read_line()?;
        let utf8 = |b: &'a [u8]| std::str::from_utf8(b).map(Cow::Borrowed);
        match (utf8(module), utf8(name)) {
            (Ok(m), Ok(n)) => self.global(m, n),
            _ => Err(self.err(ErrorKind::InvalidUtf8)),
        }
    }

    pub(super) fn stack_global(&mut self) -> Result<()> {
        let name = self.pop()?;
        let module = self.pop()?;
        let (Some(m), Some(n)) = (self.str_bytes(module)?, self.str_bytes(name)?) else {
            return Err(self.err(ErrorKind::TypeMismatch("STACK_GLOBAL requires str")));
        };
        let utf8 = |t: &Text<'a>| -> Option<Cow<'a, str>> {
            if t.surrogates {
                return None;
            }
            match &t.bytes {
                Cow::Borrowed(b) => std::str::from_utf8(b).ok().map(Cow::Borrowed),
                Cow::Owned(b) => String::from_utf8(b.clone()).ok().map(Cow::Owned),
            }
        };
        let id = match (utf8(&m), utf8(&n)) {
            (Some(module), Some(name)) => self.global(module, name)?,
            _ => {
                // Text with lone surrogates can name no allowed global.
                return Err(self.err(ErrorKind::GlobalNotAllowed {
                    module: escape_bytes_for_display(&m.bytes),
                    name: escape_bytes_for_display(&n.bytes),
                }));
            }
        };
        self.push(id)
    }

    /// The text of a str node, borrowed for as long as the input lives when it is in the
    /// input (else a copy); `None` when `id` is not a str.
    pub(super) fn str_bytes(&self, id: NodeId) -> Result<Option<Text<'a>>> {
        let input: &'a [u8] = self.r.input;
        let of_input = |start: u32, len: u32| {
            let start = start as usize;
            Cow::Borrowed(input.get(start..start + len as usize).unwrap_or_default())
        };
        Ok(match self.arena.node(id) {
            Some(Node::Str { start, len }) => Some(Text {
                bytes: of_input(start, len),
                surrogates: false,
            }),
            Some(Node::Surrogates { start, len }) => Some(Text {
                bytes: of_input(start, len),
                surrogates: true,
            }),
            _ => match self.get(id)? {
                Value::Str(s) => Some(Text {
                    bytes: Cow::Owned(s.as_bytes().to_vec()),
                    surrogates: s.has_surrogates(),
                }),
                _ => None,
            },
        })
    }

    pub(super) fn extension(&mut self, code: i64) -> Result<()> {
        let target = u32::try_from(code)
            .ok()
            .filter(|&c| c > 0)
            .and_then(|c| self.policy.extensions.get(&c));
        let Some((module, name)) = target else {
            return Err(self.err(ErrorKind::ExtensionCodeRejected(code)));
        };
        let (module, name) = (Cow::Owned(module.clone()), Cow::Owned(name.clone()));
        let id = self.global(module, name)?;
        self.push(id)
    }
}
