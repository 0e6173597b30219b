"""CPython's own unpickler tests (Lib/test/pickletester.py, AbstractUnpickleTests, shipped
with CPython) run against picklewarden.loads.

The classes those tests pickle (pickletester's C, D, E, H, K, ...) and the copyreg helpers
are given through classes=, as a program would map the few classes it expects; everything
else runs under the default "data" policy. Tests that fail by design are listed in
BY_DESIGN with the reason.
"""

import copyreg
import pickle
import unittest

import pytest

import picklewarden

pickletester = pytest.importorskip("test.pickletester")


def _classes():
    out = {
        "copy_reg._reconstructor": copyreg._reconstructor,
        "copyreg._reconstructor": copyreg._reconstructor,
        "__builtin__.object": object,
        "builtins.object": object,
        "builtins.int": int,
    }
    for name in dir(pickletester):
        obj = getattr(pickletester, name)
        if isinstance(obj, type) and obj.__module__ in ("__main__", "test.pickletester"):
            out["%s.%s" % (obj.__module__, obj.__qualname__)] = obj
    return out


CLASSES = _classes()

# name -> why picklewarden differs from CPython here, on purpose.
# name -> (what picklewarden raises instead, why), on purpose. Each of these tests is run and
# must end in exactly that refusal.
BY_DESIGN = {
    "test_compat_unpickle": (
        "global_not_allowed",
        "names globals outside the data policy (__builtin__.xrange, __builtin__.reduce, "
        "whichdb.whichdb, exceptions.*): picklewarden never imports a global the policy or "
        "classes= does not name"),
    "test_unpickle_from_2x": (
        "global_not_allowed",
        "names globals outside the data policy (xrange, Cookie.SimpleCookie, exceptions.*)"),
    "test_empty_bytestring": (
        ValueError,
        "encoding='koi8-r': Python 2 strings decode only as bytes, ASCII, Latin-1 or UTF-8 "
        "(the encodings the library implements); another encoding is a ValueError"),
    "test_misc_get": (
        "trailing_data",
        "b'((Kdtp0\\nh\\x00l.))' has bytes after STOP: pickle.loads ignores them, "
        "picklewarden reads exactly one pickle"),
    # Tests of newer CPython releases than the machine's 3.11 (3.13's pickletester):
    "test_load_global": (
        "global_not_allowed",
        "loads globals outside the data policy (math.log, os.path.join, builtins.str)"),
    "test_load_stack_global": (
        "global_not_allowed",
        "loads globals outside the data policy through STACK_GLOBAL"),
    "test_find_class": (
        AttributeError,
        "needs self.unpickler, an Unpickler class whose find_class imports: picklewarden has "
        "none, the policy names the globals and nothing is imported"),
    "test_custom_find_class": (
        AttributeError,
        "needs self.unpickler with an overridable find_class: the policy takes its place"),
}


class PicklewardenUnpickleTests(pickletester.AbstractUnpickleTests, unittest.TestCase):
    truncated_errors = (pickle.UnpicklingError,)
    bad_stack_errors = (pickle.UnpicklingError,)
    bad_mark_errors = (pickle.UnpicklingError,)

    def loads(self, data, **kwds):
        return picklewarden.loads(data, classes=CLASSES, **_kw(kwds))


def _kw(kwds):
    out = {}
    for name in ("buffers", "encoding"):
        if name in kwds:
            out[name] = kwds.pop(name)
    if kwds.get("errors", "strict") == "strict":
        kwds.pop("errors", None)
    if kwds:
        raise TypeError("picklewarden.loads has no %s argument" % ", ".join(sorted(kwds)))
    return out


def _by_design(test, expected, why):
    def run(self):
        if isinstance(expected, str):
            with pytest.raises(picklewarden.RefusedError) as e:
                test(self)
            assert e.value.kind == expected, str(e.value)
        else:
            with pytest.raises(expected):
                test(self)
    run.__doc__ = "By design: " + why
    return run


for _name, (_expected, _why) in BY_DESIGN.items():
    if not hasattr(PicklewardenUnpickleTests, _name):
        continue  # a test of another CPython release
    setattr(PicklewardenUnpickleTests, _name,
            _by_design(getattr(PicklewardenUnpickleTests, _name), _expected, _why))
