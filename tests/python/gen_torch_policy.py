#!/usr/bin/env python3
"""Write policy/torch.toml from the installed torch's weights_only allowlist.

Reads ``torch._weights_only_unpickler._get_allowed_globals()`` (what
``torch.load(weights_only=True)`` accepts without ``add_safe_globals``) and writes each global
as a picklewarden record with the forms torch's pickler uses for it (see the header of the
file written). Run in a venv that has torch:

    /work/models-venv/bin/python tests/python/gen_torch_policy.py > policy/torch.toml
"""

import sys

from torch._weights_only_unpickler import _get_allowed_globals

HEADER = open(__file__.replace("gen_torch_policy.py", "torch_policy_header.toml")).read()

DATA = [("_codecs", "encode", "latin1_bytes")] + [
    (m, n, n) for m in ("builtins", "__builtin__")
    for n in ("bytes", "bytearray", "set", "frozenset", "complex")
]
# Served by the plain-data rules above.
SKIP = {"_codecs.encode", "builtins.bytearray", "builtins.set", "builtins.complex"}
VALUE_PREFIXES = ("float", "int", "uint", "bits", "complex", "bfloat", "qint", "quint",
                  "bcomplex", "per_")


# What each record's call and BUILD do with what they are given in torch.load, read from
# torch's source (torch/_utils.py, torch/_weights_only_unpickler.py, collections): the
# `call_cost` and `build_cost` of picklewarden's policy (docs/policies.md, "Costs"). A global
# not listed gets neither, so picklewarden charges it the worst (`walks`).
COSTS = {
    # `OrderedDict(pairs)` inserts each pair's key; the weights_only unpickler's BUILD of an
    # OrderedDict is `inst.__dict__.update(state)`.
    "collections.OrderedDict": ("inserts_pairs", "sets_attributes"),
    # `Counter(iterable)` counts each item (`Counter.update`, a dict's keys too); BUILD as above.
    "collections.Counter": ("inserts_items", "sets_attributes"),
    # `torch.Size(t)` copies its tuple; `torch.device(s)` parses a short str.
    "torch.Size": ("copies", None),
    "torch.device": ("keeps", None),
    # `_rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks, metadata)`:
    # `tensor.set_(storage, offset, size, stride)` copies size and stride; metadata is a dict.
    "torch._utils._rebuild_tensor": ("copies", None),
    "torch._utils._rebuild_tensor_v2": ("copies", None),
    "torch._utils._rebuild_tensor_v3": ("copies", None),
    # `Parameter(data, requires_grad)`, hooks kept.
    "torch._utils._rebuild_parameter": ("keeps", None),
    # ... and `_set_obj_state(param, state)`: setattr of each key of the state dict(s).
    "torch._utils._rebuild_parameter_with_state": ("copies", None),
    # `func(*args)` then `_set_obj_state(ret, state)`.
    "torch._tensor._rebuild_from_type_v2": ("copies", None),
}


def rule(full):
    m, _, n = full.rpartition(".")
    call, build = COSTS.get(full, (None, None))
    if n.endswith("Storage") or (m == "torch" and (n.startswith(VALUE_PREFIXES) or n == "bool")):
        return m, n, "[]", None, call, build
    if n in ("OrderedDict", "Counter"):
        return m, n, '["reduce", "build", "items"]', "unhashable", call, build
    if n.endswith("Tensor") or n == "Parameter":
        return m, n, '["reduce", "newobj", "build"]', None, call, build
    return m, n, '["reduce"]', None, call, build


def main():
    out = [HEADER]
    for m, n, c in DATA:
        out.append(f'[[global]]\nmodule = "{m}"\nname = "{n}"\nconstructor = "{c}"\n')
    for full in sorted(_get_allowed_globals()):
        if full in SKIP:
            continue
        m, n, forms, key, call, build = rule(full)
        s = f'[[global]]\nmodule = "{m}"\nname = "{n}"\nconstructor = "record"\nforms = {forms}\n'
        if key:
            s += f'key = "{key}"\n'
        if call:
            s += f'call_cost = "{call}"\n'
        if build:
            s += f'build_cost = "{build}"\n'
        out.append(s)
    sys.stdout.write("\n".join(out))


if __name__ == "__main__":
    main()
