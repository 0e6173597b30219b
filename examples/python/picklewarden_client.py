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


def _post(sock_path, endpoint, data, **params):
    conn = UnixHTTPConnection(sock_path)
    try:
        query = urllib.parse.urlencode({k: v for k, v in params.items() if v is not None})
        conn.request("POST", f"/v1/{endpoint}?{query}", body=data,
                     headers={"Content-Type": "application/octet-stream"})
        resp = conn.getresponse()
        raw = resp.read()
    finally:
        conn.close()
    if resp.status != 200:
        # 4xx: a malformed request or a body over the bound; 503: busy or past the deadline
        # (Retry-After says when to try again). Errors of the HTTP parser have no body.
        raise RuntimeError(f"picklewarden answered {resp.status}: {raw[:200]!r}")
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


def from_typed_json(node):
    """Plain values of a typed JSON node (docs/typed-json.md) as Python values: none, bool,
    int, float, str, bytes, list, tuple, dict. Anything else (sets, records, shared or
    recursive nodes) raises ValueError: extend it for the kinds you accept."""
    t = node["type"]
    if t == "none":
        return None
    if t == "bool":
        return node["value"]
    if t == "int":
        return _int(node["value"])
    if t == "float":
        return float(node["repr"])
    if t == "str":
        if "value" not in node:
            # A str holding lone surrogates: its UTF-8 (surrogatepass) bytes in hex.
            return bytes.fromhex(node["surrogatepass_hex"]).decode("utf-8", "surrogatepass")
        return node["value"]
    if t == "bytes":
        return bytes.fromhex(node["hex"])
    if t == "list":
        return [from_typed_json(i) for i in node["items"]]
    if t == "tuple":
        return tuple(from_typed_json(i) for i in node["items"])
    if t == "dict":
        return {from_typed_json(k): from_typed_json(v) for k, v in node["items"]}
    raise ValueError(f"typed JSON node {t!r} not handled by this example")


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
    for protocol in (None, 2):
        clean = canonical(sock_path, pickle.dumps(value, protocol=2), protocol=protocol)
        print(json.dumps({"canonical_equal": pickle.loads(clean) == value, "protocol": clean[1]}))


if __name__ == "__main__":
    main()
