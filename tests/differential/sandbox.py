"""Running picklewarden and the real loaders.

- `run_pw`: picklewarden as a subprocess, with its CPU time (wait4's rusage), under a wall
  timeout and a memory cap of its own.
- `run_loader`: the real loader in a forked child of the harness (which has imported numpy,
  joblib, mitogen, torch once), with `faulthandler` on, RLIMIT_AS (the harness's own address
  space plus the allowance), RLIMIT_CPU at the time bound, RLIMIT_FSIZE, the tripwire folder on
  sys.path and $PW_TRIPWIRE_DIR naming a fresh folder. After the load the child takes `repr()`
  of the result and walks it (crashes from bad object pointers show there). The parent reads
  the child's exit status, its rusage (CPU time, peak RSS) and the mark files.

Standard library only (the loaders are imported by the reader modules).
"""
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time

from common import TRIPWIRE_DIR

MiB = 1 << 20


def proc_status():
    """(VmRSS, VmSize) of this process in bytes."""
    rss = vsz = 0
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) * 1024
            elif line.startswith("VmSize:"):
                vsz = int(line.split()[1]) * 1024
    return rss, vsz


def run_pw(pw, args, path, stdin=None, timeout=120, mem_cap=4 << 30, fsize_cap=None):
    """Runs `pw ARGS PATH` (PATH may be None). Returns dict(rc, signal, cpu, wall, out, err)."""

    def limits():
        resource.setrlimit(resource.RLIMIT_AS, (mem_cap, mem_cap))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if fsize_cap is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize_cap, fsize_cap))

    argv = [pw] + list(args) + ([path] if path is not None else [])
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.TemporaryFile() as inp:
        if stdin is not None:
            inp.write(stdin)
            inp.seek(0)
        t0 = time.monotonic()
        p = subprocess.Popen(argv, stdin=inp, stdout=out, stderr=err, preexec_fn=limits)
        killer = threading.Timer(timeout, lambda: _kill(p.pid))
        killer.start()
        try:
            _, status, ru = os.wait4(p.pid, 0)
        finally:
            killer.cancel()
        p.returncode = 0  # reaped here, not by Popen
        wall = time.monotonic() - t0
        out.seek(0)
        err.seek(0)
        o, e = out.read(), err.read()
    sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0
    rc = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -sig
    return {"rc": rc, "signal": sig, "cpu": ru.ru_utime + ru.ru_stime, "wall": wall,
            "maxrss": ru.ru_maxrss * 1024, "out": o, "err": e}


def _kill(pid):
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


# ---------------------------------------------------------------- the loader child

_REPR = None


def walk(v, budget=2_000_000):
    """A bounded repr() of the result (reprlib: a few levels, long strings cut, numpy's own
    summarised repr for arrays), then a walk that takes the type of every object reached:
    every container item, numpy object array element and torch tensor, each object once. A
    bad object pointer crashes at its first touch; the walk's own cost stays linear in what
    the loader built (a full repr of 128 bytearrays of 900 KB would be 460 MB of text, the
    harness's cost, not the loader's)."""
    global _REPR
    if _REPR is None:
        import reprlib
        _REPR = reprlib.Repr()
        _REPR.maxlevel, _REPR.maxstring, _REPR.maxother = 6, 200, 400
        for a in ("maxlist", "maxtuple", "maxdict", "maxset", "maxfrozenset", "maxdeque",
                  "maxarray"):
            setattr(_REPR, a, 50)
    r = _REPR.repr(v)
    seen = set()
    stack = [v]
    visits = 0
    while stack and visits < budget:
        x = stack.pop()
        visits += 1
        if id(x) in seen:
            continue
        seen.add(id(x))
        t = type(x)
        if t in (str, bytes, bytearray, int, float, complex, bool, type(None)):
            continue
        if isinstance(x, (list, tuple, set, frozenset)):
            stack.extend(x)
        elif isinstance(x, dict):
            for k, y in x.items():
                stack.append(k)
                stack.append(y)
            d = getattr(x, "__dict__", None)
            if d:
                stack.append(d)
        elif t.__module__ == "numpy" and t.__name__ == "ndarray":
            repr(x)
            if x.dtype.hasobject:
                stack.extend(x.ravel().tolist() if x.dtype.names is None else x.ravel())
        elif t.__module__.startswith("torch"):
            repr(x)
        else:
            d = getattr(x, "__dict__", None)
            if isinstance(d, dict):
                stack.append(d)
            _REPR.repr(x)
    return len(r), visits


def run_loader(fn, path, allowance, cpu_limit, workdir, wall_limit=None):
    """Forks a child that runs fn(path) then walk(result). Returns a dict: status ('ok',
    'error', 'signal', 'memory', 'cpu', 'wall'), signal name, cpu, maxrss delta, marks,
    error text, and the child's stderr tail (faulthandler's traceback)."""
    os.makedirs(workdir, exist_ok=True)
    for f in os.listdir(workdir):
        os.unlink(os.path.join(workdir, f))
    result_path = os.path.join(workdir, "result.json")
    err_path = os.path.join(workdir, "stderr.txt")
    base_rss, base_vsz = proc_status()
    cpu_limit = max(1, int(cpu_limit + 0.999))
    wall_limit = wall_limit or (4 * cpu_limit + 20)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child
        code = 5
        try:
            fd = os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            import faulthandler
            faulthandler.enable(file=sys.stderr, all_threads=True)
            cap = base_vsz + allowance
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
            resource.setrlimit(resource.RLIMIT_CPU, (cpu_limit, cpu_limit + 2))
            resource.setrlimit(resource.RLIMIT_FSIZE, (64 * MiB, 64 * MiB))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            os.environ["PW_TRIPWIRE_DIR"] = workdir
            sys.path.insert(0, TRIPWIRE_DIR)
            os.chdir(workdir)
            res = {}
            t0 = time.process_time()
            try:
                v = fn(path)
                t1 = time.process_time()
                res["load_cpu"] = t1 - t0
                res["repr_len"], res["visits"] = walk(v)
                res["walk_cpu"] = time.process_time() - t1
                code = 0
            except MemoryError as e:
                res["error"] = "MemoryError: %s" % str(e)[:300]
                code = 3
            except BaseException as e:  # noqa: B902 (the loader's own refusal)
                msg = "%s: %s" % (type(e).__name__, str(e)[:300])
                res["error"] = msg
                code = 3 if _is_alloc_failure(msg) else 4
            with open(result_path, "w") as f:
                json.dump(res, f)
        finally:
            os._exit(code)
    t0 = time.monotonic()
    killed = False
    while True:
        wpid, status, ru = os.wait4(pid, os.WNOHANG)
        if wpid == pid:
            break
        if time.monotonic() - t0 > wall_limit and not killed:
            _kill(pid)
            killed = True
        time.sleep(0.002 if time.monotonic() - t0 < 0.2 else 0.02)
    cpu = ru.ru_utime + ru.ru_stime
    out = {"cpu": cpu, "mem": max(0, ru.ru_maxrss * 1024 - base_rss), "marks": [],
           "wall": time.monotonic() - t0}
    try:
        with open(result_path) as f:
            out.update(json.load(f))
    except (OSError, ValueError):
        pass
    out["marks"] = sorted(f for f in os.listdir(workdir) if f.startswith("mark-"))
    try:
        with open(err_path, "rb") as f:
            out["stderr"] = f.read()[-3000:].decode("utf-8", "replace")
    except OSError:
        out["stderr"] = ""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        name = signal.Signals(sig).name
        out["signal"] = name
        if killed:
            out["status"] = "wall"
        elif sig in (signal.SIGXCPU, signal.SIGKILL):
            out["status"] = "cpu"  # RLIMIT_CPU: SIGXCPU at the soft limit, SIGKILL at the hard
        elif sig == signal.SIGXFSZ:
            out["status"] = "fsize"
        else:
            out["status"] = "signal"
    else:
        code = os.WEXITSTATUS(status)
        out["status"] = {0: "ok", 3: "memory", 4: "error"}.get(code, "exit%d" % code)
        if out["status"] in ("exit5",) and "Fatal Python error" in out.get("stderr", ""):
            out["status"] = "signal"
    return out


_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40,
          "PiB": 1 << 50, "EiB": 1 << 60}


def requested_bytes(msg):
    """The allocation a loader's MemoryError says it asked for, in bytes, or None."""
    import re
    m = re.search(r"Unable to allocate ([0-9.]+) ([KMGTPE]?i?B)", msg)
    if m and m.group(2) in _UNITS:
        return int(float(m.group(1)) * _UNITS[m.group(2)])
    m = re.search(r"you tried to allocate (\d+) bytes", msg)
    if m:
        return int(m.group(1))
    return None


def _is_alloc_failure(msg):
    m = msg.lower()
    return ("memoryerror" in m or "can't allocate memory" in m or "out of memory" in m
            or "cannot allocate memory" in m or "unable to allocate" in m
            or "std::bad_alloc" in m)
