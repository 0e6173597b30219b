#!/usr/bin/env python3
"""The differential harness of issue 34: real files, structure-aware mutations, and the real
loader, with a tripwire, a memory cap and a time bound, on everything picklewarden accepts.

    python3 tests/differential/run.py --reader joblib --seconds 1800 \\
        --picklewarden target/release/picklewarden --out /tmp/diff-joblib

Readers (`--reader`, comma-separated, or `all`):
  joblib        joblib.load, every compression           vs `picklewarden scan`
  numpy         numpy.load(allow_pickle=True), npy, npz  vs `scan`
  pickle-numpy  pickle.loads of ndarrays/dtypes/scalars  vs `check --policy numpy`
  pickle-data   pickle.loads of plain data               vs `check --policy data`
  mitogen       Mitogen's Message.unpickle               vs `check --policy mitogen`, and
                                                           `filter --mitogen` (its rewrite)
  torch         torch.load(weights_only=True and False)  vs `scan`; `convert`'s output size
Each reader also grows its cost families' N (record calls and BUILDs repeated through the
memo) until picklewarden refuses or the loader passes a bound.

A failure is a tripwire mark, a signal (SIGSEGV ...) or a bound passed (memory, CPU time,
output size); its input is saved under OUT/found/ with found.tsv (reader, entry point,
classes, outcome). A failure whose mutation class is listed in KNOWN_OPEN.tsv (beside this
script) is counted as known; any other makes the exit status 1.

`--replay DIR` runs the saved inputs of DIR/EXPECTED.tsv instead (tests/differential/found).
Needs the loaders: numpy and joblib (mitogen, lz4, torch when present).
"""
import argparse
import hashlib
import json
import os
import random
import signal
import sys
import time
import warnings

# One thread for every numeric library, before any is imported: the loaders run in forked
# children, and a thread pool does not survive a fork.
for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(v, "1")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import sandbox  # noqa: E402
from common import Case  # noqa: E402

MiB = 1 << 20
READERS = ["joblib", "numpy", "pickle-numpy", "pickle-data", "mitogen", "torch"]


def available(reader):
    """None when the reader's modules import, else why not."""
    mods = {"joblib": ["numpy", "joblib"], "numpy": ["numpy"], "pickle-numpy": ["numpy"],
            "pickle-data": [], "mitogen": ["mitogen.core"], "torch": ["torch", "numpy"]}
    for m in mods[reader]:
        try:
            __import__(m)
        except ImportError as e:
            return "no %s (%s)" % (m, e)
    return None


def reader_module(reader):
    if reader == "joblib":
        import gen_joblib as m
    elif reader in ("numpy", "pickle-numpy"):
        import gen_numpy as m
    elif reader == "pickle-data":
        import gen_data as m
    elif reader == "mitogen":
        import gen_mitogen as m
    else:
        import gen_torch as m
    return m


def case_makers(reader):
    m = reader_module(reader)
    return {"joblib": lambda: (m.joblib_case, m.COST_FAMILIES),
            "numpy": lambda: (m.numpy_case, []),
            "pickle-numpy": lambda: (m.pickle_numpy_case, []),
            "pickle-data": lambda: (m.data_case, m.COST_FAMILIES),
            "mitogen": lambda: (m.mitogen_case, m.COST_FAMILIES),
            "torch": lambda: (m.torch_case, m.COST_FAMILIES)}[reader]()


def loaders():
    def pickle_load(p):
        import pickle
        with open(p, "rb") as f:
            return pickle.loads(f.read())

    def numpy_load(p):
        import numpy as np
        return np.load(p, allow_pickle=True)

    def npz_load(p):
        import numpy as np
        with np.load(p, allow_pickle=True) as z:
            return {k: z[k] for k in z.files}

    def joblib_load(p):
        import joblib
        return joblib.load(p)

    def mitogen_load(p):
        import gen_mitogen
        return gen_mitogen.unpickle_file(p)

    def torch_wo(p):
        import torch
        return torch.load(p, weights_only=True)

    def torch_full(p):
        import torch
        return torch.load(p, weights_only=False)

    return {"pickle": pickle_load, "numpy": numpy_load, "npz": npz_load, "joblib": joblib_load,
            "mitogen": mitogen_load, "torch-wo": torch_wo, "torch": torch_full}


LOADERS = loaders()


def known_open():
    rows = {}
    path = os.path.join(HERE, "KNOWN_OPEN.tsv")
    if os.path.exists(path):
        for line in open(path):
            if line.startswith(("#", "reader\t")) or not line.strip():
                continue
            cols = line.rstrip("\n").split("\t")
            rows.setdefault(cols[0], set()).add(cols[1])
    return rows


class Stats:
    FIELDS = ["generated", "accepted", "loaded", "errors", "marks", "signals", "bounds",
              "known", "pw_crash"]

    def __init__(self):
        self.rows = {}

    def row(self, reader, fmt):
        r = self.rows.get((reader, fmt))
        if r is None:
            r = self.rows[(reader, fmt)] = dict({f: 0 for f in self.FIELDS}, worst_time=0.0,
                                                worst_mem=0.0, worst_out=0.0)
        return r

    def table(self):
        lines = ["%-13s %-16s %9s %8s %7s %6s %5s %7s %6s %5s %10s %10s" % (
            "reader", "format", "generated", "accepted", "loaded", "errors", "marks",
            "signals", "bounds", "known", "time-ratio", "mem-ratio")]
        tot = {f: 0 for f in self.FIELDS}
        for (reader, fmt), r in sorted(self.rows.items()):
            lines.append("%-13s %-16s %9d %8d %7d %6d %5d %7d %6d %5d %10.1f %10.1f" % (
                reader, fmt, r["generated"], r["accepted"], r["loaded"], r["errors"],
                r["marks"], r["signals"], r["bounds"], r["known"], r["worst_time"],
                r["worst_mem"]) + (" out %.1fx" % r["worst_out"] if r["worst_out"] else ""))
            for f in self.FIELDS:
                tot[f] += r[f]
        lines.append("%-30s %9d %8d %7d %6d %5d %7d %6d %5d" % (
            "total", tot["generated"], tot["accepted"], tot["loaded"], tot["errors"],
            tot["marks"], tot["signals"], tot["bounds"], tot["known"]))
        return "\n".join(lines)


class Harness:
    def __init__(self, args):
        self.a = args
        self.pw = os.path.abspath(args.picklewarden)
        self.out = os.path.abspath(args.out)
        self.tmp = os.path.join(self.out, "tmp")
        self.found = os.path.join(self.out, "found")
        os.makedirs(self.tmp, exist_ok=True)
        os.makedirs(self.found, exist_ok=True)
        self.stats = Stats()
        self.known = known_open()
        self.new_failures = 0
        self.t_start = time.monotonic()
        self.first = {}  # (reader, failure, class) -> seconds after its reader started
        self.reader_start = self.t_start
        self.log = open(os.path.join(self.out, "found.tsv"), "a")

    # -- one case
    def run_case(self, case):
        st = self.stats.row(case.reader, case.fmt)
        st["generated"] += 1
        path = os.path.join(self.tmp, "case" + case.ext)
        with open(path, "wb") as f:
            f.write(case.data)
        fail = []
        loads = []  # (loader name, path)
        if case.entry[0] == "filter":
            r = sandbox.run_pw(self.pw, case.entry, None, stdin=case.data)
            import gen_mitogen
            rewritten = gen_mitogen.accepted_payloads(r["out"]) if r["rc"] in (0, 1) else []
            accepted = bool(rewritten)
            for i, payload in enumerate(rewritten):
                p = os.path.join(self.tmp, "rewritten%d.bin" % i)
                with open(p, "wb") as f:
                    f.write(payload)
                loads.append((case.loader, p))
        else:
            r = sandbox.run_pw(self.pw, case.entry, path)
            accepted = r["rc"] == 0
            if accepted:
                for ld in (["torch-wo", "torch"] if case.loader == "torch" else [case.loader]):
                    loads.append((ld, path))
        if r["signal"] or r["rc"] not in (0, 1, 3):
            fail.append("pw-crash:rc=%d,signal=%d" % (r["rc"], r["signal"]))
            st["pw_crash"] += 1
        pw_cpu = max(r["cpu"], 0.001)
        outcome = {"pw_rc": r["rc"], "pw_cpu": round(r["cpu"], 4),
                   "pw_err": r["err"][-300:].decode("utf-8", "replace")}
        if accepted:
            st["accepted"] += 1
        size = len(case.data)
        allowance = max(self.a.mem_floor * MiB, self.a.mem_factor * size)
        bound = max(self.a.time_floor, self.a.time_factor * pw_cpu)
        for ld, p in loads:
            res = sandbox.run_loader(LOADERS[ld], p, allowance, bound,
                                     os.path.join(self.tmp, "child"))
            if res["status"] == "memory" and res["mem"] < allowance // 2:
                res = self.check_memory_error(ld, p, allowance, bound, res)
            outcome[ld] = {k: res.get(k) for k in ("status", "signal", "cpu", "mem", "marks",
                                                    "error")}
            tr = res["cpu"] / pw_cpu
            mr = res["mem"] / max(size, 1)
            st["worst_time"] = max(st["worst_time"], tr)
            st["worst_mem"] = max(st["worst_mem"], mr)
            if res["marks"]:
                fail.append("mark:%s:%s" % (ld, ",".join(res["marks"])))
            if res["status"] == "signal":
                fail.append("signal:%s:%s" % (ld, res.get("signal") or "fatal"))
                outcome[ld]["stderr"] = res.get("stderr", "")[-1500:]
            elif res["status"] in ("cpu", "wall") or res["cpu"] > bound:
                fail.append("bound-time:%s:%.2fs>%.2fs" % (ld, res["cpu"], bound))
            elif res["status"] == "memory" or res["mem"] > allowance:
                fail.append("bound-memory:%s:%dMiB" % (ld, res["mem"] // MiB))
            elif res["status"] == "fsize":
                fail.append("bound-file:%s" % ld)
            elif res["status"] == "ok":
                st["loaded"] += 1
            else:
                st["errors"] += 1
                self.loader_error(case, ld, res)
        if accepted and case.reader == "torch" and case.data[:2] == b"PK":
            fail += self.convert(case, path, st, outcome)
        if fail:
            self.failure(case, fail, outcome, st)
        return accepted, fail

    def check_memory_error(self, ld, path, allowance, bound, res):
        """A MemoryError raised with little memory used is a bound passed only when the
        loader asked for more than the allowance: numpy and torch say how much ("Unable to
        allocate 1.00 TiB", "you tried to allocate N bytes"); otherwise the load is run again
        under four times the cap, and a MemoryError that comes again with as little memory
        used is the loader's own refusal (numpy raises a bare MemoryError for some dtypes of
        size 0), counted as an error."""
        asked = sandbox.requested_bytes(res.get("error") or "")
        if asked is not None:
            if asked <= allowance:
                res["status"] = "error"
            return res
        again = sandbox.run_loader(LOADERS[ld], path, 4 * allowance, bound,
                                   os.path.join(self.tmp, "child"))
        if again["status"] in ("memory", "error", "ok") and again["mem"] < allowance:
            again["status"] = "error" if again["status"] == "memory" else again["status"]
            again["error"] = (again.get("error") or "") + " (MemoryError under the cap only)"
            return again
        return again

    def convert(self, case, path, st, outcome):
        size = len(case.data)
        cap = int(max(self.a.out_floor * MiB, self.a.out_factor * size))
        dst = os.path.join(self.tmp, "out.safetensors")
        if os.path.exists(dst):
            os.unlink(dst)
        r = sandbox.run_pw(self.pw, ["convert", path, dst], None, fsize_cap=cap + 1)
        written = os.path.getsize(dst) if os.path.exists(dst) else 0
        if os.path.exists(dst):
            os.unlink(dst)
        outcome["convert"] = {"rc": r["rc"], "signal": r["signal"], "bytes": written}
        st["worst_out"] = max(st["worst_out"], written / max(size, 1))
        if r["signal"] == 25 or written > cap:  # SIGXFSZ
            return ["bound-output:convert:>%dMiB from %dKiB" % (cap // MiB, size // 1024)]
        return []

    def loader_error(self, case, ld, res):
        """A loader that raised an exception of its own on what picklewarden accepted: not a
        failure (nothing ran, crashed or passed a bound), but a form the loader does not
        read, which a canonical reader should not have accepted. Each is kept in
        OUT/errors/ (small inputs) with a line of OUT/errors.tsv, to be looked at."""
        d = os.path.join(self.a.out, "errors")
        os.makedirs(d, exist_ok=True)
        sha = hashlib.sha1(case.data).hexdigest()
        name = "%s-%s%s" % (case.reader, sha[:12], case.ext)
        if len(case.data) <= self.a.keep_bytes:
            with open(os.path.join(d, name), "wb") as f:
                f.write(case.data)
        with open(os.path.join(self.a.out, "errors.tsv"), "a") as f:
            f.write(json.dumps({"file": name, "reader": case.reader, "fmt": case.fmt,
                                "loader": ld, "classes": case.classes(), "muts": case.muts,
                                "error": (res.get("error") or "")[-500:]}) + "\n")

    def failure(self, case, fail, outcome, st):
        kinds = {f.split(":")[0] for f in fail}
        if any(k == "mark" for k in kinds):
            st["marks"] += 1
        if "signal" in kinds:
            st["signals"] += 1
        if kinds & {"bound-time", "bound-memory", "bound-file", "bound-output"}:
            st["bounds"] += 1
        classes = case.classes() + ([case.family] if case.family else [])
        known = self.known.get(case.reader, set())
        is_known = bool(known & set(classes)) and "pw-crash" not in kinds
        if is_known:
            st["known"] += 1
        else:
            self.new_failures += 1
        elapsed = time.monotonic() - self.reader_start
        for k in kinds:
            for c in classes or ["-"]:
                key = (case.reader, k, c)
                if key not in self.first:
                    self.first[key] = elapsed
        sha = hashlib.sha1(case.data).hexdigest()
        name = "%s-%s-%s%s" % (case.reader, sorted(kinds)[0], sha[:12], case.ext)
        # Keep small inputs; of large ones (cost families) only the recipe.
        if len(case.data) <= self.a.keep_bytes:
            with open(os.path.join(self.found, name), "wb") as f:
                f.write(case.data)
        else:
            name = "-"
        row = {"file": name, "reader": case.reader, "fmt": case.fmt, "entry": case.entry,
               "loader": case.loader, "classes": classes, "muts": case.muts,
               "family": case.family, "n": case.n, "size": len(case.data), "fail": fail,
               "known": is_known, "elapsed": round(elapsed, 1), "outcome": outcome}
        self.log.write(json.dumps(row) + "\n")
        self.log.flush()
        if self.a.verbose or not is_known:
            print("FAIL%s %s %s %s %s" % (" (known)" if is_known else "", case.reader,
                                          case.fmt, fail, classes[:4]), flush=True)

    # -- a reader for its share of the time
    def run_reader(self, reader, seconds, rng):
        make, families = case_makers(reader)
        self.reader_start = time.monotonic()
        fam_state = {f.name: {"n": f.n0, "done": False} for f in families}
        deadline = time.monotonic() + seconds
        i = 0
        while time.monotonic() < deadline:
            i += 1
            live = [f for f in families if not fam_state[f.name]["done"]]
            if live and rng.random() < self.a.cost_share:
                fam = rng.choice(live)
                s = fam_state[fam.name]
                case = fam.make(s["n"])
                case.family, case.n = fam.name, s["n"]
                accepted, fail = self.run_case(case)
                # convert's output alone ends only the families about convert: a deflated
                # storage goes on growing until torch.load itself passes a bound
                loader_fail = [f for f in fail if not f.startswith("bound-output")]
                if fail and not loader_fail and not getattr(fam, "output", False):
                    s.setdefault("notes", []).append("convert crossed at N=%d" % s["n"])
                    fail = []
                if fail or not accepted or s["n"] * 2 > fam.n_max:
                    s["done"] = True
                    s["result"] = ("crossed" if fail else "refused" if not accepted
                                   else "max") + " at N=%d" % s["n"]
                    s["result"] += "".join("; " + n for n in s.get("notes", []))
                    print("cost family %s/%s: %s (%d bytes)" % (reader, fam.name, s["result"],
                                                                len(case.data)), flush=True)
                s["n"] *= 2
                continue
            try:
                signal.setitimer(signal.ITIMER_REAL, 20)
                case = make(rng)
            except Exception as e:  # a writer refusing a mutated object is not a finding
                if self.a.verbose:
                    print("writer: %s: %s" % (type(e).__name__, e))
                continue
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            self.run_case(case)
        for f in families:
            s = fam_state[f.name]
            if not s["done"]:
                print("cost family %s/%s: reached N=%d without a finding" % (
                    reader, f.name, s["n"] // 2), flush=True)

    def replay(self, folder):
        """Runs every saved input of folder/EXPECTED.tsv; returns the number whose outcome
        is not the expected one (open ones are reported only)."""
        bad = 0
        for line in open(os.path.join(folder, "EXPECTED.tsv")):
            if line.startswith(("#", "file\t")) or not line.strip():
                continue
            cols = line.rstrip("\n").split("\t")
            fname, reader, loader, entry, expected, status = cols[:6]
            if available(reader) is not None:
                print("replay %s: skipped (%s)" % (fname, available(reader)))
                continue
            if fname.endswith(".py"):
                data = _recipe(os.path.join(folder, fname))
                ext = cols[6] if len(cols) > 6 else ".bin"
            else:
                with open(os.path.join(folder, fname), "rb") as f:
                    data = f.read()
                if fname.endswith(".xz"):
                    import lzma
                    data = lzma.decompress(data)
                    fname = fname[:-3]
                ext = os.path.splitext(fname)[1]
            case = Case(reader, "replay", data, ext, entry.split(), loader, ["replay"])
            accepted, fail = self.run_case(case)
            got = "refused" if not accepted else ("failed" if fail else "safe")
            ok = got == expected or (expected == "refused-or-safe" and got != "failed")
            note = ("" if ok and status == "fixed" else " MISMATCH" if status == "fixed"
                    else " (still open)" if not ok else " (as expected now: flip it to fixed)")
            print("replay %s: %s (expected %s, %s)%s" % (fname, got, expected, status, note))
            if not ok and status == "fixed":
                bad += 1
        return bad


def _recipe(path):
    """A saved input too large to commit: the script that makes it (its `make()` returns the
    bytes)."""
    ns = {"__file__": path}
    exec(compile(open(path).read(), path, "exec"), ns)
    return ns["make"]()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reader", default="all")
    ap.add_argument("--seconds", type=float, default=60.0, help="total budget, shared by the readers")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--picklewarden", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--replay", help="run the saved inputs of this folder's EXPECTED.tsv")
    ap.add_argument("--time-floor", type=float, default=1.0, help="seconds of loader CPU")
    ap.add_argument("--time-factor", type=float, default=100.0,
                    help="loader CPU allowed per second of picklewarden's CPU")
    ap.add_argument("--mem-floor", type=int, default=512, help="MiB of loader memory")
    ap.add_argument("--mem-factor", type=int, default=64, help="loader bytes per input byte")
    ap.add_argument("--out-floor", type=int, default=16, help="MiB convert may write")
    ap.add_argument("--out-factor", type=int, default=8, help="convert bytes per input byte")
    ap.add_argument("--cost-share", type=float, default=0.1,
                    help="share of cases drawn from the cost families")
    ap.add_argument("--keep-bytes", type=int, default=256 * 1024,
                    help="largest failing input saved as a file")
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args()
    warnings.simplefilter("ignore")  # zipfile's duplicate names are the point

    def too_slow(*_):
        raise TimeoutError("the writer took over 20 s")

    signal.signal(signal.SIGALRM, too_slow)
    h = Harness(a)
    if a.replay:
        bad = h.replay(a.replay)
        print(h.stats.table())
        print("replay: %d fixed inputs not as expected" % bad)
        return 1 if bad else 0
    readers = READERS if a.reader == "all" else a.reader.split(",")
    todo = []
    for r in readers:
        why = available(r)
        if why is None:
            todo.append(r)
        else:
            print("SKIPPED reader %s: %s" % (r, why))
    if not todo:
        print("no reader available")
        return 2
    rng = random.Random(a.seed)
    for r in todo:
        print("== reader %s, %.0f s, seed %d" % (r, a.seconds / len(todo), a.seed), flush=True)
        h.run_reader(r, a.seconds / len(todo), random.Random(rng.random()))
    print(h.stats.table())
    if h.first:
        print("first seen (seconds after its reader started): reader, failure, class")
        for (reader, kind, cls), t in sorted(h.first.items(), key=lambda x: x[1]):
            print("  %7.1f  %s  %s  %s" % (t, reader, kind, cls))
    print("new failures: %d (known open: %d)" % (
        h.new_failures, sum(r["known"] for r in h.stats.rows.values())))
    return 1 if h.new_failures else 0


if __name__ == "__main__":
    sys.exit(main())
