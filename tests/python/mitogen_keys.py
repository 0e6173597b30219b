"""Dict keys made of Mitogen's classes, as Mitogen 0.3.54's parent reads them and as
picklewarden does under the `mitogen` policy (cli/tests/mitogen_real.rs). Each case is a
protocol-2 pickle of a dict whose keys are calls of Mitogen's globals (and plain values);
Mitogen's own `Message.unpickle`, with a Router that keeps one Context per id as the parent's
does, gives the number of pairs (or refuses), and so does `picklewarden decode --policy
mitogen`. Prints one JSON object: case -> [mitogen, picklewarden].

    python mitogen_keys.py PICKLEWARDEN_BINARY
"""
import json
import subprocess
import sys
import threading

import mitogen.core as mc

PW = sys.argv[1]
P2 = b'\x80\x02'


def G(module, name):
    """GLOBAL module.name."""
    return b'c' + module + b'\n' + name + b'\n'


def S(text):
    """BINUNICODE text."""
    return b'X' + len(text).to_bytes(4, 'little') + text


cases = {
 'secret-vs-str-keys': P2 + b'}(' + G(b'mitogen.core', b'Secret') + S(b'a') + b'\x85RK\x01' + S(b'a') + b'K\x02u.',
 'str-vs-secret-keys': P2 + b'}(' + S(b'a') + b'K\x01' + G(b'mitogen.core', b'Secret') + S(b'a') + b'\x85RK\x02u.',
 'blob-vs-bytes-keys': P2 + b'}(' + G(b'mitogen.core', b'Blob') + b'c__builtin__\nbytes\n)R\x85RK\x01c__builtin__\nbytes\n)RK\x02u.',
 'kwargs-as-key': P2 + b'}(' + G(b'mitogen.core', b'Kwargs') + b'}\x85RK\x01u.',
 'two-secrets': P2 + b'}(' + G(b'mitogen.core', b'Secret') + b'q\x00' + S(b'a') + b'\x85RK\x01h\x00' + S(b'a') + b'\x85RK\x02u.',
 'secrets-differ': P2 + b'}(' + G(b'mitogen.core', b'Secret') + b'q\x00' + S(b'a') + b'\x85RK\x01h\x00' + S(b'b') + b'\x85RK\x02u.',
 'two-contexts-one-id': P2 + b'}(' + G(b'mitogen.core', b'_unpickle_context') + b'q\x00K\x05' + S(b'x') + b'\x86RK\x01h\x00K\x05' + S(b'y') + b'\x86RK\x02u.',
 'two-contexts-two-ids': P2 + b'}(' + G(b'mitogen.core', b'_unpickle_context') + b'q\x00K\x05N\x86RK\x01h\x00K\x06N\x86RK\x02u.',
 'context-vs-int': P2 + b'}(' + G(b'mitogen.core', b'_unpickle_context') + b'K\x05N\x86RK\x01K\x05K\x02u.',
 'secret-in-tuple-key': P2 + b'}(' + G(b'mitogen.core', b'Secret') + S(b'a') + b'\x85R\x85K\x01' + S(b'a') + b'\x85K\x02u.',
 'two-senders': P2 + b'}(' + G(b'mitogen.core', b'_unpickle_sender') + b'q\x00K\x05K\x07\x86RK\x01h\x00K\x05K\x07\x86RK\x02u.',
 'call-errors': P2 + b'}(' + G(b'mitogen.core', b'CallError') + b'q\x00' + S(b'e') + b'\x85RK\x01h\x00' + S(b'e') + b'\x85RK\x02u.',
}
# A Router without a Broker: only what `context_by_id` needs (one Context per id).
router = mc.Router.__new__(mc.Router)
router._context_by_id = {}
router._write_lock = threading.Lock()
router.context_class = mc.Context
out = {}
for k, p in cases.items():
    m = mc.Message(data=p)
    m.router = router
    try:
        v = m.unpickle()
        mito = len(v)
    except mc.StreamError:
        mito = 'refused'
    q = subprocess.run([PW, 'decode', '--policy', 'mitogen', '-'], input=p, capture_output=True)
    pw = len(json.loads(q.stdout)['value']['items']) if q.returncode == 0 else 'refused'
    out[k] = [mito, pw]
print(json.dumps(out))
