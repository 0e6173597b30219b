"""Simple module-level classes pickled by gen_corpus.py into tests/corpus/good/record_*.

The pickles name these classes as ``recordtypes.<Name>``; the oracle (oracle.py, which lives
in this same directory, so ``import recordtypes`` works) checks them in ``--mode records``,
where every non-native global becomes a record instead of being imported.
Keep the classes stable: changing them changes the corpus bytes.
"""


class Point:
    """Plain class, default __reduce_ex__: copy_reg._reconstructor + BUILD at protocol 0/1,
    NEWOBJ + BUILD at protocol 2+."""

    def __init__(self, x, y):
        self.x = x
        self.y = y


class Point2:
    """__reduce__ returns (Point2, (x, y)): a plain REDUCE at every protocol."""

    def __init__(self, x=1, y=2):
        self.x = x
        self.y = y

    def __reduce__(self):
        return (Point2, (self.x, self.y))


class KwPoint:
    """__getnewargs_ex__ with keyword args: NEWOBJ_EX at protocol 4+."""

    def __new__(cls, x, *, y=0):
        self = object.__new__(cls)
        self.x = x
        self.y = y
        return self

    def __getnewargs_ex__(self):
        return ((self.x,), {"y": self.y})

    def __getstate__(self):
        # no BUILD state: everything travels in the NEWOBJ_EX arguments
        return None


class Slotted:
    """__slots__ class: state is a (None, {slot: value}) pair."""

    __slots__ = ("a", "b")

    def __init__(self, a, b):
        self.a = a
        self.b = b


class WithState:
    """__getstate__/__setstate__ with a tuple state."""

    def __init__(self, a, b):
        self.a = a
        self.b = b

    def __getstate__(self):
        return (self.a, self.b)

    def __setstate__(self, state):
        self.a, self.b = state


class MyList(list):
    """list subclass: items travel as APPENDS on the object (protocol 2+)."""


class MyDict(dict):
    """dict subclass: items travel as SETITEMS on the object (protocol 2+)."""


class Node:
    """Holds a reference to other objects (used for shared and recursive records)."""

    def __init__(self, name, link=None):
        self.name = name
        self.link = link


def helper(x):
    """A module-level function, pickled as a plain global value."""
    return x
