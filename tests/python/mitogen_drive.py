#!/usr/bin/env python3
"""Drives real Mitogen through `picklewarden guard` (run by the virtualenv's python that has
the pinned mitogen). Every blocking step has a timeout.

  mitogen_drive.py calls PICKLEWARDEN DIR   parent calls functions in a child behind the guard
      (capturing both directions into DIR), checks the results, then checks that every
      captured frame decodes in picklewarden (`decode --mitogen`) to what Mitogen's own
      unpickler gives, compared as canonical typed JSON. Prints a JSON summary.
  mitogen_drive.py evil PICKLEWARDEN DIR    the child sends a frame calling os.system: the
      guard must cut the child off before the parent reads it; prints a JSON summary.
  mitogen_drive.py handover PICKLEWARDEN DIR   one child behind the default guard sends what
      a hostile child would hand its parent: GET_RESOURCE naming `this` (imported by the master
      if it got the frame), a reply of 101 new Contexts, a memo-bomb reply, a set reply (which
      stock Mitogen refuses too) and a malformed CALL_SERVICE asking for a reply; each fails
      only its own call, the next call on the same child works, and the parent neither imports
      `this` nor keeps the Contexts nor reads the child's bytes. Then a guard whose policy lets
      children read `this`'s resources shows the GET_RESOURCE frame imports it. Prints a JSON
      summary.
  mitogen_drive.py canonical PICKLEWARDEN DIR   the calls of `calls` through `guard
      --canonical` (the parent reads picklewarden's protocol-2 rewrite of every reply), then
      the captured replies through `filter --mitogen --framed --canonical`: every rewritten
      frame keeps its header but for the length, holds only protocol-2 opcodes, and Mitogen's
      own unpickler reads it as it reads the child's frame. Prints a JSON summary.
"""
import io
import json
import logging
import os
import struct
import subprocess
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import mitogen.core  # noqa: E402
import mitogen.master  # noqa: E402
import mitogen.parent  # noqa: E402

import mitogen_funcs as F  # noqa: E402

TIMEOUT = 60
HEADER = struct.Struct(">hLLLLLL")


def start(pw, capture, extra=()):
    broker = mitogen.master.Broker()
    router = mitogen.master.Router(broker)
    ctx = router.local(
        python_path=[pw, "guard", "--capture", capture,
                     "--audit-log", os.path.join(capture, "audit.jsonl"), *extra,
                     "--", sys.executable],
        connect_timeout=TIMEOUT,
    )
    return broker, router, ctx


def stop(broker):
    t = threading.Thread(target=broker.shutdown, daemon=True)
    t.start()
    t.join(TIMEOUT)
    broker.join() if not t.is_alive() else None


def call(ctx, fn, *args):
    return ctx.call_async(fn, *args).get(timeout=TIMEOUT).unpickle()


# ---------------------------------------------------------------- oracle: Mitogen's unpickler

class SenderStub:
    def __init__(self, context_id, dst_handle):
        self.context_id, self.dst_handle = context_id, dst_handle


def find_class(msg):
    def find(module, name):
        if module == "mitogen.core" and name == "_unpickle_sender":
            return SenderStub  # the real one needs a Router
        return msg._find_global(module, name)
    return find


def g(module, name):
    return {"type": "global", "module": module, "name": name}


def obj(name, *args):
    return {"type": "object", "kind": "reduce", "callable": g("mitogen.core", name),
            "args": {"type": "tuple", "items": [canon(a) for a in args]}}


def canon(v):
    """Canonical typed JSON (no ids) of a value Mitogen's unpickler made."""
    t = type(v)
    if v is None:
        return {"type": "none"}
    if t is bool:
        return {"type": "bool", "value": v}
    if t is int:
        return {"type": "int", "value": str(v)}
    if t is float:
        return {"type": "float", "bits": struct.pack(">d", v).hex(), "repr": repr(v)}
    if t is str:
        return {"type": "str", "value": v}
    if t is bytes:
        return {"type": "bytes", "hex": v.hex()}
    if t is list:
        return {"type": "list", "items": [canon(x) for x in v]}
    if t is tuple:
        return {"type": "tuple", "items": [canon(x) for x in v]}
    if t is dict:
        return {"type": "dict", "items": [[canon(k), canon(x)] for k, x in v.items()]}
    if t is mitogen.core.Blob:
        return obj("Blob", bytes(v))
    if t is mitogen.core.Secret:
        return obj("Secret", str(v))
    if t is mitogen.core.Kwargs:
        return obj("Kwargs", dict(v))
    if t is mitogen.core.CallError:
        return obj("_unpickle_call_error", v.args[0])
    if isinstance(v, mitogen.core.Context):
        return obj("_unpickle_context", v.context_id, v.name)
    if t is SenderStub:
        return obj("_unpickle_sender", v.context_id, v.dst_handle)
    raise TypeError("no canonical form for %r" % (t,))


def oracle_line(offset, fields, data):
    enc, dst, src, auth, handle, reply_to, length = fields
    line = {"offset": offset, "header": {"enc": enc, "dst_id": dst, "src_id": src,
            "auth_id": auth, "handle": handle, "reply_to": reply_to, "length": length}}
    if reply_to == mitogen.core.IS_DEAD:
        line["dead"] = {"reason": data.decode("utf-8")}
    elif enc == 0x4d4b:
        line["binary"] = {"hex": data.hex()}
    elif enc == 0x4d49 and handle in (100, 102, 103, 104, 108):
        line["raw"] = {"hex": data.hex()}
    else:
        msg = mitogen.core.Message(data=data, enc=enc, handle=handle, reply_to=reply_to)
        values = list(msg.unpickle_iter(throw=False, throw_dead=False, find_class=find_class(msg)))
        line["values"] = [canon(v) for v in values]
    return line


def frames(stream, start):
    pos, out = start, []
    while pos < len(stream):
        fields = HEADER.unpack_from(stream, pos)
        length = fields[6]
        out.append((pos, fields, stream[pos + 26:pos + 26 + length]))
        pos += 26 + length
    assert pos == len(stream), "capture ends inside a frame"
    return out


def expand(node, ids):
    """Typed JSON with refs resolved and ids dropped (no cycles in these tests)."""
    if isinstance(node, list):
        return [expand(x, ids) for x in node]
    if not isinstance(node, dict):
        return node
    if node.get("type") == "ref":
        return expand(ids[node["id"]], ids)
    if "id" in node:
        ids[node["id"]] = node
    return {k: expand(v, ids) for k, v in node.items() if k != "id"}


def compare_direction(pw, path, start):
    stream = open(path, "rb").read()
    got = subprocess.run([pw, "decode", "--mitogen", "-"], input=stream[start:],
                         capture_output=True, timeout=TIMEOUT)
    lines = [json.loads(l) for l in got.stdout.decode().splitlines()]
    want = [oracle_line(off - start, f, d) for off, f, d in frames(stream, start)]
    assert got.returncode == 0, got.stderr.decode() + got.stdout.decode()[:2000]
    assert len(lines) == len(want), (len(lines), len(want))
    kinds = {}
    for a, b in zip(lines, want):
        a = expand(a, {})
        if a != b:
            raise AssertionError("frame at %d differs:\n picklewarden %s\n mitogen      %s"
                                 % (b["offset"], json.dumps(a)[:3000], json.dumps(b)[:3000]))
        k = [key for key in ("values", "dead", "raw", "binary") if key in b][0]
        kinds[k] = kinds.get(k, 0) + 1
    return {"frames": len(lines), "kinds": kinds}


def run_calls(pw, capture, extra=()):
    broker, router, ctx = start(pw, capture, extra)
    try:
        results = {}
        assert call(ctx, F.nothing) is None
        assert call(ctx, F.ints) == F.ints()
        assert call(ctx, F.text) == F.text()
        big = call(ctx, F.big_bytes, 3 * 1024 * 1024 + 5)
        assert big == F.big_bytes(3 * 1024 * 1024 + 5)
        assert call(ctx, F.blob) == F.blob() and type(call(ctx, F.blob)) is mitogen.core.Blob
        assert type(call(ctx, F.secret)) is mitogen.core.Secret
        assert dict(call(ctx, F.kwargs)) == {"a": 1, "b": [b"x", "y"]}
        assert call(ctx, F.nested) == F.nested()
        c = call(ctx, F.context)
        assert c.context_id == 4242 and c.name == "ctx-name"
        s = call(ctx, F.sender)
        assert s.context.context_id == 5 and s.dst_handle == 1234
        try:
            call(ctx, F.fail)
            raise AssertionError("no CallError")
        except mitogen.core.CallError as e:
            assert "boom from the child" in str(e)
        results["calls"] = "ok"
    finally:
        stop(broker)
    argv = json.load(open(os.path.join(capture, "argv.json")))
    preamble = int(argv[-1])  # the first stage reads this many bytes before framing starts
    up = open(os.path.join(capture, "up.bin"), "rb").read()
    ec2 = up.index(b"MITO002\n") + len(b"MITO002\n")
    results["up"] = compare_direction(pw, os.path.join(capture, "up.bin"), ec2)
    results["down"] = compare_direction(pw, os.path.join(capture, "down.bin"), preamble)
    results["audit_events"] = audit_events(capture)
    return results


def run_canonical(pw, capture):
    import pickletools
    results = run_calls(pw, capture, ("--canonical",))
    up = open(os.path.join(capture, "up.bin"), "rb").read()
    ec2 = up.index(b"MITO002\n") + len(b"MITO002\n")
    got = subprocess.run([pw, "filter", "--mitogen", "--framed", "--canonical"],
                         input=up[ec2:], capture_output=True, timeout=TIMEOUT)
    assert got.returncode == 0, got.stderr.decode()
    before, after = frames(up, ec2), frames(got.stdout, 0)
    assert len(before) == len(after), (len(before), len(after))
    rewritten = 0
    for (off, f, d), (_, f2, d2) in zip(before, after):
        assert f[:6] == f2[:6], (off, f, f2)
        a, b = oracle_line(0, f, d), oracle_line(0, f2, d2)
        a["header"].pop("length"), b["header"].pop("length")
        assert a == b, "frame at %d: %s\n%s" % (off, json.dumps(a)[:2000], json.dumps(b)[:2000])
        if "values" in a and d2:
            rewritten += 1
            pos = 0
            while pos < len(d2):
                ops = list(pickletools.genops(d2[pos:]))
                assert ops[0][0].name == "PROTO" and ops[0][1] == 2, ops[0]
                newer = {op.name for op, _, _ in ops if op.proto > 2}
                assert not newer, (off, newer)
                pos += ops[-1][2] + 1
    results["rewritten"] = rewritten
    results["context_order"] = context_order(pw)
    return results


def context_order(pw):
    """A child's payload that makes Context 5 named 'b' (kept in the memo, popped), then the
    list [Context 5 named 'a', that Context]. A parent's Router hands out the Context it made
    first for an id, so the order of the calls decides the names: the rewrite must make the
    calls in the child's order (found by a review helper)."""
    ctx = b"cmitogen.core\n_unpickle_context\n"

    def call(i, name):
        return (ctx + b"J" + struct.pack("<i", i) + b"X" + struct.pack("<I", len(name)) + name
                + b"\x86R")
    payload = (b"\x80\x02" + call(5, b"b") + b"q\x000" + b"]q\x01(" + call(5, b"a")
               + b"h\x00e.")
    frame = HEADER.pack(0x4d4a, 0, 1, 1, 1001, 0, len(payload)) + payload
    got = subprocess.run([pw, "filter", "--mitogen", "--framed", "--canonical"], input=frame,
                         capture_output=True, timeout=TIMEOUT)
    assert got.returncode == 0, got.stderr.decode()
    out = got.stdout[26:]
    assert out != payload
    broker = mitogen.core.Broker()
    seen = []
    try:
        router = mitogen.core.Router(broker)
        for data in (payload, out):
            router._context_by_id.clear()
            msg = mitogen.core.Message(data=data, enc=0x4d4a, handle=1001)
            msg.router = router
            v = msg.unpickle(throw=False)
            seen.append([[c.context_id, c.name] for c in v] + [v[0] is v[1]])
    finally:
        stop(broker)
    assert seen[0] == seen[1], seen
    return seen[1]


def audit_events(capture):
    path = os.path.join(capture, "audit.jsonl")
    if not os.path.exists(path):
        return []
    return [json.loads(l) for l in open(path) if l.strip()]


def run_evil(pw, capture):
    marker = os.path.join(capture, "os-system-ran")
    broker, router, ctx = start(pw, capture)
    outcome = None
    try:
        recv = mitogen.core.Receiver(router)
        try:
            call(ctx, F.send_evil, recv.to_sender(), marker)
            msg = recv.get(timeout=TIMEOUT)
            try:
                outcome = "parent received: %r" % (msg.unpickle(),)
            except Exception as e:  # Mitogen's own find_class refusal
                outcome = "parent received the frame and refused it: %s" % (e,)
        except mitogen.core.ChannelError as e:
            outcome = "disconnected: %s" % (e,)
        except mitogen.core.TimeoutError as e:
            outcome = "timeout: %s" % (e,)
    finally:
        stop(broker)
    return {"outcome": outcome, "marker_exists": os.path.exists(marker),
            "audit_events": audit_events(capture)}


def expect_channel_error(fn, *args):
    try:
        v = fn(*args)
    except mitogen.core.ChannelError as e:
        return str(e)
    raise AssertionError("no ChannelError, got %r" % (v,))


def run_handover(pw, capture):
    r = {}
    policy_file = os.path.join(capture, "allow-this.toml")
    broker, router, ctx = start(pw, capture)
    try:
        assert call(ctx, F.nothing) is None
        parent = mitogen.core.Sender(router.myself(), 1)  # its .context: the parent
        # 1. GET_RESOURCE naming a module with import-time side effects.
        assert "this" not in sys.modules
        assert call(ctx, F.send_get_resource, parent, "this", "x") == "sent"
        assert call(ctx, F.ints) == F.ints()  # the reply came after the frame: it was handled
        r["this_imported"] = "this" in sys.modules
        # 2. A Context flood one over max_new_contexts_per_frame (100), then 100 (accepted).
        before = len(router._context_by_id)
        r["flood_error"] = expect_channel_error(call, ctx, F.contexts, 101)
        r["contexts_kept_after_flood"] = len(router._context_by_id) - before
        got = call(ctx, F.contexts, 100, 200000)
        r["contexts_kept_after_100"] = len(router._context_by_id) - before
        assert [c.context_id for c in got] == list(range(200000, 200100))
        # 3. A set reply fails that call alone.
        r["set_error"] = expect_channel_error(call, ctx, F.a_set)
        assert call(ctx, F.text) == F.text()
        # 4. A child's own malformed service call asking for a reply: the dead notice comes
        #    back down to it through the parent.
        r["service_call"] = call(ctx, F.bad_service_call, parent)
        assert call(ctx, F.ints) == F.ints()
        # 5. A reply whose dict key is a 40-level tuple DAG (3**40 item hashes for the
        #    parent's CPython): that message fails, and the next call works.
        recv = mitogen.core.Receiver(router)
        dag = b"\x80\x02}K\x01" + b"22\x87" * 40 + b"Ns."
        assert call(ctx, F.send_raw, recv.to_sender(), dag) == "sent"
        r["dag_error"] = expect_channel_error(recv.get, TIMEOUT)
        assert call(ctx, F.ints) == F.ints()
        r["still_responsive"] = True
        # 6. Last, a memo bomb: None with one LONG_BINPUT at index 2**27 (CPython 3.11 sizes
        #    its memo by it: gigabytes). No stock child writes a memo index that far ahead,
        #    so guard cuts the stream: the call sees the child gone, and the parent never
        #    reads the bytes.
        recv = mitogen.core.Receiver(router)
        bomb = b"\x80\x02Nr\x00\x00\x00\x08."
        r["bomb_error"] = expect_channel_error(call, ctx, F.send_raw, recv.to_sender(), bomb)
        import resource
        r["parent_maxrss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    finally:
        stop(broker)
    r["audit_events"] = audit_events(capture)
    # Control: the same GET_RESOURCE frame through a guard whose policy lists `this`.
    text = open(os.path.join(os.path.dirname(HERE), "..", "policy", "mitogen.toml")).read()
    assert "packages = []" in text
    open(policy_file, "w").write(text.replace("packages = []", 'packages = ["this"]'))
    control = os.path.join(capture, "control")
    os.makedirs(control, exist_ok=True)
    broker, router, ctx = start(pw, control, ("--policy", policy_file))
    try:
        parent = mitogen.core.Sender(router.myself(), 1)
        saved = sys.stdout
        sys.stdout = io.StringIO()  # `this` prints the Zen of Python when imported
        try:
            assert call(ctx, F.send_get_resource, parent, "this", "x") == "sent"
            assert call(ctx, F.nothing) is None
        finally:
            sys.stdout = saved
        r["control_this_imported"] = "this" in sys.modules
    finally:
        stop(broker)
    return r


def main():
    logging.basicConfig(level=logging.ERROR)
    mode, pw, capture = sys.argv[1:4]
    os.makedirs(capture, exist_ok=True)
    run = {"calls": run_calls, "evil": run_evil, "canonical": run_canonical,
           "handover": run_handover}[mode]
    result = run(pw, capture)
    print(json.dumps(result))
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
