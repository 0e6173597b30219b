#!/usr/bin/env python3
"""Speed at every size and shape (issue 27): picklewarden's decode against CPython's
`pickle.loads` on the same bytes, in the same run; prints markdown.

    python3 bench/shapes.py [--base BIN] [--new BIN] [--runs N] [--repeat K] [--only PREFIX|GROUP]
                            [--no-build] [--gen-only] [--regen]

Writes the shapes to target/workloads/shapes/ (deterministic; about a minute and 350 MB; kept
and reused unless `--regen`; `--gen-only` writes them and stops),
builds `examples/bench_decode` (release) unless `--no-build`, then for each shape runs, in
processes of their own, `pickle.loads` (CPython, cyclic GC on as by default), the new build
(`--new`, default this checkout's target/release/examples/bench_decode) and, with `--base`,
another build (a `bench_decode` built from the base commit), each `--repeat` times (default 3),
and reports the median of the processes' medians of `--runs` runs (default 7).

Every shape is a file of messages, each a 4-byte little-endian length and a pickle
(`bench_decode --frames`), and a run decodes each message as a fresh decode: `pickle.loads(m)`
on one side, `Decoder::new(m, &policy).decode()` on the other, the value dropped before the
next. Tiny messages are decoded `inner` times a run and the time of one pass reported, so
their rows give microseconds a decode: the per-decode fixed costs. Columns: the time of one
pass over the shape's messages, ns per input byte, `pickle.loads` time over picklewarden's
(x loads) and the target of issue 27 for the shape.

Shapes:
  tiny        a Mitogen call and its reply (mitogen 0.3.54's Message.pickled, protocol 2, the
              `mitogen` policy; made with the venv of MITOGEN_PYTHON, default
              target/mitogen-venv/bin/python of this checkout or of /work/main, else skipped),
              [1, 2, 3] at protocols 2 and 4, a dict of about 1 KB
  each        the 512 Mitogen transfer chunks of bench/gen_workloads.py (128 KiB random bytes
              each), each its own message and decode, as a bastion reads them, protocols 2/4/5
  keys        dicts keyed by 2-tuples of ints, sets of (int, str) and of (int, int), dicts
              keyed by frozensets, floats equal to ints and ints past 64 bits, one frozenset of
              ints; 1 MB and 8 MB
  benign      small objects (gen_workloads.py's small_value) and a list of mixed ints; 1 MB
              and 8 MB: the per-byte reference for the adversarial shapes
  adversarial many MARKs (MARK APPENDS of nothing; MARK POP_MARK), memo GETs of one value,
              one key set again and again, empty FRAMEs, PUT of one index (text argument),
              DUP POP, a list of one-item dicts (EMPTY_DICT MARK ... SETITEMS), a list of
              empty BINUNICODE, deep-ish nesting of lists and tuples; 1 MB and 8 MB
"""

import json
import os
import pickle
import random
import statistics
import struct
import subprocess
import sys

if os.environ.get("PYTHONHASHSEED") != "0":
    os.execve(sys.executable, [sys.executable] + sys.argv,
              dict(os.environ, PYTHONHASHSEED="0"))

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, ".."))
OUT = os.path.join(ROOT, "target", "workloads", "shapes")
sys.path.insert(0, HERE)
import gen_workloads  # noqa: E402  (same PYTHONHASHSEED, so the same values)

MB = 1_000_000

# Issue 27's targets: the least `pickle.loads` time over picklewarden's, by shape group.
TARGETS = {"tiny": 3, "each.p2": 15, "each.p4": 100, "each.p5": 100, "keys": 2, "ints": 5,
           "small": 12}


def frames(messages):
    return b"".join(struct.pack("<I", len(m)) + m for m in messages)


def split_frames(data):
    out, i = [], 0
    while i < len(data):
        (n,) = struct.unpack_from("<I", data, i)
        out.append(data[i + 4:i + 4 + n])
        i += 4 + n
    return out


def sized(make, target, protocol=4):
    """pickle.dumps(make(n), protocol) with n scaled so that the pickle is about `target` bytes."""
    n = 1000
    for _ in range(3):
        data = pickle.dumps(make(n), protocol)
        n = max(1, int(n * target / len(data)))
    return pickle.dumps(make(n), protocol)


def crafted(unit, target, head=b"\x80\x04]", tail=b"."):
    """A pickle made by hand: head, `unit` repeated to about `target` bytes, tail."""
    return head + unit * max(1, (target - len(head) - len(tail)) // len(unit)) + tail


def mitogen_messages():
    """A Mitogen call and its reply, pickled by Mitogen itself, or None without it."""
    code = (
        "import mitogen.core as c, sys\n"
        "call = c.Message.pickled(('master:1234:1', 'ansible_mitogen.target', None,\n"
        "    'run_module', (), c.Kwargs({'kwargs': {'module_name': 'ansible.modules.stat',\n"
        "    'path': '/etc/hosts', 'follow': False, 'get_checksum': True,\n"
        "    'checksum_algorithm': 'sha1', 'get_mime': True, 'get_attributes': True},\n"
        "    'env': {'LANG': 'C.UTF-8'}, 'cwd': '/home/user'})), handle=c.CALL_FUNCTION)\n"
        "reply = c.Message.pickled({'rc': 0, 'changed': False, 'stat': {'exists': True,\n"
        "    'path': '/etc/hosts', 'mode': '0644', 'isdir': False, 'size': 221,\n"
        "    'uid': 0, 'gid': 0, 'mtime': 1733212345.25, 'checksum':\n"
        "    'da39a3ee5e6b4b0d3255bfef95601890afd80709', 'mimetype': 'text/plain'},\n"
        "    'stdout': b'', 'stderr': b'', 'invocation': {'module_args': {'path': '/etc/hosts'}}})\n"
        "sys.stdout.buffer.write(call.data.hex().encode() + b' ' + reply.data.hex().encode())\n"
    )
    for py in (os.environ.get("MITOGEN_PYTHON"),
               os.path.join(ROOT, "target", "mitogen-venv", "bin", "python"),
               "/work/main/target/mitogen-venv/bin/python"):
        if py and os.path.exists(py):
            p = subprocess.run([py, "-c", code], capture_output=True)
            if p.returncode == 0:
                call, reply = p.stdout.split()
                return bytes.fromhex(call.decode()), bytes.fromhex(reply.decode())
    return None


def shapes():
    """(name, group, policy, messages, inner) for every shape."""
    out = []
    mito = mitogen_messages()
    if mito is None:
        print("shapes.py: SKIPPED the Mitogen call and reply: no mitogen venv "
              "(set MITOGEN_PYTHON)", file=sys.stderr)
    else:
        out.append(("mitogen_call.p2", "tiny", "mitogen", [mito[0]], 20000))
        out.append(("mitogen_reply.p2", "tiny", "mitogen", [mito[1]], 20000))
    out.append(("list123.p2", "tiny", "data", [pickle.dumps([1, 2, 3], 2)], 50000))
    out.append(("list123.p4", "tiny", "data", [pickle.dumps([1, 2, 3], 4)], 50000))
    d1k = {f"key{i}": (i, f"value {i}", i * 0.5) for i in range(30)}
    out.append(("dict1k.p4", "tiny", "data", [pickle.dumps(d1k, 4)], 20000))
    chunks = gen_workloads.mitogen_chunks()
    for p in (2, 4, 5):
        out.append((f"each.p{p}", f"each.p{p}", "data",
                    [pickle.dumps(c, protocol=p) for c in chunks], 1))
    del chunks
    rnd = random.Random(27)
    for size, tag in ((MB, "1mb"), (8 * MB, "8mb")):
        keyed = [
            ("tuplekeys", lambda n: {(i, i * 7 % 1000): i for i in range(n)}),
            ("tupleset_str", lambda n: set((i, str(i)) for i in range(n))),
            ("tupleset_int", lambda n: set((i, i + 1) for i in range(n))),
            ("fskeys", lambda n: {frozenset((i, i + 1)): i for i in range(n)}),
            ("floatkeys_eq_int", lambda n: {float(i): i for i in range(n)}),
            ("bigintkeys", lambda n: {(1 << 70) + i: i for i in range(n)}),
            ("frozenset_ints", lambda n: frozenset(range(n))),
        ]
        for name, make in keyed:
            out.append((f"{name}.{tag}", "keys", "data", [sized(make, size)], 1))
        out.append((f"small.{tag}", "small", "data",
                    [sized(lambda n: [gen_workloads.small_value(random.Random(i), 0, 4)
                                      for i in range(n)], size)], 1))
        out.append((f"ints.{tag}", "ints", "data",
                    [sized(lambda n: [rnd.choice((i, -i, i << 20, i << 40, i & 255))
                                      for i in range(n)], size)], 1))
        adversarial = [
            ("marks_appends", crafted(b"(e", size)),
            ("marks_pop_mark", crafted(b"(1", size, head=b"\x80\x04N")),
            ("memo_gets", crafted(b"h\x00", size, head=b"\x80\x04K\x01\x940](", tail=b"e.")),
            ("dupkeys", crafted(b"h\x01h\x02s", size,
                                head=b"\x80\x04}\x94K\x01\x940K\x02\x940")),
            ("empty_frames", crafted(b"\x95" + bytes(8), size, head=b"\x80\x04",
                                     tail=b"N.")),
            ("put_text", crafted(b"p0\n", size, head=b"\x80\x02N", tail=b".")),
            ("dup_pop", crafted(b"20", size, head=b"\x80\x04N", tail=b".")),
            ("dicts1_setitems", crafted(b"}(K\x01K\x02u", size, head=b"\x80\x04(",
                                        tail=b"l.")),
            ("empty_strs", crafted(b"X\x00\x00\x00\x00", size, head=b"\x80\x04(",
                                   tail=b"l.")),
            ("nested_lists", sized(lambda n: nest(n, list), size)),
            ("nested_tuples", sized(lambda n: nest(n, tuple), size)),
        ]
        for name, data in adversarial:
            out.append((f"{name}.{tag}", "adversarial", "data", [data], 1))
    return out


def nest(n, kind):
    """n chains, each 50 levels of one-item lists or tuples around an int."""
    out = []
    for i in range(n):
        v = i
        for _ in range(50):
            v = kind((v,))
        out.append(v)
    return out


def write_all(regen):
    """Writes the shapes, unless SHAPES.json is there and not `regen`; returns their list."""
    index = os.path.join(OUT, "SHAPES.json")
    if os.path.exists(index) and not regen:
        with open(index) as f:
            return json.load(f)
    os.makedirs(OUT, exist_ok=True)
    meta = []
    for name, group, policy, messages, inner in shapes():
        path = os.path.join(OUT, name + ".frames")
        data = frames(messages)
        if policy != "mitogen":  # every shape is one CPython reads
            for m in messages:
                pickle.loads(m)
        with open(path, "wb") as f:
            f.write(data)
        meta.append({"name": name, "group": group, "policy": policy, "path": path,
                     "inner": inner, "bytes": sum(len(m) for m in messages),
                     "messages": len(messages)})
    with open(index, "w") as f:
        json.dump(meta, f, indent=1)
    return meta


def worker(path, runs, inner):
    """CPython's side: each message a fresh pickle.loads, `inner` times a run."""
    with open(path, "rb") as f:
        messages = split_frames(f.read())
    import time
    loads = pickle.loads
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        for _ in range(inner):
            for m in messages:
                x = loads(m)
        times.append((time.perf_counter() - t) / inner)
        del x
    print(json.dumps({"median_s": statistics.median(times)}))


def python_for(policy):
    """The interpreter that can load the shape: the mitogen venv's for Mitogen objects."""
    if policy == "mitogen":
        for py in (os.environ.get("MITOGEN_PYTHON"),
                   os.path.join(ROOT, "target", "mitogen-venv", "bin", "python"),
                   "/work/main/target/mitogen-venv/bin/python"):
            if py and os.path.exists(py):
                return py
    return sys.executable


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return (p.stderr.strip() or f"exit {p.returncode}").splitlines()[-1][:70]
    return json.loads(p.stdout.strip().splitlines()[-1])["median_s"]


def median_of(cmds, repeat):
    rs = [run(c) for _ in range(repeat) for c in cmds]
    errs = [r for r in rs if isinstance(r, str)]
    return errs[0] if errs else statistics.median(rs)


def fmt_t(s):
    return f"{s * 1e6:,.2f} us" if s < 1e-3 else f"{s * 1e3:,.2f} ms"


def main():
    args = sys.argv[1:]
    if args and args[0] == "--worker":
        worker(args[1], int(args[2]), int(args[3]))
        return
    base, new, runs, repeat, only, build, gen_only = None, None, 7, 3, "", True, False
    regen = False
    it = iter(args)
    for a in it:
        if a == "--base":
            base = next(it)
        elif a == "--new":
            new = next(it)
        elif a == "--runs":
            runs = int(next(it))
        elif a == "--repeat":
            repeat = int(next(it))
        elif a == "--only":
            only = next(it)
        elif a == "--no-build":
            build = False
        elif a == "--gen-only":
            gen_only = regen = True
        elif a == "--regen":
            regen = True
        else:
            raise SystemExit(__doc__)
    meta = write_all(regen)
    if gen_only:
        return
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    if new is None:
        new = os.path.join(target, "release", "examples", "bench_decode")
        if build:
            subprocess.run(["cargo", "build", "--release", "--quiet", "--example",
                            "bench_decode"], cwd=ROOT, check=True)
    cols = "| shape | group | bytes | msgs | pickle.loads | ns/byte | new | ns/byte | x loads (target) |"
    sep = "|---|---|---:|---:|---:|---:|---:|---:|---:|"
    if base:
        cols += " base | x loads | new/base |"
        sep += "---:|---:|---:|"
    print(cols)
    print(sep)
    for s in meta:
        if not (s["name"].startswith(only) or s["group"] == only):
            continue
        inner = s["inner"]
        loads = median_of([[python_for(s["policy"]), os.path.abspath(__file__), "--worker",
                            s["path"], str(runs), str(inner)]], repeat)
        pw = lambda b: [b, s["path"], str(runs), "--frames", "--inner", str(inner),  # noqa: E731
                        "--policy", s["policy"]]
        n = median_of([pw(new)], repeat)
        b = median_of([pw(base)], repeat) if base else None
        size = s["bytes"]
        tgt = TARGETS.get(s["group"], "")
        tgt = f"{tgt}x" if tgt else ("<= 3x small's ns/byte" if s["group"] == "adversarial"
                                     else "")

        def cells(t):
            if isinstance(t, str) or isinstance(loads, str):
                return f"{t if isinstance(t, str) else fmt_t(t)} | - ", "-"
            return f"{fmt_t(t)} | {t * 1e9 / size:.2f}", f"{loads / t:.2f}"
        ncell, nratio = cells(n)
        lcell = (loads if isinstance(loads, str)
                 else f"{fmt_t(loads)} | {loads * 1e9 / size:.2f}")
        line = (f"| {s['name']} | {s['group']} | {size:,} | {s['messages']} | {lcell} "
                f"| {ncell} | {nratio} ({tgt}) |")
        if base:
            bcell, bratio = cells(b)
            nb = (f"{n / b:.3f}" if not isinstance(n, str) and not isinstance(b, str)
                  else "-")
            line += f" {bcell.split(' | ')[0]} | {bratio} | {nb} |"
        print(line, flush=True)


if __name__ == "__main__":
    main()
