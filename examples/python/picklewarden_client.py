#!/usr/bin/env python3
"""A client of the picklewarden sidecar service, standard library only.

    python3 examples/python/picklewarden_client.py /run/picklewarden.sock

`check()` and `decode()` POST pickle bytes to the service over its Unix socket and return the
verdict as a dict; `from_typed_json()` turns a decoded document's plain values back into Python
values. Run as a script, it checks a harmless pickle, a malicious one (pickled here, never
loaded), decodes a value and gets a value's canonical pickle, printing one JSON line for each.
"""

import base64
import http.client
import json
import os
import pickle
import socket
import struct
import sys
import urllib.parse


class UnixHTTPConnection(http.client.HTTPConnection):
    """http.client over a Unix stream socket instead of TCP."""

    def __init__(self, path, timeout=60):
        super().__init__("picklewarden", timeout=timeout)
        self.unix_path = path

    def connect(self):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self.unix_path)
        self.sock = sock


class PicklewardenError(RuntimeError):
    """The service answered with an HTTP error: `status`, and `answer`, its JSON body (a dict
    with "error" and "message"; empty for an error of the HTTP parser, which has no body)."""

    def __init__(self, status, answer):
        super().__init__(f"picklewarden answered {status}: {answer.get('message', answer)}")
        self.status = status
        self.answer = answer


def _post(sock_path, endpoint, data, **params):
    conn = UnixHTTPConnection(sock_path)
    try:
        query = urllib.parse.urlencode({k: v for k, v in params.items() if v is not None})
        try:
            conn.request("POST", f"/v1/{endpoint}?{query}", body=data,
                         headers={"Content-Type": "application/octet-stream"})
        except (BrokenPipeError, ConnectionResetError):
            # The service may answer before it has read the body (an unknown policy, a body
            # over the bound) and close its side: its answer is waiting to be read.
            pass
        resp = conn.getresponse()
        raw = resp.read()
    finally:
        conn.close()
    if resp.status != 200:
        # 4xx: a malformed request or a body over the bound; 503: busy or past the deadline
        # (Retry-After says when to try again).
        try:
            answer = json.loads(raw) if raw else {}
        except ValueError:
            answer = {"message": raw[:200].decode("latin-1")}
        raise PicklewardenError(resp.status, answer)
    return json.loads(raw)


def check(sock_path, data, policy=None):
    """The verdict on `data` (bytes): {"verdict": "accepted"|"refused", "kind", "offset", ...}."""
    return _post(sock_path, "check", data, policy=policy)


def decode(sock_path, data, policy=None):
    """As check(); when accepted, "document" holds the typed JSON of the value."""
    return _post(sock_path, "decode", data, policy=policy, format="json")


def canonical(sock_path, data, policy=None, protocol=None):
    """The canonical pickle of `data` (bytes) when the policy accepts it, else None: protocol 5
    (or `protocol=2`, as Python 3 writes it for Python 2 and Mitogen), only what the policy
    allowed, none of the input's own opcodes. pickle.loads() of it gives the value
    pickle.loads(data) would, without the peer's bytes ever reaching the unpickler (a record's
    class must still be importable, and is called as pickle calls it). None also when the
    value has no canonical pickle (the answer's "output_error" is "no_canonical_pickle")."""
    verdict = _post(sock_path, "decode", data, policy=policy, format="pickle",
                    protocol=protocol)
    if verdict["verdict"] != "accepted" or "pickle" not in verdict:
        return None
    return base64.b64decode(verdict["pickle"])


def _int(text):
    """int(text) for decimal text of any length. Python 3.11's int() refuses more than 4,300
    digits by default (sys.get_int_max_str_digits, CVE-2020-10735), and an int pickled in
    binary (LONG1, LONG4) has up to max_long_bytes bytes (4096 by default, about 9,860
    digits): the digits are read 4,000 at a time (quadratic, as int() is, in their number)."""
    digits = text[1:] if text.startswith("-") else text
    value = 0
    for i in range(0, len(digits), 4000):
        piece = digits[i:i + 4000]
        value = value * 10 ** len(piece) + int(piece)
    return -value if text.startswith("-") else value


def from_typed_json(node, _seen=None):
    """The Python value of a typed JSON node (docs/typed-json.md): none, bool, int, float,
    complex, str, bytes, bytearray, list, tuple, dict, set, frozenset, and shared or recursive
    values (`"id"` and `"ref"`) as the same object. Globals and records raise ValueError: map
    the ones you accept to your own classes. Recursive (a value nested N deep takes N Python
    frames; the service's default `max_nesting_depth` is 1000, Python's recursion limit)."""
    seen = {} if _seen is None else _seen
    t = node["type"]
    if t == "ref":
        if node["id"] not in seen:
            raise ValueError(f"reference to {node['id']} before its value is complete")
        return seen[node["id"]]
    if t == "none":
        return None
    if t == "bool":
        return node["value"]
    if t == "int":
        return _int(node["value"])
    if t == "float":
        return struct.unpack(">d", bytes.fromhex(node["bits"]))[0]
    if t == "complex":
        return complex(from_typed_json(node["real"], seen), from_typed_json(node["imag"], seen))
    if t == "str":
        if "value" not in node:
            # A str holding lone surrogates: its UTF-8 (surrogatepass) bytes in hex.
            return bytes.fromhex(node["surrogatepass_hex"]).decode("utf-8", "surrogatepass")
        return node["value"]
    if t == "bytes":
        return bytes.fromhex(node["hex"])
    # Mutable containers are recorded before their items are read, so that an item can refer
    # back to them (a list holding itself).
    if t == "bytearray":
        value = bytearray.fromhex(node["hex"])
    elif t == "list":
        value = []
        if "id" in node:
            seen[node["id"]] = value
        value.extend(from_typed_json(i, seen) for i in node["items"])
    elif t == "dict":
        value = {}
        if "id" in node:
            seen[node["id"]] = value
        for k, v in node["items"]:
            key = from_typed_json(k, seen)
            value[key] = from_typed_json(v, seen)
    elif t == "set":
        value = set()
        if "id" in node:
            seen[node["id"]] = value
        value.update(from_typed_json(i, seen) for i in node["items"])
    elif t == "tuple":
        value = tuple(from_typed_json(i, seen) for i in node["items"])
    elif t == "frozenset":
        value = frozenset(from_typed_json(i, seen) for i in node["items"])
    else:
        raise ValueError(f"typed JSON node {t!r} not handled by this example")
    if "id" in node:
        seen[node["id"]] = value
    return value


class Exploit:
    """Pickles to a call of os.system: what a hostile peer would send."""

    def __reduce__(self):
        return (os.system, ("echo pwned",))


def main():
    sock_path = sys.argv[1] if len(sys.argv) > 1 else "/run/picklewarden.sock"
    value = {"a": [1, 2.5, None]}
    print(json.dumps(check(sock_path, pickle.dumps(value))))
    print(json.dumps(check(sock_path, pickle.dumps(Exploit()))))
    verdict = decode(sock_path, pickle.dumps(value))
    print(json.dumps({"value": from_typed_json(verdict["document"]["value"])}))
    shared = [1]
    richer = {"s": {1, 2}, "f": frozenset({"x"}), "b": bytearray(b"ab"), "c": 1 + 2j,
              "shared": [shared, shared]}
    back = from_typed_json(decode(sock_path, pickle.dumps(richer))["document"]["value"])
    print(json.dumps({"richer_equal": back == richer,
                      "shared_kept": back["shared"][0] is back["shared"][1]}))
    try:
        check(sock_path, pickle.dumps(value), policy="nope")
    except PicklewardenError as e:
        print(json.dumps({"status": e.status, "error": e.answer["error"]}))
    for protocol in (None, 2):
        clean = canonical(sock_path, pickle.dumps(value, protocol=2), protocol=protocol)
        print(json.dumps({"canonical_equal": pickle.loads(clean) == value, "protocol": clean[1]}))


if __name__ == "__main__":
    main()
