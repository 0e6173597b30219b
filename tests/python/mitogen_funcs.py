"""Functions a Mitogen parent calls in a child (tests/python/mitogen_drive.py). Mitogen sends
this module's source to the child on demand (GET_MODULE / LOAD_MODULE frames)."""
import os

import mitogen.core


def nothing():
    return None


def ints():
    return [0, 1, -1, 255, 256, 65535, 2**31 - 1, -2**31, 2**63, -2**100]


def text():
    return "héllo wörld \u20ac \U0001f600"


def big_bytes(n):
    return bytes((i * 7 + 3) % 256 for i in range(n))


def blob():
    return mitogen.core.Blob(b"\x00\xff blob \x80")


def secret():
    return mitogen.core.Secret("hunter2")


def kwargs():
    return mitogen.core.Kwargs({"a": 1, "b": [b"x", "y"]})


def nested():
    shared = [1, 2]
    return {"list": [1, (2, 3), {"k": b"v"}], "tuple": (None, True, False, 1.5),
            "shared": (shared, shared), "empty": ([], (), {}, b"", ""), 7: "int key"}


def context():
    return mitogen.core.Context(None, 4242, "ctx-name")


def sender():
    return mitogen.core.Sender(mitogen.core.Context(None, 5), 1234)


def fail():
    raise ValueError("boom from the child")


EVIL = b"\x80\x02cos\nsystem\nX\x05\x00\x00\x00%s\x85R."


def send_evil(snd, marker):
    """Sends a frame whose pickle calls os.system to the parent through `snd`'s handle."""
    cmd = ("touch " + marker).encode()
    data = b"\x80\x02cos\nsystem\nX" + len(cmd).to_bytes(4, "little") + cmd + b"\x85R."
    snd.context.send(mitogen.core.Message(data=data, handle=snd.dst_handle,
                                          enc=mitogen.core.Message.ENC_PKL))
    return "sent"


# ------------------------------------------------ hand-over safety (mitogen_drive.py handover)

def send_get_resource(snd, package, resource):
    """Sends GET_RESOURCE to the parent as Mitogen's own ResourceRequester does. A master's
    ResourceResponder runs importlib.resources.read_binary(package, resource), which imports
    `package` there."""
    snd.context.send(mitogen.core.Message.pickled((package, resource),
                                                  handle=mitogen.core.GET_RESOURCE))
    return "sent"


def contexts(n, first=100000):
    """n distinct Contexts: the parent's Router keeps one per id for ever."""
    return [mitogen.core.Context(None, first + i) for i in range(n)]


def send_raw(snd, data):
    """Sends `data` as a pickled message to the parent's receiver behind `snd`."""
    snd.context.send(mitogen.core.Message(data=data, handle=snd.dst_handle,
                                          enc=mitogen.core.Message.ENC_PKL))
    return "sent"


def a_set():
    """Stock Mitogen's parent refuses a set (`cannot unpickle '__builtin__'/'set'`)."""
    return {1, 2}


def bad_service_call(snd):
    """Calls a service with a payload service.Pool._validate refuses, waiting for the reply
    on a Receiver of its own: gives the error the reply raised."""
    recv = mitogen.core.Receiver(snd.context.router)
    try:
        snd.context.send(mitogen.core.Message.pickled(("only one",), handle=mitogen.core.CALL_SERVICE,
                                                      reply_to=recv.handle))
        try:
            msg = recv.get(timeout=20)
            return "reply: %r" % (msg.unpickle(),)
        except mitogen.core.ChannelError as e:
            return "ChannelError: %s" % (e,)
        except mitogen.core.TimeoutError:
            return "timeout"
    finally:
        recv.close()
