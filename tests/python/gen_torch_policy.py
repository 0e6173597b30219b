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


def rule(full):
    m, _, n = full.rpartition(".")
    if n.endswith("Storage") or (m == "torch" and (n.startswith(VALUE_PREFIXES) or n == "bool")):
        return m, n, "[]", None
    if n in ("OrderedDict", "Counter"):
        return m, n, '["reduce", "build", "items"]', "unhashable"
    if n.endswith("Tensor") or n == "Parameter":
        return m, n, '["reduce", "newobj", "build"]', None
    return m, n, '["reduce"]', None


def main():
    out = [HEADER]
    for m, n, c in DATA:
        out.append(f'[[global]]\nmodule = "{m}"\nname = "{n}"\nconstructor = "{c}"\n')
    for full in sorted(_get_allowed_globals()):
        if full in SKIP:
            continue
        m, n, forms, key = rule(full)
        s = f'[[global]]\nmodule = "{m}"\nname = "{n}"\nconstructor = "record"\nforms = {forms}\n'
        if key:
            s += f'key = "{key}"\n'
        out.append(s)
    sys.stdout.write("\n".join(out))


if __name__ == "__main__":
    main()
