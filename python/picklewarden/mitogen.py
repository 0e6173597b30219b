"""Decoding Mitogen messages in-process with picklewarden, so that a Mitogen parent (or a
bastion hop) never lets CPython's unpickler read a child's bytes.

    import picklewarden.mitogen
    picklewarden.mitogen.install()      # every Message.unpickle() in this process, from now on

or, for one message::

    value = picklewarden.mitogen.unpickle(msg)

``unpickle`` does what ``mitogen.core.Message.unpickle`` does (mitogen 0.3.54): the message's
pickles decoded one after another with one memo, the first one's value returned, a
``CallError`` raised when ``throw`` and the value is one, a dead message raising
``ChannelError`` when ``throw_dead``. The decode runs under the ``mitogen`` policy
(policy/mitogen.toml: Mitogen's own ``_find_global`` allowlist with its argument checks, and
its 128 MiB message limit) and gives Mitogen's own objects: ``bytes``, ``Blob``, ``Secret``,
``Kwargs``, ``CallError`` (through ``_unpickle_call_error``), ``Context`` (through the
message's router, as ``Message._unpickle_context`` finds it) and ``Sender``. A refused message
raises ``MitogenRefusedError``, which is both a ``picklewarden.RefusedError`` and Mitogen's
``StreamError`` (what Mitogen raises for a message it will not unpickle): the call that
waited for it fails, the parent goes on.

Needs mitogen importable (``pip install mitogen``); importing this module imports
``mitogen.core``.
"""

import mitogen.core as _core

import picklewarden
from picklewarden._types import RefusedError

__all__ = ["unpickle", "unpickle_iter", "install", "uninstall", "installed",
           "MitogenRefusedError", "POLICY"]

#: The policy messages are decoded under.
POLICY = "mitogen"

_M = "mitogen.core."


class MitogenRefusedError(RefusedError, _core.StreamError):
    """A message picklewarden refused: a ``picklewarden.RefusedError`` (kind, category,
    offset, opcode, limit) that is also ``mitogen.core.StreamError``."""

    def __init__(self, message, kind=None, category=None, offset=None, opcode=None,
                 opcode_byte=None, limit=None):
        RefusedError.__init__(self, message, kind, category, offset, opcode, opcode_byte,
                              limit)

    def __str__(self):
        return Exception.__str__(self)


def _classes(msg):
    """Mitogen's globals as ``Message._find_global`` resolves them for this message
    (``_codecs.encode`` and ``__builtin__.bytes`` are decoded natively as bytes)."""
    return {
        _M + "_unpickle_call_error": _core._unpickle_call_error,
        _M + "CallError": _core._unpickle_call_error,
        _M + "_unpickle_sender": msg._unpickle_sender,
        _M + "_unpickle_context": msg._unpickle_context,
        _M + "Blob": _core.Blob,
        _M + "Secret": _core.Secret,
        _M + "Kwargs": _core.Kwargs,
    }


def _decode(msg, policy, limits, find_class):
    if msg.enc not in (msg.ENC_MGC, msg.ENC_PKL):
        raise ValueError("Message %r is not pickled, invalid enc=%r" % (msg, msg.enc))
    if find_class is _core.find_deny:
        # Mitogen's default for unpickle_iter: no global at all.
        policy, classes = "strict", None
    elif find_class is None or _is_find_global(msg, find_class):
        classes = _classes(msg)
    else:
        raise ValueError("picklewarden.mitogen decodes with Mitogen's own find_class only, "
                         "not %r" % (find_class,))
    try:
        return picklewarden.loads_stream(msg.data, policy=policy, limits=limits,
                                         classes=classes, encoding="bytes")
    except RefusedError as e:
        raise MitogenRefusedError(str(e), e.kind, e.category, e.offset, e.opcode,
                                  e.opcode_byte, e.limit) from None


def _is_find_global(msg, fn):
    return getattr(fn, "__func__", None) is _core.Message._find_global and \
        getattr(fn, "__self__", None) is msg


def unpickle_iter(msg, throw=True, throw_dead=True, find_class=_core.find_deny, *,
                  policy=POLICY, limits=None):
    """``Message.unpickle_iter`` with picklewarden: an iterator of the message's values.
    With Mitogen's default ``find_class`` (``find_deny``) no global is allowed (policy
    ``strict``); with ``None`` or the message's ``_find_global``, Mitogen's globals."""
    if throw_dead and msg.is_dead:
        msg._throw_dead()
    for obj in _decode(msg, policy, limits, find_class):
        if throw and isinstance(obj, _core.CallError):
            raise obj
        yield obj


def unpickle(msg, throw=True, throw_dead=True, find_class=None, *, policy=POLICY,
             limits=None):
    """``Message.unpickle`` with picklewarden: the value of the message's first pickle."""
    return next(unpickle_iter(msg, throw, throw_dead, find_class or msg._find_global,
                              policy=policy, limits=limits))


_original = {}


def install(policy=POLICY, limits=None):
    """Makes every ``mitogen.core.Message`` in this process decode with picklewarden
    (``Message.unpickle`` and ``Message.unpickle_iter`` replaced): call it once in the
    Mitogen parent or bastion hop, before it starts children. ``policy`` and ``limits`` as
    for ``picklewarden.loads`` (default: the ``mitogen`` policy and its limits)."""
    if not _original:
        _original["unpickle"] = _core.Message.unpickle
        _original["unpickle_iter"] = _core.Message.unpickle_iter

    def _unpickle(self, throw=True, throw_dead=True, find_class=None):
        return unpickle(self, throw, throw_dead, find_class, policy=policy, limits=limits)

    def _unpickle_iter(self, throw=True, throw_dead=True, find_class=_core.find_deny):
        return unpickle_iter(self, throw, throw_dead, find_class, policy=policy,
                             limits=limits)

    _unpickle.__doc__ = unpickle.__doc__
    _unpickle_iter.__doc__ = unpickle_iter.__doc__
    _core.Message.unpickle = _unpickle
    _core.Message.unpickle_iter = _unpickle_iter


def uninstall():
    """Puts Mitogen's own ``unpickle`` and ``unpickle_iter`` back."""
    if _original:
        _core.Message.unpickle = _original.pop("unpickle")
        _core.Message.unpickle_iter = _original.pop("unpickle_iter")


def installed():
    """Whether ``install()`` is in effect."""
    return bool(_original)
