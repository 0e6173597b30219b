"""picklewarden: a ``pickle.loads`` that runs no code.

Only the globals a policy allows are accepted, each maps to a small closed set of safe
constructors, every resource is bounded, and every refusal is a ``RefusedError`` (a
``pickle.UnpicklingError``) naming its kind and byte offset::

    import picklewarden
    picklewarden.loads(pickle.dumps({"a": [1, 2.5, b"x"]}))   # plain data comes back as is
    picklewarden.loads(evil)        # raises picklewarden.RefusedError: global os.system ...

Objects of classes (records) come back as inert ``picklewarden.Record`` values unless the
caller names the class: ``loads(data, classes={"geometry.Point": Point})``.
"""

import os as _os

from . import _picklewarden
from ._picklewarden import Policy
from ._types import Global, GlobalRef, Record, RefusedError, ScanResult, Verdict

__all__ = ["loads", "load", "check", "scan", "Policy", "RefusedError", "Record", "Global",
           "Verdict", "ScanResult", "GlobalRef", "BUILTIN_POLICIES", "loads_stream"]

__version__ = "0.1.0"

#: Names of the built-in policies, for ``Policy(name)`` and ``policy=name``.
BUILTIN_POLICIES = ("data", "strict", "mitogen", "mitogen-plus")


def loads(data, *, policy="data", limits=None, buffers=None, classes=None, encoding=None):
    """Decodes one pickle from ``data`` (a bytes-like object) and returns its value.

    Args:
        data: the pickle's bytes. Nothing may follow its STOP opcode (CPython ignores what
            follows; picklewarden refuses it as ``trailing_data``).
        policy: a built-in policy's name (``"data"``, ``"strict"``, ``"mitogen"``,
            ``"mitogen-plus"``) or a ``Policy``.
        limits: ``{limit_name: value}`` over the policy's limits, e.g.
            ``{"max_input_bytes": "1M", "max_nesting_depth": 100}``.
        buffers: out-of-band buffers for protocol 5's NEXT_BUFFER, as for ``pickle.loads``;
            each arrives as ``bytes``.
        classes: ``{"module.Name": cls}`` (or ``{(module, name): cls}``): globals to rebuild
            as instances of ``cls`` with the steps CPython's unpickler takes (``cls(*args)``
            for REDUCE, ``cls.__new__(cls, *args)`` for NEWOBJ, ``__setstate__`` or a
            ``__dict__`` update for BUILD). Naming a class here allows that global (as a
            record) when the policy does not already. Other records come back as
            ``Record``; no class the caller did not name is ever touched.
        encoding: how Python 2 strings (STRING, BINSTRING, SHORT_BINSTRING) decode, as for
            ``pickle.loads``: ``"bytes"``, ``"ASCII"``, ``"latin1"`` or ``"utf-8"`` (strict);
            default: the policy's setting (``data``: ASCII, as ``pickle.loads``).

    Returns:
        The value: int, float, complex, str, bytes, bytearray, list, tuple, dict, set,
        frozenset, None, bool, ``Record``, ``Global`` or an instance of a class in
        ``classes``, with shared references and cycles as ``pickle.loads`` makes them.

    Raises:
        RefusedError: the input is malformed, truncated, over a limit or not allowed.
    """
    return _picklewarden.loads(data, policy=policy, limits=limits, buffers=buffers,
                               classes=classes, encoding=encoding)


def loads_stream(data, *, policy="data", limits=None, buffers=None, classes=None,
                 encoding=None):
    """Decodes several pickles written one after another (sharing one memo, as repeated
    ``Unpickler.load()`` calls read them, and as a Mitogen message may hold them) and returns
    the list of their values. Arguments as for ``loads``."""
    return _picklewarden.loads(data, policy=policy, limits=limits, buffers=buffers,
                               classes=classes, encoding=encoding, stream=True)


def load(file, *, policy="data", limits=None, buffers=None, classes=None, encoding=None):
    """Reads a binary file object to its end (at most the policy's ``max_input_bytes`` plus
    one byte) and decodes it as ``loads`` does."""
    cap = _max_input(policy, limits)
    data = file.read(cap + 1) if cap is not None else file.read()
    return loads(data, policy=policy, limits=limits, buffers=buffers, classes=classes,
                 encoding=encoding)


def _max_input(policy, limits):
    if limits and "max_input_bytes" in limits and isinstance(limits["max_input_bytes"], int):
        return limits["max_input_bytes"]
    pol = policy if isinstance(policy, Policy) else Policy(policy or "data")
    return dict(pol.limits).get("max_input_bytes")


def check(data, *, policy="data", limits=None, buffers=None, encoding=None, stream=False):
    """Runs every check ``loads`` runs without making Python objects.

    Returns a ``Verdict``: true when accepted; ``.error`` holds the ``RefusedError`` (not
    raised) when refused.
    """
    accepted, error, pickles = _picklewarden.check(data, policy=policy, limits=limits,
                                                   buffers=buffers, encoding=encoding,
                                                   stream=stream)
    return Verdict(accepted, error, pickles)


def scan(data, *, policy="data", limits=None, stream=False):
    """Lists every global the input names, with its offset and whether the policy allows it,
    going on past globals the policy refuses, so that one call tells everything a file needs.

    Returns a ``ScanResult``: ``.globals`` (``GlobalRef`` list), ``.refused``, ``.error`` (a
    refusal other than a refused global, which ends the scan, or None) and ``.protocol``.
    Each refused global costs one more scan from the start (the library's scan stops at its
    first refusal); at most 64 scans run, and a refused global left after them is ``.error``.
    ``data`` may also be a path (str or os.PathLike) of a file to read.
    """
    if isinstance(data, (str, _os.PathLike)):
        with open(data, "rb") as f:
            data = f.read()
    found, error, protocol = _picklewarden.scan(data, policy=policy, limits=limits,
                                                stream=stream)
    return ScanResult([GlobalRef(*g) for g in found], error, protocol)
