"""picklewarden's Python API: values and identity in hand-made cases, records and classes=,
policies, limits, buffers, encoding, check, scan, load, refusals."""

import io
import pickle
import threading
import time

import pytest

import picklewarden
from graph import same_graph


def roundtrip(value, protocols=range(0, 6)):
    for proto in protocols:
        data = pickle.dumps(value, proto)
        got = picklewarden.loads(data)
        same_graph(got, pickle.loads(data))
        yield proto, got


def test_scalars_and_containers():
    value = [None, True, False, 0, -1, 2**31, -2**63, 2**64 + 1, -(10**40), 0.5, -0.0,
             float("inf"), 1 + 2j, "", "abc", "é😀", "\udc80lone", b"", b"\x00\xff" * 10,
             bytearray(b"ba"), (), (1,), {}, {"k": [1]}, set(), {1, 2}, frozenset(), frozenset({3})]
    for proto, got in roundtrip(value):
        assert got[-2] == set() and type(got[-1]) is frozenset
        assert got[16] == "\udc80lone"


def test_shared_and_cycles_keep_identity():
    shared = [1, 2]
    d = {}
    d["self"] = d
    lst = []
    t = (lst,)
    lst.append(t)                       # a tuple in a cycle through a list
    value = {"a": shared, "b": shared, "d": d, "t": t, "s": "x" * 10}
    value["s2"] = value["s"]
    for proto, got in roundtrip(value):
        assert got["a"] is got["b"]
        assert got["d"]["self"] is got["d"]
        assert got["t"][0][0] is got["t"]
        assert got["s"] is got["s2"]    # a memoized str stays one object, as in pickle


def test_deep_nesting_has_no_recursion():
    # 900 lists, each inside the one before (pickle.dumps itself would recurse that deep).
    got = picklewarden.loads(b"\x80\x02" + b"]" * 900 + b"a" * 899 + b".")
    depth = 0
    while got:
        got = got[0]
        depth += 1
    assert depth == 899  # the innermost list is empty


def test_bytes_protocol2_latin1():
    blob = bytes(range(256)) * 1000
    got = picklewarden.loads(pickle.dumps([blob, blob], 2))
    assert got[0] == blob and got[0] is got[1]


def test_bytes_protocol2_every_length_and_alignment():
    # The protocol 2 form, _codecs.encode(text, 'latin1'), is transcoded straight into the
    # bytes object: every length up to 300 (across SSE2 blocks and words), at three offsets
    # into a run of every byte value, and one 128 KiB Mitogen chunk.
    raw = bytes(range(256)) * 600
    cases = [raw[off:off + n] for n in range(301) for off in (0, 1, 127)]
    cases.append(raw[:128 * 1024])
    for b in cases:
        data = pickle.dumps(b, 2)
        got = picklewarden.loads(data)
        assert type(got) is bytes and got == b == pickle.loads(data)


def test_lone_surrogates_kept_short_and_long():
    for s in ["\ud800", "a\udfffb", "x" * 5000 + "\udc80" + "\u00e9" * 5000, "\ud83d\ude00"]:
        for proto in (0, 1, 2, 4, 5):
            data = pickle.dumps(s, proto)
            got = picklewarden.loads(data)
            assert got == pickle.loads(data) == s


def test_short_decodes_in_a_row_keep_values_and_identity():
    # Short inputs build into the arena the thread's last short decode left: values and
    # shared references stay right whichever input came before.
    shared = [1, "x"]
    inputs = [pickle.dumps(v, p) for p in (2, 4) for v in (
        {"id": 1234, "name": "alice", "tags": ["a", "b"], "ok": True, "score": 0.5},
        (shared, shared, {"k": shared}),
        list(range(50)),
        "\u00e9t\u00e9" * 30,
    )]
    for _ in range(3):
        for data in inputs:
            same_graph(picklewarden.loads(data), pickle.loads(data))


def test_refused_error_fields():
    with pytest.raises(picklewarden.RefusedError) as e:
        picklewarden.loads(b"cos\nsystem\n(S'id'\ntR.")
    err = e.value
    assert isinstance(err, pickle.UnpicklingError)
    assert err.kind == "global_not_allowed"
    assert err.category == "policy_denied"
    assert err.offset == 0
    assert err.opcode == "GLOBAL" and err.opcode_byte == 0x63
    assert err.limit is None
    assert str(err) == ('global os.system is not allowed by policy "data" at offset 0 '
                        '(0x0, opcode 0x63 GLOBAL) (to accept it: '
                        'policy=picklewarden.Policy(...).allow(module, name) returns it as a '
                        'picklewarden.Record; classes={"os.system": cls} rebuilds it as your '
                        'class)')
    # Pickled and read back, the message keeps one hint.
    again = pickle.loads(pickle.dumps(err))
    assert str(again) == str(err) and again.kind == err.kind


def test_limit_error_names_the_limit():
    data = pickle.dumps([[[[1]]]], 4)
    with pytest.raises(picklewarden.RefusedError) as e:
        picklewarden.loads(data, limits={"max_nesting_depth": 3})
    assert e.value.kind == "limit_exceeded" and e.value.limit == "max_nesting_depth"
    assert e.value.category == "limit_exceeded"
    assert picklewarden.loads(data, limits={"max_nesting_depth": 5}) == [[[[1]]]]
    with pytest.raises(KeyError):
        picklewarden.loads(data, limits={"max_bogus": 1})
    with pytest.raises(picklewarden.RefusedError) as e:
        picklewarden.loads(data, limits={"max_input_bytes": "10"})
    assert e.value.limit == "max_input_bytes"


def test_truncated_is_eoferror_too():
    with pytest.raises(EOFError):
        picklewarden.loads(b"")
    with pytest.raises(picklewarden.RefusedError) as e:
        picklewarden.loads(pickle.dumps([1, 2, 3])[:-3])
    assert e.value.category == "truncated"


def test_trailing_data_refused():
    with pytest.raises(picklewarden.RefusedError) as e:
        picklewarden.loads(pickle.dumps(1) + b"x")
    assert e.value.kind == "trailing_data"
    with pytest.raises(picklewarden.RefusedError) as e:
        picklewarden.loads(pickle.dumps(1) + b"\n")
    assert str(e.value) == ("trailing data after STOP at offset 5 (0x5, byte 0x0a) (several pickles one "
                            "after another? picklewarden.loads_stream reads them all)")
    assert picklewarden.loads_stream(pickle.dumps(1) + pickle.dumps(2)) == [1, 2]


class Point:
    def __init__(self, x, y):
        self.x, self.y = x, y


class WithSetstate:
    def __init__(self, v):
        self.v = v

    def __getstate__(self):
        return {"v": self.v, "extra": 1}

    def __setstate__(self, state):
        self.seen = dict(state)


class Bag(list):
    pass


def test_records_inert_without_classes():
    data = pickle.dumps(Point(1, [2]), 2)
    pol = picklewarden.Policy("data").allow(__name__, "Point").allow("copyreg", "__newobj__")
    rec = picklewarden.loads(data, policy=pol)
    assert isinstance(rec, picklewarden.Record)
    assert (rec.module, rec.name, rec.kind) == (__name__, "Point", "newobj")
    assert rec.args == () and rec.state == {"x": 1, "y": [2]}
    assert rec.listitems == [] and rec.dictitems == []


def test_unlisted_class_is_refused_with_the_ways_to_allow_it():
    data = pickle.dumps(Point(1, 2), 2)
    with pytest.raises(picklewarden.RefusedError) as e:
        picklewarden.loads(data)
    assert e.value.kind == "global_not_allowed"
    msg = str(e.value)
    assert msg.startswith('global %s.Point is not allowed by policy "data"' % __name__), msg
    assert 'classes={"%s.Point": cls}' % __name__ in msg, msg
    assert "Policy(...).allow(module, name)" in msg, msg
    # Each way the hint names works: a Record, or the class itself.
    rec = picklewarden.loads(data, policy=picklewarden.Policy("data").allow(__name__, "Point"))
    assert isinstance(rec, picklewarden.Record) and rec.state == {"x": 1, "y": 2}
    p = picklewarden.loads(data, classes={__name__ + ".Point": Point})
    assert type(p) is Point and (p.x, p.y) == (1, 2)


def test_classes_rebuild_like_pickle():
    value = [Point(1, 2), WithSetstate(5), Bag([1, 2])]
    value.append(value[0])
    classes = {__name__ + ".Point": Point, __name__ + ".WithSetstate": WithSetstate,
               (__name__, "Bag"): Bag}
    for proto in (2, 3, 4, 5):
        data = pickle.dumps(value, proto)
        got = picklewarden.loads(data, classes=classes)
        same_graph(got, pickle.loads(data))
        assert got[3] is got[0]
        assert got[1].seen == {"v": 5, "extra": 1}
        assert type(got[2]) is Bag and got[2] == [1, 2]


def test_class_never_named_is_never_touched():
    touched = []

    class Spy:
        def __reduce__(self):
            return (touched.append, ("ran",))

    data = pickle.dumps(Spy(), 4)
    with pytest.raises(picklewarden.RefusedError):
        picklewarden.loads(data, classes={__name__ + ".Point": Point})
    assert touched == []


def test_policy_by_name_and_toml(tmp_path):
    assert picklewarden.Policy("strict").name == "strict"
    with pytest.raises(ValueError):
        picklewarden.Policy("nope")
    with pytest.raises(picklewarden.RefusedError) as e:
        picklewarden.loads(pickle.dumps({1, 2}, 2), policy="strict")
    assert e.value.kind == "global_not_allowed"
    text = ('name = "points"\n[[global]]\nmodule = "geo"\nname = "P"\n'
            'constructor = "record"\nforms = ["reduce"]\n')
    p1 = picklewarden.Policy.from_toml(text)
    path = tmp_path / "p.toml"
    path.write_text(text)
    p2 = picklewarden.Policy.from_toml(path)
    p3 = picklewarden.Policy.from_toml(str(path))
    for p in (p1, p2, p3):
        assert p.name == "points" and ("geo", "P", "record") in p.globals
    got = picklewarden.loads(b"\x80\x02cgeo\nP\nK\x01\x85R.", policy=p1)
    assert isinstance(got, picklewarden.Record) and got.args == (1,)
    with pytest.raises(ValueError):
        picklewarden.Policy.from_toml("name = 1\nbogus = 2\n")


def test_allow_form_and_class():
    pol = picklewarden.Policy("data").allow(Point, forms=["reduce"])
    assert (__name__, "Point", "record") in pol.globals
    with pytest.raises(ValueError):
        picklewarden.Policy("data").allow("m", "n", forms=["nope"])


def test_buffers_protocol5():
    big = pickle.PickleBuffer(b"abcdef")
    bufs = []
    data = pickle.dumps([big], 5, buffer_callback=bufs.append)
    got = picklewarden.loads(data, buffers=[b.raw() for b in bufs])
    assert bytes(got[0]) == b"abcdef"
    with pytest.raises(picklewarden.RefusedError) as e:
        picklewarden.loads(data)
    assert e.value.kind == "buffers_not_supplied"


def test_encoding_python2_strings():
    data = b"U\x03a\x00\xa0."
    assert picklewarden.loads(data, encoding="bytes") == b"a\x00\xa0"
    assert picklewarden.loads(data, encoding="latin1") == "a\x00\xa0"
    with pytest.raises(ValueError):
        picklewarden.loads(data, encoding="ASCII")


def test_check_builds_nothing_and_tells():
    v = picklewarden.check(pickle.dumps({"a": 1}))
    assert v and v.accepted and v.error is None and v.pickles == 1
    v = picklewarden.check(b"cos\nsystem\n(S'id'\ntR.")
    assert not v and v.error.kind == "global_not_allowed"


def test_scan_goes_on_past_refused_globals():
    data = pickle.dumps([Point(1, 2), {1}, WithSetstate(1)], 2)
    res = picklewarden.scan(data)
    names = [(g.module, g.name, g.allowed) for g in res.globals]
    assert (__name__, "Point", False) in names
    assert (__name__, "WithSetstate", False) in names
    assert ("__builtin__", "set", True) in names
    assert res.error is None and res.protocol == 2
    assert {g.name for g in res.refused} == {"Point", "WithSetstate"}
    offsets = [g.offset for g in res.globals]
    assert offsets == sorted(offsets)
    # The repr says what was refused first: `error=None` alone would read as clean.
    assert repr(res).startswith("ScanResult(refused=2, error=None, protocol=2, globals=["), repr(res)
    assert repr(picklewarden.scan(pickle.dumps(1, 2))) == (
        "ScanResult(refused=0, error=None, protocol=2, globals=[])")


def test_load_from_file_and_stream():
    f = io.BytesIO(pickle.dumps({"x": 1}))
    assert picklewarden.load(f) == {"x": 1}
    buf = io.BytesIO()
    p = pickle.Pickler(buf, 2)
    shared = [1]
    p.dump(shared)
    p.dump(shared)
    got = picklewarden.loads_stream(buf.getvalue())
    assert got == [[1], [1]] and got[0] is got[1]


def test_inputs_bytes_like():
    data = pickle.dumps([1, "a"])
    for d in (data, bytearray(data), memoryview(data)):
        assert picklewarden.loads(d) == [1, "a"]
    with pytest.raises(TypeError):
        picklewarden.loads("not bytes")


def test_gil_released_while_decoding():
    data = pickle.dumps([b"x" * 4096] * 20000 + list(range(2_000_000)), 4)
    ticks = []
    stop = threading.Event()

    def tick():
        while not stop.is_set():
            ticks.append(1)
            time.sleep(0.0005)

    verdicts = []
    t = threading.Thread(target=tick)
    t.start()
    try:
        before = len(ticks)
        for _ in range(3):
            verdicts.append(picklewarden.check(data))
        during = len(ticks) - before
    finally:
        stop.set()
        t.join()
    assert all(verdicts)
    # With the GIL held for the whole decode the ticker could not run at all meanwhile.
    assert during > 0
