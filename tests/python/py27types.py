"""Module-level classes for tests/python/gen_py27.py, importable by Python 2.7 and Python 3.

gen_py27.py (Python 2.7) pickles instances of these as ``py27types.<Name>``; the oracle
(oracle.py, in this same directory) loads them with CPython 3, so this file must stay valid
in both languages. Keep the classes stable: changing them changes the corpus bytes of
tests/corpus/py27/.
"""

import collections
import datetime

Pair = collections.namedtuple("Pair", "x y")


class Classic:
    """An old-style class in Python 2 (INST at protocol 0, OBJ at 1 and 2)."""

    def __init__(self, a=1, b=2):
        self.a = a
        self.b = b


class Plain(object):
    """New-style class, default reduce: copy_reg._reconstructor at protocol 0/1, NEWOBJ at 2."""

    def __init__(self, x=0, y=0):
        self.x = x
        self.y = y


class Reduced(object):
    """__reduce__ returns (Reduced, args): a plain REDUCE at every protocol."""

    def __init__(self, name="", size=0):
        self.name = name
        self.size = size

    def __reduce__(self):
        return (Reduced, (self.name, self.size))


class WithState(object):
    """__getstate__/__setstate__ with a tuple state (BUILD with a non-dict state)."""

    def __init__(self, a=None, b=None):
        self.a = a
        self.b = b

    def __getstate__(self):
        return (self.a, self.b)

    def __setstate__(self, state):
        self.a, self.b = state


class UTC(datetime.tzinfo):
    """A fixed-offset tzinfo (Python 2 has no datetime.timezone)."""

    def utcoffset(self, dt):
        return datetime.timedelta(0)

    def dst(self, dt):
        return datetime.timedelta(0)

    def tzname(self, dt):
        return "UTC"
