"""Plain Python classes the Rust extension builds: refusals, records and globals.

Nothing here is ever called with data from a pickle except as plain values: a Record holds
what the pickle said to call, it never calls it.
"""

import pickle

__all__ = ["RefusedError", "Record", "Global", "Verdict", "GlobalRef", "ScanResult",
           "refused"]


class RefusedError(pickle.UnpicklingError):
    """The input was refused: malformed, truncated, over a limit or denied by the policy.

    A subclass of ``pickle.UnpicklingError``, so code written for ``pickle.loads`` catches it.
    The message is the one the ``picklewarden`` command prints, e.g.
    ``global os.system is not allowed by policy "data" at offset 0 (0x0, opcode 0x63 GLOBAL)``,
    and for a refusal the caller can lift a hint in this package's terms, as the command adds
    one in its own: for ``global_not_allowed``, ``Policy(...).allow(module, name)`` (a
    ``Record``) or ``classes={"module.Name": cls}``; for ``trailing_data``, ``loads_stream``.

    Attributes:
        kind: the refusal's kind, e.g. ``"global_not_allowed"`` (docs/errors.md lists them).
        category: ``"malformed"``, ``"truncated"``, ``"limit_exceeded"``,
            ``"policy_denied"`` or ``"io"``.
        offset: absolute byte offset of the opcode (or position) refused.
        opcode: the opcode's name as pickletools spells it (``"GLOBAL"``), or None.
        opcode_byte: the byte at ``offset`` that was read as an opcode, or None.
        limit: for ``limit_exceeded``, the limit's name (``"max_nesting_depth"``), else None.
    """

    def __init__(self, message, kind=None, category=None, offset=None, opcode=None,
                 opcode_byte=None, limit=None):
        super().__init__(message)
        self.kind = kind
        self.category = category
        self.offset = offset
        self.opcode = opcode
        self.opcode_byte = opcode_byte
        self.limit = limit

    def __reduce__(self):
        return (type(self), (str(self), self.kind, self.category, self.offset, self.opcode,
                             self.opcode_byte, self.limit))


class RefusedEOFError(RefusedError, EOFError):
    """A refusal of input that ends too early (``truncated``, or ``not_a_pickle`` for an
    empty input): also an ``EOFError``, as ``pickle.loads`` raises one there."""


class RefusedValueError(RefusedError, ValueError):
    """A refusal of bad text in an opcode (number text, string escapes, UTF-8 or ASCII that
    does not decode) or of an extension code the policy does not map: also a ``ValueError``,
    as ``pickle.loads`` raises one (or its subclass ``UnicodeDecodeError``; for an extension
    code copyreg has not registered) there."""


class RefusedTypeError(RefusedError, TypeError):
    """A refusal of a value of the wrong type for its opcode (``type_mismatch``, a REDUCE on
    something not callable) or an unhashable key: also a ``TypeError``, as ``pickle.loads``
    raises one there."""


_EOF_KINDS = frozenset(["truncated", "not_a_pickle"])
_VALUE_KINDS = frozenset(["invalid_number", "version_dependent_number", "invalid_escape",
                          "invalid_string", "invalid_utf8", "invalid_ascii",
                          "extension_code_rejected"])
_TYPE_KINDS = frozenset(["type_mismatch", "unhashable_key"])


def _hint(message, kind):
    """What to do about a refusal, in this package's terms (as the command-line tool adds its
    options' names), or "" when there is nothing to say."""
    if kind == "global_not_allowed" and message.startswith("global "):
        dotted = message[len("global "):].split(" is not allowed", 1)[0]
        return (" (to accept it: policy=picklewarden.Policy(...).allow(module, name) returns "
                "it as a picklewarden.Record; classes={\"%s\": cls} rebuilds it as your "
                "class)" % dotted)
    if kind == "trailing_data":
        return (" (several pickles one after another? picklewarden.loads_stream reads them "
                "all)")
    return ""


def refused(message, kind=None, category=None, offset=None, opcode=None, opcode_byte=None,
            limit=None):
    """The RefusedError for a refusal, of the subclass that is also the built-in exception
    ``pickle.loads`` raises for such input (so ``except EOFError`` around a read loop keeps
    working). The message gets a hint for the refusals a caller can lift (``_hint``)."""
    message += _hint(message, kind)
    if kind in _EOF_KINDS:
        cls = RefusedEOFError
    elif kind in _VALUE_KINDS:
        cls = RefusedValueError
    elif kind in _TYPE_KINDS:
        cls = RefusedTypeError
    else:
        cls = RefusedError
    return cls(message, kind, category, offset, opcode, opcode_byte, limit)


class Record:
    """An object the policy keeps as plain data (constructor ``record``), never called.

    Attributes:
        module, name: the global the pickle called, as CPython 3 would find it.
        kind: how it was made: ``"reduce"`` (``cls(*args)``), ``"newobj"``
            (``cls.__new__(cls, *args)``), ``"newobj_ex"`` (with ``kwargs``), ``"inst"`` or
            ``"obj"`` (protocol 0 and 1 instance opcodes).
        args: the positional arguments (a tuple).
        kwargs: the keyword arguments (a dict) for ``newobj_ex``, else None.
        state: what BUILD gave (``__setstate__``'s argument), or None.
        listitems: items APPEND/APPENDS added, a list.
        dictitems: ``(key, value)`` pairs SETITEM/SETITEMS added, a list.

    Records compare by identity, as instances of a plain class do.
    """

    __slots__ = ("module", "name", "kind", "args", "kwargs", "state", "listitems", "dictitems",
                 "__weakref__")

    def __init__(self, module, name, kind, args, kwargs=None):
        self.module = module
        self.name = name
        self.kind = kind
        self.args = args
        self.kwargs = kwargs
        self.state = None
        self.listitems = []
        self.dictitems = []

    def __repr__(self):
        extra = ""
        if self.state is not None:
            extra += ", state=%r" % (self.state,)
        if self.listitems:
            extra += ", listitems=%r" % (self.listitems,)
        if self.dictitems:
            extra += ", dictitems=%r" % (self.dictitems,)
        return "Record(%s.%s, %s, args=%r%s)" % (self.module, self.name, self.kind, self.args,
                                                 extra)


class Global:
    """A global (class or function) the pickle used as a value, named but never imported.

    ``module`` and ``name`` are as CPython 3 would find them. Two Global objects with the same
    names are equal, as the object they name would be.
    """

    __slots__ = ("module", "name")

    def __init__(self, module, name):
        self.module = module
        self.name = name

    def __eq__(self, other):
        if not isinstance(other, Global):
            return NotImplemented
        return (self.module, self.name) == (other.module, other.name)

    def __hash__(self):
        return hash((Global, self.module, self.name))

    def __repr__(self):
        return "Global(%r, %r)" % (self.module, self.name)


class Verdict:
    """What ``check`` found: true when the input was accepted.

    Attributes:
        accepted: whether every check passed.
        error: the RefusedError when refused, else None.
        pickles: pickles decoded (1, or the number in a stream).
    """

    __slots__ = ("accepted", "error", "pickles")

    def __init__(self, accepted, error, pickles):
        self.accepted = accepted
        self.error = error
        self.pickles = pickles

    def __bool__(self):
        return self.accepted

    def __repr__(self):
        if self.accepted:
            return "Verdict(accepted, pickles=%d)" % self.pickles
        return "Verdict(refused: %s)" % (self.error,)


class GlobalRef:
    """A global the input names: ``module``, ``name``, ``allowed`` (by the policy) and
    ``offset`` (of the opcode that named it first)."""

    __slots__ = ("module", "name", "allowed", "offset")

    def __init__(self, module, name, allowed, offset):
        self.module = module
        self.name = name
        self.allowed = allowed
        self.offset = offset

    def __eq__(self, other):
        if not isinstance(other, GlobalRef):
            return NotImplemented
        return ((self.module, self.name, self.allowed, self.offset)
                == (other.module, other.name, other.allowed, other.offset))

    __hash__ = None

    def __repr__(self):
        return "GlobalRef(%r, %r, allowed=%r, offset=%d)" % (self.module, self.name,
                                                              self.allowed, self.offset)


class ScanResult:
    """What ``scan`` found.

    Attributes:
        globals: every global the input names, in order of first appearance, allowed or not
            (the scan goes on past a global the policy refuses).
        error: the first refusal that is not a refused global (which stops the scan), or None.
        protocol: the highest protocol PROTO named (0 if none).
    """

    __slots__ = ("globals", "error", "protocol")

    def __init__(self, globals, error, protocol):
        self.globals = globals
        self.error = error
        self.protocol = protocol

    @property
    def refused(self):
        """The globals the policy does not allow."""
        return [g for g in self.globals if not g.allowed]

    def __repr__(self):
        # ``refused`` first: ``error`` is None for a scan that found refused globals.
        return "ScanResult(refused=%d, error=%r, protocol=%d, globals=%r)" % (
            len(self.refused), self.error, self.protocol, self.globals)
