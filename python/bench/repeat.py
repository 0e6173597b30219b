#!/usr/bin/env python3
"""Decodes one input N times with one tool, for instruction counts under callgrind (the
process with N = 0 gives the start-up to subtract):

    valgrind --tool=callgrind python python/bench/repeat.py TOOL N [FILE [POLICY]]

TOOL: picklewarden (picklewarden.loads), pickle (pickle.loads), check (the extension's check:
the decode and its checks, no Python objects) or marshal (marshal.loads of the same value
marshalled: CPython's tightest way from bytes to these objects). Without FILE, the input is
bench.py's tiny-dict at protocol 4 (81 bytes): N calls then give the per-call fixed costs.
POLICY (default: none given, i.e. "data"): passed to picklewarden.loads as policy=POLICY;
"mitogen" also imports mitogen.core so that pickle.loads can find Mitogen's classes.
"""

import marshal
import pickle
import sys

import picklewarden
from picklewarden._picklewarden import check as _check


def main():
    tool, n = sys.argv[1], int(sys.argv[2])
    if len(sys.argv) > 3:
        with open(sys.argv[3], "rb") as f:
            data = f.read()
    else:
        data = pickle.dumps({"id": 1234, "name": "alice", "tags": ["a", "b"], "ok": True,
                             "score": 0.5}, 4)
    policy = sys.argv[4] if len(sys.argv) > 4 else None
    if tool == "marshal":
        if policy and policy.startswith("mitogen"):
            raise SystemExit("marshal: Mitogen's classes do not marshal")
        data = marshal.dumps(pickle.loads(data))
        fn = marshal.loads
    elif tool == "check":
        def fn(d):
            return _check(d, policy=policy or "data")
    elif policy is None:
        fn = {"picklewarden": picklewarden.loads, "pickle": pickle.loads}[tool]
    else:
        if policy.startswith("mitogen"):
            import mitogen.core  # noqa: F401  (pickle.loads imports Mitogen's classes by name)

        def pw(d):
            return picklewarden.loads(d, policy=policy)

        fn = {"picklewarden": pw, "pickle": pickle.loads}[tool]
    for _ in range(n):
        fn(data)


if __name__ == "__main__":
    main()
