#!/usr/bin/env python3
"""Compare picklewarden with CPython on the standard workloads (issue 6); prints markdown.

    python3 bench/gen_workloads.py                 # once: writes target/workloads/
    python3 bench/compare.py [options] [FILE ...]  # default: every *.pkl in target/workloads/

Every (tool, file) pair runs in a process of its own, which reads the file once, runs the tool
RUNS times on it and reports the median wall time of a run and its peak RSS (VmHWM). Tools:
  pickle.loads    CPython's C unpickler (stream files: pickle.Unpickler(BytesIO).load() until
                  the end), cyclic GC on as it is by default
  loads-gc-off    the same with gc.disable() (the cyclic GC runs during loads on the many-objects
                  workloads)
  allowlist       a pickle.Unpickler subclass whose find_class allows only what picklewarden's
                  `data` policy allows, as a careful Python service would do
  genops          `for op in pickletools.genops(data): pass`, how scanners walk a file
  pw-decode       picklewarden decode to the arena, `data` policy
                  (target/release/examples/bench_decode)
  pw-json         picklewarden decode + typed JSON output
  pw-scan         picklewarden scan-only, when the example supports --mode scan
  pw-reuse        pw-decode with each run building into the arena the run before left
                  (Document::recycle, Decoder::scratch), as a process decoding one input after
                  another does; not what the targets are judged on (pickle.loads cannot do it)
  pw-mimalloc     pw-decode in a program whose global allocator is mimalloc instead of glibc
                  malloc (target/release/examples/bench_decode_mimalloc): what a program that
                  embeds the library and picks that allocator gets (docs/performance.md,
                  "Allocator"); pw-decode, with the system allocator, is what targets are judged on
  pw-thp          pw-decode with GLIBC_TUNABLES=glibc.malloc.hugetlb=1: glibc malloc asks for
                  transparent huge pages for the blocks it maps (the arena's pools), so a decode
                  takes a page fault per 2 MiB instead of per 4 KiB, on a kernel whose THP mode is
                  `madvise` (docs/performance.md, "Huge pages"); an environment setting for
                  the process, not the library's doing, and not what targets are judged on
Result objects are dropped after the clock stops (both sides). `objects` is from
MANIFEST.json: values in the decoded data, every occurrence in a container counted.

Options:
  --runs N          runs per process for the fast tools (default 5)
  --slow-runs N     runs per process for genops (default 3)
  --repeat K        run each (tool, file) process K times; report the median of their medians
                    and the largest peak RSS (default 1)
  --tools a,b,...   tools to run (default: all)
  --no-build        do not run `cargo build --release --features bench-mimalloc --example
                    bench_decode --example bench_decode_mimalloc` first
  --native          build and run picklewarden with RUSTFLAGS='-C target-cpu=native' (in
                    target/native/): enables the BMI2 latin-1 packing of the Mitogen protocol-2
                    fast path (src/input/latin1.rs); the default build is portable
  --json FILE       also write the raw results as JSON
"""

import gc
import glob
import io
import json
import os
import pickle
import pickletools
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, ".."))
WORKLOADS = os.path.join(ROOT, "target", "workloads")
PY_TOOLS = ["pickle.loads", "loads-gc-off", "allowlist", "genops"]
PW_TOOLS = ["pw-decode", "pw-json", "pw-scan", "pw-reuse", "pw-mimalloc", "pw-thp"]
ALL_TOOLS = PY_TOOLS + PW_TOOLS

# What picklewarden's `data` policy (policy/data.toml) allows.
ALLOWED = {
    ("builtins", "set"), ("builtins", "frozenset"), ("builtins", "bytearray"),
    ("builtins", "complex"), ("builtins", "bytes"),
    ("__builtin__", "set"), ("__builtin__", "frozenset"), ("__builtin__", "bytearray"),
    ("__builtin__", "complex"), ("__builtin__", "bytes"),
    ("_codecs", "encode"),
}


class AllowlistUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if (module, name) not in ALLOWED:
            raise pickle.UnpicklingError(f"global {module}.{name} is not allowed")
        return super().find_class(module, name)


def peak_rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def load_all(data, cls):
    f = io.BytesIO(data)
    u = cls(f)
    out = []
    while f.tell() < len(data):
        out.append(u.load())
    return out


def walk_ops(data):
    f = io.BytesIO(data)
    n = 0
    while f.tell() < len(data):
        for _ in pickletools.genops(f):
            n += 1
    return n


def worker(tool, path, runs, stream):
    """One process: read the file once, run the tool `runs` times, print one JSON line."""
    with open(path, "rb") as f:
        data = f.read()
    if tool == "pickle.loads" or tool == "loads-gc-off":
        if tool == "loads-gc-off":
            gc.disable()
        fn = (lambda: load_all(data, pickle.Unpickler)) if stream else (lambda: pickle.loads(data))
    elif tool == "allowlist":
        fn = ((lambda: load_all(data, AllowlistUnpickler)) if stream
              else (lambda: AllowlistUnpickler(io.BytesIO(data)).load()))
    elif tool == "genops":
        fn = lambda: walk_ops(data)  # noqa: E731
    else:
        raise SystemExit(f"unknown tool {tool}")
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t)
        result = None  # dropped after the clock stops, before the next run
    del result
    print(json.dumps({"tool": tool, "file": path, "runs": runs,
                      "median_s": statistics.median(times), "min_s": min(times),
                      "peak_rss_kib": peak_rss_kib()}))


NATIVE = False


def target_dir():
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    return os.path.join(target, "native") if NATIVE else target


def bench_binary(tool="pw-decode"):
    name = "bench_decode_mimalloc" if tool == "pw-mimalloc" else "bench_decode"
    return os.path.join(target_dir(), "release", "examples", name)


def run_one(tool, path, runs, stream):
    if tool in PY_TOOLS:
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", tool, path, str(runs)]
        if stream:
            cmd.append("--stream")
    else:
        mode = {"pw-decode": "decode", "pw-json": "json", "pw-scan": "scan",
                "pw-reuse": "decode", "pw-mimalloc": "decode", "pw-thp": "decode"}[tool]
        cmd = [bench_binary(tool), path, str(runs), "--mode", mode]
        if tool == "pw-reuse":
            cmd.append("--reuse")
        if stream:
            cmd.append("--stream")
    env = dict(os.environ)
    if tool == "pw-thp":
        env["GLIBC_TUNABLES"] = "glibc.malloc.hugetlb=1"
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        return {"tool": tool, "file": path, "error": (p.stderr.strip() or f"exit {p.returncode}")}
    r = json.loads(p.stdout.strip().splitlines()[-1])
    r["tool"] = tool
    return r


def combine(rs):
    """The median of several processes' medians, and the largest peak RSS."""
    ok = [r for r in rs if "error" not in r]
    if not ok:
        return rs[0]
    r = dict(ok[0])
    r["median_s"] = statistics.median(x["median_s"] for x in ok)
    r["min_s"] = min(x["min_s"] for x in ok)
    r["peak_rss_kib"] = max(x["peak_rss_kib"] for x in ok)
    r["processes"] = len(ok)
    r["process_medians_s"] = [x["median_s"] for x in ok]
    return r


def fmt_rate(x):
    return f"{x:,.0f}" if x >= 100 else f"{x:,.1f}" if x >= 1 else f"{x:.3f}"


def main():
    global NATIVE
    args = sys.argv[1:]
    if args and args[0] == "--worker":
        worker(args[1], args[2], int(args[3]), "--stream" in args)
        return
    runs, slow_runs, tools, build, json_out, files = 5, 3, ALL_TOOLS, True, None, []
    repeat = 1
    it = iter(args)
    for a in it:
        if a == "--runs":
            runs = int(next(it))
        elif a == "--repeat":
            repeat = int(next(it))
        elif a == "--slow-runs":
            slow_runs = int(next(it))
        elif a == "--tools":
            tools = next(it).split(",")
        elif a == "--no-build":
            build = False
        elif a == "--native":
            NATIVE = True
        elif a == "--json":
            json_out = next(it)
        elif a.startswith("-"):
            raise SystemExit(__doc__)
        else:
            files.append(a)
    if not files:
        files = sorted(glob.glob(os.path.join(WORKLOADS, "*.pkl")))
    if not files:
        raise SystemExit("no workloads: run python3 bench/gen_workloads.py first")
    if build and any(t in PW_TOOLS for t in tools):
        env = dict(os.environ, CARGO_TARGET_DIR=target_dir())
        if NATIVE:
            env["RUSTFLAGS"] = "-C target-cpu=native"
        subprocess.run(["cargo", "build", "--release", "--quiet", "--features", "bench-mimalloc",
                        "--example", "bench_decode", "--example", "bench_decode_mimalloc"],
                       cwd=ROOT, check=True, env=env)
    manifest = {}
    for d in {os.path.dirname(os.path.abspath(f)) for f in files}:
        m = os.path.join(d, "MANIFEST.json")
        if os.path.exists(m):
            with open(m) as f:
                manifest.update(json.load(f))

    results = []
    print("| workload | MB | objects | tool | median ms | MB/s | Mobj/s | x pickle.loads "
          "| peak RSS MiB |")
    print("|---|---:|---:|---|---:|---:|---:|---:|---:|")
    for path in files:
        name = os.path.basename(path)
        info = manifest.get(name, {})
        size = os.path.getsize(path)
        objects = info.get("objects", 0)
        stream = info.get("stream", "_stream" in name)
        base = None
        for tool in tools:
            n = slow_runs if tool == "genops" else runs
            r = combine([run_one(tool, path, n, stream) for _ in range(repeat)])
            r.update(workload=name, bytes=size, objects=objects)
            results.append(r)
            label = name.removesuffix(".pkl")
            if "error" in r:
                err = r["error"].splitlines()[-1][:80]
                if "unknown mode" in err:
                    err = "scan-only not in this build"
                print(f"| {label} | {size / 1e6:.1f} | {objects:,} | {tool} | - | - | - | - "
                      f"| {err} |", flush=True)
                continue
            t = r["median_s"]
            if tool == "pickle.loads":
                base = t
            ratio = f"{base / t:.2f}" if base and t > 0 else "-"
            mbs = size / 1e6 / t if t > 0 else float("inf")
            mobj = objects / 1e6 / t if t > 0 else float("inf")
            print(f"| {label} | {size / 1e6:.1f} | {objects:,} | {tool} | {t * 1e3:,.2f} "
                  f"| {fmt_rate(mbs)} | {fmt_rate(mobj)} | {ratio} "
                  f"| {r['peak_rss_kib'] / 1024:,.0f} |", flush=True)
    print()
    summary(results)
    if json_out:
        with open(json_out, "w") as f:
            json.dump(results, f, indent=1)


# Issue 6's targets: minimum median ratio of pw-decode to pickle.loads.
TARGETS = {"mitogen.p2": 10, "mitogen_stream.p2": 10, "mitogen.p4": 3, "mitogen.p5": 3,
           "mitogen_stream.p4": 3, "mitogen_stream.p5": 3, "small": 10, "ints": 3,
           "longstr": 5}


def target_of(label):
    if label in TARGETS:
        return TARGETS[label]
    return TARGETS.get(label.split(".")[0])


def summary(results):
    """One line per workload: the ratios issue 6 sets targets for."""
    by = {}
    for r in results:
        if "error" not in r:
            by.setdefault(r["workload"], {})[r["tool"]] = r
    print("| workload | pickle.loads MB/s | pw-decode MB/s | decode x loads (target) "
          "| reused arena x loads | mimalloc x loads | huge pages x loads | pw-json x loads "
          "| scan x genops (target 100) | RSS decode / mimalloc / loads / input MiB |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, t in by.items():
        label = name.removesuffix(".pkl")
        size = next(iter(t.values()))["bytes"]
        loads, dec = t.get("pickle.loads"), t.get("pw-decode")
        js, sc, gen = t.get("pw-json"), t.get("pw-scan"), t.get("genops")
        reuse, mi, thp = t.get("pw-reuse"), t.get("pw-mimalloc"), t.get("pw-thp")

        def ratio(a, b):
            return f"{a['median_s'] / b['median_s']:.2f}" if a and b and b["median_s"] else "-"

        def mbs(r):
            return fmt_rate(size / 1e6 / r["median_s"]) if r and r["median_s"] else "-"

        tgt = target_of(label)
        dr = ratio(loads, dec)
        met = ""
        if dr != "-" and tgt:
            met = " ok" if float(dr) >= tgt else " MISS"
        rss = "/".join(f"{r['peak_rss_kib'] / 1024:.0f}" if r else "-"
                       for r in (dec, mi, loads))
        print(f"| {label} | {mbs(loads)} | {mbs(dec)} | {dr} ({tgt}x){met} "
              f"| {ratio(loads, reuse)} | {ratio(loads, mi)} | {ratio(loads, thp)} "
              f"| {ratio(loads, js)} "
              f"| {ratio(gen, sc)} | {rss} / {size / 2**20:.0f} |")


if __name__ == "__main__":
    main()
