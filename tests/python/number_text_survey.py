#!/usr/bin/env python3
"""How each CPython reads the decimal text of protocol 0's number opcodes.

INT, LONG, FLOAT, PUT and GET take their argument as a line of text (pickletools'
`decimalnl_short`, `decimalnl_long`, `floatnl`, and the memo index of `PUT`/`GET`); every
CPython has read some of those lines its own way (base 0 or base 10, a bool decided by the
line's length, strtol's leading whitespace, the 4300-digit limit of CVE-2020-10735). This
script feeds a grid of such lines to the C unpickler and to the pure-Python one of each
interpreter and records what each makes of it.

Usage:
  python3.X tests/python/number_text_survey.py probe
      Prints, for every case of the grid, one line
      `OP<TAB>HEX<TAB>C<TAB>PY`: the opcode (INT, LONG, FLOAT, PUT, GET), the text as hex
      (without the newline), and the reading of the C unpickler and of the Python one
      (CPython 3: `pickle.loads` and `pickle._loads`; Python 2.7: `cPickle` and `pickle`).
      Runs on Python 2.7 and 3.6 and later (no f-strings). Long texts are named by
      `#LEN:FIRST:LAST` (see key()).
  python3 tests/python/number_text_survey.py find X.Y
      Prints `PATH<TAB>VERSION` of pythonX.Y (as survey finds it), or nothing.
  python3 tests/python/number_text_survey.py cases
      Prints every case as `OP<TAB>KEY<TAB>HEX` (the whole text), in the probe's order.
  python3 tests/python/number_text_survey.py survey [--write] [PYTHON...]
      Runs `probe` under each interpreter (by default python2.7 and python3.6 to
      python3.13, looked up on PATH and then in pyenv's versions) and prints the table;
      with --write records it in tests/python/number_text_survey.tsv, which
      tests/number_text.rs checks picklewarden against and compares with every
      interpreter present.

A reading is one of:
  int V / bool V / long V   the value (V in decimal; `int #N:R` for a value of 40 digits
                            or more: N hex digits, R its residue modulo 2**61 - 1, as
                            str() of a long int raises in CPython 3.11+);
  float R                   repr() of the float;
  memo K                    PUT stored the value under memo key K; GET found the value put
                            under K (K as repr(): Python 2 keys its memo by the text);
  err NAME                  the exception's class name.
PUT is probed as `I7\\np<T>\\n.` and reads the memo afterwards (not with an index from
2**20 to 2**63 - 1: see huge_memo_index); GET as BINPUTs of
1000 + k under k for k in GET_KEYS, then `g<T>\\n.`.
"""

from __future__ import unicode_literals

import binascii
import io
import os
import re
import struct
import subprocess
import sys

GET_KEYS = (0, 1, 2, 7, 8, 10, 16)

BIG = str(2 ** 64)
DIGITS_4300 = "1" + "0" * 4299
DIGITS_4301 = "1" + "0" * 4300


def int_texts():
    """Texts for INT, LONG, PUT and GET."""
    return [
        # Plain decimal.
        "0", "1", "2", "7", "10", "-1", "-10", "123456789",
        # Leading zeros.
        "00", "01", "000", "001", "010", "007", "08", "09", "0010", "-01", "-00",
        "-010", "+00", "+01", "+010", "0" * 20 + "10",
        # Signs.
        "+1", "-0", "+0", "+10", "-", "+", "--1", "+-1",
        # Underscores.
        "1_0", "_1", "1_", "1__0", "0_0", "0_1", "0_10",
        # Whitespace (readline keeps everything before the newline).
        " 1", "1 ", "\t1", " 0", "0 ", "\t0", " 01", "01 ", "\x0b1", "\x0c1", "1\r", "01\r",
        " 10", "10 ", " -1",
        # NUL.
        "1\x00", "1\x002", "\x001", "0\x00", "01\x00", "10\x00",
        # Nothing.
        "",
        # Base prefixes.
        "0x10", "0X10", "0x1", "0x", "0o7", "0o17", "0O7", "0b1", "0b0", "0b11", "0x_1",
        "-0x10",
        # Other bases' digits and letters.
        "1a", "a", "1e3", "1.0", "True", "False", "1L", "01L",
        # Non-ASCII digits (UTF-8 of U+0661, U+FF11, U+00B9; U+00B9 as UTF-8 and as its Latin-1
        # byte, and a byte that is no UTF-8).
        "\u0661", "\uff11", "1\u0661", "\xb9", b"\xb9", b"1\xff",
        # Boundaries of C long and ssize_t, and long texts.
        "2147483647", "2147483648", "-2147483649", "4294967296",
        "9223372036854775807", "9223372036854775808", "-9223372036854775808",
        "-9223372036854775809", BIG, "-" + BIG, "0" + BIG,
        DIGITS_4300, DIGITS_4301, "-" + DIGITS_4301, "0" * 4300 + "1",
        "0" * 4300, "0" * 4301, "0" * 4299 + "1",
    ]


def long_texts():
    """Texts for LONG: every int text, and with the trailing `L` Python 2 writes."""
    texts = int_texts()
    more = [t + (b"L" if isinstance(t, bytes) else "L") for t in texts if len(t) < 100]
    more += [DIGITS_4300 + "L", DIGITS_4301 + "L", "0" * 4299 + "1L", "L", "LL", "1LL",
             "1l", "1 L", "1L ", "1L\x00", "0x10L", "01L", "010L", "00L"]
    return texts + more


def float_texts():
    """Texts for FLOAT."""
    return [
        "0", "1", "0.0", "-0.0", "1.5", "-1.5", "1.0", "010", "010.5", "00.5", "-01.5",
        "+1.5", "+0", "-0", ".5", "5.", ".", "", "-", "1e5", "1E5", "1e+05", "1e-5",
        "1e05", "1.5e", "e5", "1e", "1e+", "1.5e-07", "1e22", "1e308", "1.7976931348623157e308",
        "1.7976931348623159e308", "1e309", "-1e999", "1e999", "1e-999", "4.9e-324",
        "2.4703282292062327e-324", "2.4703282292062328e-324", "5e-324",
        "0.1", "0.30000000000000004", "123456789012345678901234567890",
        "1" * 400, "0." + "0" * 400 + "1", "1" + "0" * 5000, "1e" + "0" * 5000 + "1",
        "inf", "-inf", "+inf", "Inf", "INF", "iNf", "infinity", "Infinity", "-Infinity",
        "INFINITY", "+infinity", "infinit", "infinityy", "in", "nan", "NaN", "NAN", "-nan",
        "+nan", "nan(1)", "nan(0x1)", "nanq", "snan",
        "1_0", "1_0.5", "1.5_0", "1e1_0", "_1", "1_",
        " 1.5", "1.5 ", "\t1.5", "1.5\r", "1.5\x00", "1.5\x002", "\x001.5",
        "0x1p3", "0x10", "0o7", "0b1", "1.5L", "1L", "1d5", "1.5f", "1,5",
        "\u0661.5", "\uff11.5", "1.\u0665", "\u0661",
    ]


def huge_memo_index(text):
    """Whether `text` is a memo index from 2**20 to 2**63 - 1: CPython 3's C unpickler sizes
    its memo array by a PUT's index, and would try to allocate and clear gigabytes for it
    (MemoryError, or the memory, depending on the machine), so PUT is not probed with it."""
    t = text if isinstance(text, bytes) else text.encode("utf-8")
    if not re.match(b"^[+-]?[0-9]+$", t) or len(t) > 40:
        return False
    return 2 ** 20 <= int(t) < 2 ** 63


def cases():
    """(opcode, text as bytes) for every case of the grid, in order."""
    out = []
    for t in int_texts():
        out.append(("INT", t))
    for t in long_texts():
        out.append(("LONG", t))
    for t in float_texts():
        out.append(("FLOAT", t))
    for t in int_texts():
        if not huge_memo_index(t):
            out.append(("PUT", t))
    for t in int_texts():
        out.append(("GET", t))
    seen = set()
    unique = []
    for op, t in out:
        case = (op, t if isinstance(t, bytes) else t.encode("utf-8"))
        if case not in seen:
            seen.add(case)
            unique.append(case)
    return unique


def pickle_of(op, text):
    """The protocol 0 pickle that reads `text` as `op`'s argument."""
    if op == "INT":
        return b"I" + text + b"\n."
    if op == "LONG":
        return b"L" + text + b"\n."
    if op == "FLOAT":
        return b"F" + text + b"\n."
    if op == "PUT":
        return b"I7\np" + text + b"\n."
    prefix = b"".join(
        b"I" + str(1000 + k).encode("ascii") + b"\nq" + struct.pack("B", k) + b"0"
        for k in GET_KEYS
    )
    return prefix + b"g" + text + b"\n."


MERSENNE_61 = 2 ** 61 - 1


def render_int(v, kind):
    if abs(v) < 10 ** 40:
        return "%s %d" % (kind, v)
    # str() of a long int raises in CPython 3.11+ (int_max_str_digits): its size in hex
    # digits and its residue modulo 2**61 - 1 instead.
    return "%s #%d:%d" % (kind, len("%x" % abs(v)), v % MERSENNE_61)


def render(v, op):
    """A reading of the value `v` an unpickler returned for a case of `op`."""
    if op == "GET":
        if isinstance(v, int) and not isinstance(v, bool) and v - 1000 in GET_KEYS:
            return "memo %d" % (v - 1000)
        return "other %r" % (v,)
    if isinstance(v, bool):
        return "bool %s" % v
    if isinstance(v, float):
        return "float %r" % v
    if sys.version_info[0] < 3 and type(v).__name__ == "long":
        return render_int(v, "long")
    if isinstance(v, int):
        return render_int(v, "int")
    return "other %s" % type(v).__name__


def read_one(loader, op, data):
    """The reading of one case by one unpickler: `loader(data)` returns (value, memo)."""
    try:
        value, memo = loader(data)
    except Exception as e:  # noqa: BLE001 - any refusal is a reading
        return "err %s" % type(e).__name__
    if op == "PUT":
        keys = sorted(memo.keys(), key=repr)
        # Python 2 keys its memo by the text: a long key by its type and repr's length.
        return "memo " + ",".join(
            repr(k) if len(repr(k)) <= 40 else "%s#%d" % (type(k).__name__, len(repr(k)))
            for k in keys
        )
    return render(value, op)


def loaders():
    """The C and the Python unpickler of this interpreter, as functions of the data."""
    if sys.version_info[0] < 3:
        import cPickle
        import pickle
        from StringIO import StringIO

        def c(data):
            u = cPickle.Unpickler(StringIO(data))
            return u.load(), dict(u.memo)

        def py(data):
            u = pickle.Unpickler(StringIO(data))
            return u.load(), dict(u.memo)

        return c, py
    import pickle

    def c(data):
        u = pickle.Unpickler(io.BytesIO(data))
        return u.load(), dict(u.memo.copy())

    def py(data):
        u = pickle._Unpickler(io.BytesIO(data))
        return u.load(), dict(u.memo)

    return c, py


def key(text):
    """How the recorded table names a text: its hex, or for a text of more than 32 bytes
    `#LEN:FIRST:LAST` (its length and the hex of its first and last four bytes)."""
    hx = binascii.hexlify(text).decode("ascii")
    if len(text) <= 32:
        return hx
    return "#%d:%s:%s" % (len(text), hx[:8], hx[-8:])


def print_cases():
    sys.stdout.write("".join(
        "%s\t%s\t%s\n" % (op, key(t), binascii.hexlify(t).decode("ascii")) for op, t in cases()
    ))


def probe():
    c, py = loaders()
    out = []
    for op, text in cases():
        data = pickle_of(op, text)
        out.append("%s\t%s\t%s\t%s" % (op, key(text), read_one(c, op, data), read_one(py, op, data)))
    sys.stdout.write("\n".join(out) + "\n")


VERSIONS = ("2.7", "3.6", "3.7", "3.8", "3.9", "3.10", "3.11", "3.12", "3.13")


def find_python(version):
    """The path of `pythonX.Y`: on PATH, else in pyenv's versions; None when absent."""
    name = "python" + version
    for d in os.environ.get("PATH", "").split(os.pathsep):
        p = os.path.join(d, name)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            # pyenv's shims exist for every version but only run the selected ones.
            try:
                subprocess.check_output([p, "-c", "pass"], stderr=subprocess.STDOUT)
                return p
            except (OSError, subprocess.CalledProcessError):
                pass
    root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    vdir = os.path.join(root, "versions")
    if os.path.isdir(vdir):
        for v in sorted(os.listdir(vdir)):
            if v == version or v.startswith(version + "."):
                p = os.path.join(vdir, v, "bin", name)
                if os.path.isfile(p):
                    return p
    return None


def run_probe(python):
    out = subprocess.check_output([python, os.path.abspath(__file__), "probe"])
    rows = []
    for line in out.decode("utf-8").splitlines():
        op, hx, c, py = line.split("\t")
        rows.append(((op, hx), c, py))
    return rows


def full_version(python):
    return subprocess.check_output(
        [python, "-c", "import platform; print(platform.python_version())"]
    ).decode("ascii").strip()


def survey(args):
    write = "--write" in args
    pythons = [a for a in args if a != "--write"]
    found = []
    if pythons:
        found = [(full_version(p), p) for p in pythons]
    else:
        for v in VERSIONS:
            p = find_python(v)
            if p is None:
                sys.stderr.write("SKIPPED: python%s not found\n" % v)
            else:
                found.append((full_version(p), p))
    table = {}
    order = []
    for version, p in found:
        for k, c, py in run_probe(p):
            if k not in table:
                table[k] = []
                order.append(k)
            table[k].append((version, c, py))
    if len(order) != len(cases()):
        raise SystemExit("two cases share a key")
    versions = [v for v, _ in found]
    lines = [
        "# How CPython reads protocol 0's number texts: written by "
        "tests/python/number_text_survey.py survey --write, checked by tests/number_text.rs.",
        "# Each cell is the C unpickler's reading | the Python unpickler's.",
        "\t".join(["op", "text"] + versions),
    ]
    for k in order:
        cells = dict((v, "%s|%s" % (c, py)) for v, c, py in table[k])
        lines.append("\t".join([k[0], k[1]] + [cells.get(v, "-") for v in versions]))
    text = "\n".join(lines) + "\n"
    if write:
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "number_text_survey.tsv")
        with open(path, "w") as f:
            f.write(text)
    # A summary: the cases whose readings differ among CPython 3 (C and Python unpicklers).
    for k in order:
        readings = set()
        for version, c, py in table[k]:
            if not version.startswith("2."):
                readings.add(norm(c))
                readings.add(norm(py))
        if len(readings) > 1:
            sys.stdout.write("%-5s %-24s %s\n" % (k[0], k[1], " | ".join(
                "%s:%s/%s" % (v, c, py) for v, c, py in table[k])))


def norm(reading):
    """A reading with every refusal alike (the exception's class varies between versions)."""
    return "err" if reading.startswith("err ") else reading


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "probe":
        probe()
    elif len(sys.argv) >= 2 and sys.argv[1] == "cases":
        print_cases()
    elif len(sys.argv) == 3 and sys.argv[1] == "find":
        p = find_python(sys.argv[2])
        if p is not None:
            sys.stdout.write("%s\t%s\n" % (p, full_version(p)))
    elif len(sys.argv) >= 2 and sys.argv[1] == "survey":
        survey(sys.argv[2:])
    else:
        sys.stderr.write(__doc__)
        sys.exit(2)


if __name__ == "__main__":
    main()
