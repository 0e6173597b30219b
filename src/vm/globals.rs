//! Globals ([`Globals`]): GLOBAL and INST name one by two lines of text, STACK_GLOBAL by two
//! strs on the stack, EXT1/2/4 by an extension code the policy registers; each is resolved
//! through the policy (exact `(module, name)` pairs), as CPython's `find_class` would be called.

use std::borrow::Cow;

use super::{GlobalName, StackOps, Vm};
use crate::error::{escape_bytes_for_display, ErrorKind, Result};

/// Globals resolution, for every [`Vm`].
pub(crate) trait Globals<'a>: Vm<'a> {
    /// Resolves `module.name` through the policy: the global's value, or the policy's refusal.
    fn resolve_global(&mut self, module: Cow<'a, str>, name: Cow<'a, str>) -> Result<Self::V> {
        let resolved = self.policy().resolve(&module, &name);
        self.note_global(&module, &name, resolved.is_ok());
        let rule = resolved.map_err(|k| self.err(k))?;
        // An allowed Python 2 name (`__builtin__.set`) is read by CPython 3 only before
        // protocol 3 (`ErrorKind::Python2NameAtProtocol3`).
        let protocol = self.reader().proto;
        if protocol >= 3 && crate::compat::python3_name(&module, &name) != (&*module, &*name) {
            return Err(self.err(ErrorKind::Python2NameAtProtocol3 {
                module: crate::error::escape_for_display(&module),
                name: crate::error::escape_for_display(&name),
                protocol,
            }));
        }
        self.global(module, name, rule)
    }

    /// The two lines of GLOBAL and INST (module, then qualified name), which must be UTF-8
    /// (CPython 3 decodes them so), resolved.
    fn global_line(&mut self) -> Result<Self::V> {
        let module = self.reader_mut().read_line()?;
        let name = self.reader_mut().read_line()?;
        let utf8 = |b: &'a [u8]| std::str::from_utf8(b).map(Cow::Borrowed);
        match (utf8(module), utf8(name)) {
            (Ok(m), Ok(n)) => self.resolve_global(m, n),
            _ => Err(self.err(ErrorKind::InvalidUtf8)),
        }
    }

    /// STACK_GLOBAL: the module and the name are the top two items, both strs.
    fn stack_global(&mut self) -> Result<()> {
        let start = self.top_group(2)?;
        let (module, name) = (self.below(start + 1)?, self.below(start + 2)?);
        let (module, name) = (self.global_name(module)?, self.global_name(name)?);
        let g = match (module, name) {
            (GlobalName::Text(m), GlobalName::Text(n)) => self.resolve_global(m, n)?,
            (GlobalName::NotStr, _) | (_, GlobalName::NotStr) => {
                return Err(self.err(ErrorKind::TypeMismatch("STACK_GLOBAL requires str")))
            }
            // Text with lone surrogates (or too long to keep) can name no allowed global.
            (m, n) => {
                let show = |g: GlobalName<'_>| match g {
                    GlobalName::Text(t) => escape_bytes_for_display(t.as_bytes()),
                    GlobalName::Unnamed(s) => s,
                    GlobalName::NotStr => String::new(),
                };
                return Err(self.err(ErrorKind::GlobalNotAllowed {
                    module: show(m),
                    name: show(n),
                }));
            }
        };
        self.stack_mut().truncate(start);
        self.push(g)
    }

    /// EXT1, EXT2, EXT4: the global the policy registers for extension `code` (`copyreg`'s
    /// extension registry, which is the policy's here); any other code is refused.
    fn extension(&mut self, code: i64) -> Result<()> {
        let target = u32::try_from(code)
            .ok()
            .filter(|&c| c > 0)
            .and_then(|c| self.policy().extensions.get(&c))
            .cloned();
        let Some((module, name)) = target else {
            return Err(self.err(ErrorKind::ExtensionCodeRejected(code)));
        };
        let g = self.resolve_global(Cow::Owned(module), Cow::Owned(name))?;
        self.push(g)
    }
}

impl<'a, T: Vm<'a> + ?Sized> Globals<'a> for T {}
