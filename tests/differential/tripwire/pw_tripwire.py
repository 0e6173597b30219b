"""The tripwire: a module that must never be imported, nor anything in it called, by a loader
reading a file picklewarden accepted. Each import, call, construction or BUILD writes a mark
file into $PW_TRIPWIRE_DIR (the loader child's own folder), which the harness looks for after
the load. The harness puts this folder on the child's sys.path only.
"""
import os


def _mark(what):
    d = os.environ.get("PW_TRIPWIRE_DIR")
    if d:
        with open(os.path.join(d, "mark-pw_tripwire-" + what), "w") as f:
            f.write(what)


_mark("import")


def mark(*args, **kwargs):
    _mark("call")
    return None


class Obj:
    def __new__(cls, *args, **kwargs):
        _mark("new")
        return object.__new__(cls)

    def __init__(self, *args, **kwargs):
        _mark("init")

    def __setstate__(self, state):
        _mark("setstate")


def __getattr__(name):
    _mark("getattr-" + name[:40])
    return mark
