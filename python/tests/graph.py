"""Compares two Python object graphs as pickle builds them: same types, same values, and the
same sharing (two places hold one object in one graph exactly when they do in the other),
cycles included. An explicit stack, no recursion."""

import math
import struct

_ATOMS = (type(None), bool, int, str, bytes)


def _float_bits(f):
    return struct.pack(">d", f)


def same_graph(a, b, path="root"):
    """Raises AssertionError naming the first place where ``a`` and ``b`` differ."""
    pairs = {}      # id(node of a) -> id(node of b)
    back = {}       # id(node of b) -> id(node of a)
    keep = []       # keeps the objects alive, so ids stay unique
    stack = [(a, b, path)]
    while stack:
        x, y, where = stack.pop()
        if type(x) is not type(y):
            raise AssertionError("%s: type %s != %s" % (where, type(x).__name__,
                                                        type(y).__name__))
        t = type(x)
        if t in _ATOMS:
            if x != y:
                raise AssertionError("%s: %r != %r" % (where, x, y))
            continue
        if t is float:
            if _float_bits(x) != _float_bits(y) and not (math.isnan(x) and math.isnan(y)):
                raise AssertionError("%s: %r != %r" % (where, x, y))
            continue
        if t is complex:
            if (_float_bits(x.real), _float_bits(x.imag)) != (_float_bits(y.real),
                                                                _float_bits(y.imag)):
                raise AssertionError("%s: %r != %r" % (where, x, y))
            continue
        # Containers and objects: identity must correspond.
        ix, iy = id(x), id(y)
        if ix in pairs or iy in back:
            if pairs.get(ix) != iy or back.get(iy) != ix:
                # Immutable empties and equal small values may be shared by CPython at will.
                if t in (tuple, frozenset) and x == y and not _holds_mutable(x):
                    continue
                raise AssertionError("%s: sharing differs" % where)
            continue
        pairs[ix] = iy
        back[iy] = ix
        keep.append((x, y))
        if t is bytearray:
            if x != y:
                raise AssertionError("%s: %r != %r" % (where, x, y))
        elif t in (list, tuple):
            if len(x) != len(y):
                raise AssertionError("%s: len %d != %d" % (where, len(x), len(y)))
            for i in range(len(x) - 1, -1, -1):
                stack.append((x[i], y[i], "%s[%d]" % (where, i)))
        elif t is dict:
            if len(x) != len(y):
                raise AssertionError("%s: len %d != %d" % (where, len(x), len(y)))
            kx, ky = list(x), list(y)
            for i in range(len(kx) - 1, -1, -1):
                stack.append((x[kx[i]], y[ky[i]], "%s[%r]" % (where, kx[i])))
                stack.append((kx[i], ky[i], "%s.key%d" % (where, i)))
        elif t in (set, frozenset):
            if x != y and _set_shape(x) != _set_shape(y):
                raise AssertionError("%s: %r != %r" % (where, x, y))
        elif hasattr(x, "__dict__") or hasattr(type(x), "__slots__"):
            stack.extend(_object_parts(x, y, where))
        elif x != y:
            raise AssertionError("%s: %r != %r" % (where, x, y))


def _set_shape(s):
    """A set of objects compared by identity, described by value: each item's type and
    attributes (for sets of records rebuilt as new objects)."""
    return sorted((type(i).__name__, repr(sorted(vars(i).items())) if hasattr(i, "__dict__")
                   else repr(i)) for i in s)


def _holds_mutable(x):
    return any(isinstance(i, (list, dict, set, bytearray)) for i in x)


def _object_parts(x, y, where):
    out = []
    for cls_base in (list, dict):
        if isinstance(x, cls_base):
            out.append((cls_base(x), cls_base(y), where + ".<items>"))
    dx = getattr(x, "__dict__", None)
    dy = getattr(y, "__dict__", None)
    if dx is not None or dy is not None:
        out.append((dict(dx or {}), dict(dy or {}), where + ".__dict__"))
    for slot in getattr(type(x), "__slots__", ()):
        if slot == "__weakref__":
            continue
        out.append((getattr(x, slot, None), getattr(y, slot, None), "%s.%s" % (where, slot)))
    return out
