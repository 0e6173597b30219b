#!/usr/bin/env python3
"""Write the standard benchmark workloads (issue 6) into a folder, default target/workloads/.

    python3 bench/gen_workloads.py [OUT_DIR] [--only NAME_PREFIX]

Deterministic: every value comes from a random.Random with a fixed seed, and the script
re-executes itself with PYTHONHASHSEED=0 so set iteration order (and so the bytes) is the same
on every run of the same CPython version. Standard library only. The files are big (about
700 MB in all): never commit them (target/ is git-ignored).

Files (NAME.pN.pkl; `stream` files hold one pickle per chunk, one after another, each written
by its own pickle.dumps, to be read with Decoder::decode_stream / Unpickler.load() in a loop):
  mitogen.pN.pkl          [bytes * 512], 128 KiB of random bytes each (p2: bytes are
                          _codecs.encode(latin-1 text) REDUCEs, as Python 3 writes them)
  mitogen_stream.pN.pkl   the same 512 chunks, one pickle each
  small.pN.pkl            about 20 MB of many small objects: nested dicts, lists, tuples, sets
                          of small ints, floats, short ASCII and non-ASCII str, bytes,
                          None/True/False, 3-5 levels deep
  ints.p4.pkl             a list of 5,000,000 ints of mixed sizes
  longstr.p4.pkl          2,000 str of 64 KiB (UTF-8) of non-ASCII text
MANIFEST.json gives, for each file: size in bytes, whether it is a stream, the number of pickles,
and `objects`: the number of Python values in the decoded data, counting every occurrence in a
container (a shared key object counts each time it appears), containers included.
"""

import json
import os
import pickle
import random
import sys

if os.environ.get("PYTHONHASHSEED") != "0":
    env = dict(os.environ, PYTHONHASHSEED="0")
    os.execve(sys.executable, [sys.executable] + sys.argv, env)

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.normpath(os.path.join(HERE, "..", "target", "workloads"))

CHUNK = 128 * 1024
CHUNKS = 512
SMALL_RECORDS = 184_000  # gives about 20 MB at protocol 4
INTS = 5_000_000
LONGSTRS = 2_000
LONGSTR_BYTES = 64 * 1024


def count_objects(root):
    """Values in the tree, every container occurrence counted, containers included."""
    n = 0
    stack = [root]
    while stack:
        v = stack.pop()
        n += 1
        if isinstance(v, dict):
            for k, x in v.items():
                stack.append(k)
                stack.append(x)
        elif isinstance(v, (list, tuple, set, frozenset)):
            stack.extend(v)
    return n


# ---------------------------------------------------------------------------------- values

def mitogen_chunks():
    rnd = random.Random(6_0001)
    return [rnd.randbytes(CHUNK) for _ in range(CHUNKS)]


KEYS = [
    "id", "name", "title", "value", "count", "enabled", "tags", "owner", "created", "size",
    "ratio", "path", "children", "meta", "état", "größe", "名前", "ключ", "flags", "data",
]
ASCII_WORDS = ["alpha", "beta", "gamma", "delta", "x", "hello world", "ok", "error: none",
               "/usr/lib/python3", "k8s-node-17", "", "a" * 30]
UNI_WORDS = ["café", "naïve", "Ελληνικά", "русский", "日本語のテキスト", "中文", "emoji 🎉",
             "Zürich", "Ω≈ç√∫", "한국어"]


def small_value(rnd, depth, max_depth):
    r = rnd.random()
    if depth < max_depth and r < 0.25:
        kind = rnd.randrange(5)
        n = rnd.randrange(0, 6)
        if kind == 0:
            return {rnd.choice(KEYS): small_value(rnd, depth + 1, max_depth) for _ in range(n)}
        if kind == 1:
            return [small_value(rnd, depth + 1, max_depth) for _ in range(n)]
        if kind == 2:
            return tuple(small_value(rnd, depth + 1, max_depth) for _ in range(n))
        if kind == 3:
            return {rnd.randrange(-5, 300) for _ in range(n)}
        return {rnd.choice(KEYS): small_value(rnd, depth + 1, max_depth) for _ in range(n)}
    r = rnd.random()
    if r < 0.22:
        return rnd.randrange(-1000, 100_000)
    if r < 0.30:
        return rnd.randrange(-(1 << 40), 1 << 40)
    if r < 0.45:
        return rnd.random() * 1e6 - 5e5
    if r < 0.65:
        return rnd.choice(ASCII_WORDS) + str(rnd.randrange(1000))
    if r < 0.75:
        return rnd.choice(UNI_WORDS) + str(rnd.randrange(100))
    if r < 0.83:
        return rnd.randbytes(rnd.randrange(0, 24))
    if r < 0.89:
        return None
    if r < 0.95:
        return True
    return False


def small_objects():
    rnd = random.Random(6_0002)
    out = []
    for _ in range(SMALL_RECORDS):
        max_depth = rnd.randrange(3, 6)
        rec = {k: small_value(rnd, 1, max_depth) for k in rnd.sample(KEYS, rnd.randrange(4, 9))}
        rec["id"] = rnd.randrange(1 << 31)
        rec["tags"] = {rnd.randrange(0, 64) for _ in range(rnd.randrange(0, 5))}
        out.append(rec)
    return out


def mixed_ints():
    rnd = random.Random(6_0003)
    out = []
    for _ in range(INTS):
        r = rnd.random()
        if r < 0.40:
            out.append(rnd.randrange(0, 256))                      # BININT1
        elif r < 0.60:
            out.append(rnd.randrange(256, 65536))                  # BININT2
        elif r < 0.85:
            out.append(rnd.randrange(-(1 << 31), 1 << 31))         # BININT
        else:
            out.append(rnd.randrange(-(1 << 63), 1 << 63))         # LONG1, 8 bytes or fewer
    return out


def long_strings():
    rnd = random.Random(6_0004)
    pool = UNI_WORDS + ASCII_WORDS[:6] + ["ß", "ü", "ñ", "€100", "→", "…", "«»", "𝔘𝔫𝔦"]
    out = []
    for _ in range(LONGSTRS):
        parts = []
        size = 0
        while size < LONGSTR_BYTES:
            w = rnd.choice(pool)
            parts.append(w)
            size += len(w.encode("utf-8")) + 1
        s = " ".join(parts).encode("utf-8")[:LONGSTR_BYTES].decode("utf-8", "ignore")
        out.append(s)
    return out


# ---------------------------------------------------------------------------------- files

def write(out_dir, manifest, name, data, objects, stream=False, pickles=1):
    path = os.path.join(out_dir, name)
    with open(path, "wb") as f:
        f.write(data)
    manifest[name] = {"bytes": len(data), "stream": stream, "pickles": pickles,
                      "objects": objects}
    print(f"{name}: {len(data):,} bytes, {objects:,} objects", file=sys.stderr)


def main():
    args = [a for a in sys.argv[1:]]
    only = ""
    if "--only" in args:
        i = args.index("--only")
        only = args[i + 1]
        del args[i:i + 2]
    out_dir = args[0] if args else DEFAULT_OUT
    os.makedirs(out_dir, exist_ok=True)
    mpath = os.path.join(out_dir, "MANIFEST.json")
    manifest = {}
    if os.path.exists(mpath):
        with open(mpath) as f:
            manifest = json.load(f)

    names = [f"{kind}.p{p}" for kind in ("mitogen", "mitogen_stream", "small") for p in (2, 4, 5)]
    names += ["ints.p4", "longstr.p4"]
    if not any(n.startswith(only) for n in names):
        sys.exit(f"gen_workloads.py: no workload name starts with {only!r} "
                 f"(names: {', '.join(names)})")

    def want(name):
        # A group (`mitogen`) is made when some file of it is wanted; a file when its name
        # starts with the prefix (`small` or `small.p4`).
        return name.startswith(only) or only.startswith(name)

    if want("mitogen"):
        chunks = mitogen_chunks()
        for p in (2, 4, 5):
            if want(f"mitogen.p{p}"):
                write(out_dir, manifest, f"mitogen.p{p}.pkl", pickle.dumps(chunks, protocol=p),
                      count_objects(chunks))
            if want(f"mitogen_stream.p{p}"):
                data = b"".join(pickle.dumps(c, protocol=p) for c in chunks)
                write(out_dir, manifest, f"mitogen_stream.p{p}.pkl", data, CHUNKS,
                      stream=True, pickles=CHUNKS)
        del chunks
    if want("small"):
        v = small_objects()
        n = count_objects(v)
        for p in (2, 4, 5):
            if want(f"small.p{p}"):
                write(out_dir, manifest, f"small.p{p}.pkl", pickle.dumps(v, protocol=p), n)
        del v
    if want("ints"):
        v = mixed_ints()
        write(out_dir, manifest, "ints.p4.pkl", pickle.dumps(v, protocol=4), count_objects(v))
        del v
    if want("longstr"):
        v = long_strings()
        write(out_dir, manifest, "longstr.p4.pkl", pickle.dumps(v, protocol=4),
              count_objects(v))
        del v
    with open(mpath, "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
