"""Functions a Mitogen parent in test_mitogen.py calls in its child (Mitogen sends this
module's source to the child on demand)."""

import mitogen.core


def pattern(n):
    """n bytes, every byte value, fast to make."""
    block = bytes(range(256))
    return block * (n // 256) + block[: n % 256]


def blob_chunks(n, chunk=128 * 1024):
    """n bytes as a list of mitogen.core.Blob chunks of `chunk` bytes: Mitogen pickles a
    reply that is not itself bytes at protocol 2, where Python 3 writes each chunk's bytes as
    _codecs.encode(<latin-1 text>, 'latin1') (the transcoded transfer)."""
    import mitogen.core
    data = pattern(n)
    return [mitogen.core.Blob(data[i:i + chunk]) for i in range(0, n, chunk)]


def values():
    shared = [1, 2]
    return {
        "none": None, "ints": [0, -1, 255, 2**31, -2**63, 2**100], "float": 1.5,
        "str": "héllo \u20ac \U0001f600", "bytes": b"\x00\x80\xff", "empty": ([], (), {}, b"", ""),
        "shared": (shared, shared), 7: "int key",
        "blob": mitogen.core.Blob(b"\x00\xff blob"), "secret": mitogen.core.Secret("hunter2"),
        "kwargs": mitogen.core.Kwargs({"a": 1, "b": [b"x", "y"]}),
    }


def context():
    return mitogen.core.Context(None, 4242, "ctx-name")


def sender():
    return mitogen.core.Sender(mitogen.core.Context(None, 5), 1234)


def fail():
    raise ValueError("boom from the child")


def send_raw(snd, data):
    """Sends `data` as a pickled message to the parent's receiver behind `snd`."""
    snd.context.send(mitogen.core.Message(data=data, handle=snd.dst_handle,
                                          enc=mitogen.core.Message.ENC_PKL))
    return "sent"


@mitogen.core.takes_router
def serve_file(path, router):
    """Registers `path` with a FileService in this (child) context, for the parent to fetch
    with FileService.get: the file's bytes then flow child -> parent."""
    import mitogen.service
    pool = mitogen.service.get_or_create_pool(router=router)
    pool.get_service("mitogen.service.FileService").register(path)
    return "ok"


def write_file(path, n):
    with open(path, "wb") as f:
        f.write(pattern(n))
    return n
