"""The steps CPython's unpickler takes to make an object of a class the caller mapped
(``classes={"module.Name": cls}``), as Lib/pickle.py's ``_Unpickler`` takes them. Called by the
Rust extension only for classes the caller named; nothing else is ever called.
"""

import sys

_intern = sys.intern


def instantiate(cls, kind, args, kwargs):
    """Makes the object: REDUCE ``cls(*args)``, NEWOBJ ``cls.__new__(cls, *args)``, NEWOBJ_EX
    with ``**kwargs``, INST/OBJ as ``_Unpickler._instantiate``."""
    if kind == "reduce":
        return cls(*args)
    if kind == "newobj":
        return cls.__new__(cls, *args)
    if kind == "newobj_ex":
        return cls.__new__(cls, *args, **kwargs)
    # inst, obj: Lib/pickle.py _instantiate
    if args or not isinstance(cls, type) or hasattr(cls, "__getinitargs__"):
        return cls(*args)
    return cls.__new__(cls)


def extend(obj, items):
    """APPENDS on an object: ``extend`` if it has one, else ``append`` each (load_appends)."""
    try:
        ext = obj.extend
    except AttributeError:
        for item in items:
            obj.append(item)
    else:
        ext(items)


def setitems(obj, pairs):
    """SETITEM/SETITEMS on an object: ``obj[key] = value`` in order."""
    for key, value in pairs:
        obj[key] = value


def build(inst, state):
    """BUILD: ``__setstate__(state)`` if the object has it, else the ``__dict__`` update and
    slot state of Lib/pickle.py's ``load_build``."""
    setstate = getattr(inst, "__setstate__", None)
    if setstate is not None:
        setstate(state)
        return
    slotstate = None
    if isinstance(state, tuple) and len(state) == 2:
        state, slotstate = state
    if state:
        inst_dict = inst.__dict__
        for k, v in state.items():
            if type(k) is str:
                inst_dict[_intern(k)] = v
            else:
                inst_dict[k] = v
    if slotstate:
        for k, v in slotstate.items():
            setattr(inst, k, v)
