"""picklewarden: a ``pickle.loads`` that runs no code.

Only the globals a policy allows are accepted, each maps to a small closed set of safe
constructors, every resource is bounded, and every refusal is a ``RefusedError`` (a
``pickle.UnpicklingError``) naming its kind and byte offset::

    import picklewarden
    picklewarden.loads(pickle.dumps({"a": [1, 2.5, b"x"]}))   # plain data comes back as is
    picklewarden.loads(evil)        # raises picklewarden.RefusedError: global os.system ...

A class the policy does not list is refused like any other global. Allowed in the policy
(``Policy("data").allow("geometry", "Point")``), its objects come back as inert
``picklewarden.Record`` values; named by the caller (``loads(data,
classes={"geometry.Point": Point})``), as instances of the class.
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


# loads is the extension's function itself (no Python frame in between: a short pickle's call
# costs less); its docstring is the Rust function's (python/src/lib.rs).
loads = _picklewarden.loads


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
