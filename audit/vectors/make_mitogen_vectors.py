#!/usr/bin/env python3
"""Writes the vectors of audit/ATTACKS.md A58-A61 (Mitogen hand-over safety): each a child's
stdout (bootstrap handshake, then frames from child 1 to its parent 0), checked in mode
`mitogen` by tests/audit_vectors.rs as `filter --mitogen` and `guard` check it (the message
policy, then the payload). Their rows are in MANIFEST.tsv (added by hand: make_vectors.py
writes the rows up to A40)."""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
HANDSHAKE = b"MITO000\nMITO001\nMITO002\n"


def frame(handle, payload, enc=0x4d4a, reply_to=0):
    return struct.pack(">hLLLLLL", enc, 0, 1, 1, handle, reply_to, len(payload)) + payload


def contexts(first, n):
    """[Context(None, i) for i in range(first, first + n)] as Mitogen's Pickler writes it at
    protocol 2 (the global memoized once)."""
    p = b"\x80\x02]q\x00(cmitogen.core\n_unpickle_context\nq\x01"
    for i in range(first, first + n):
        p += b"h\x01J" + struct.pack("<i", i) + b"N\x86R"
    return p + b"e."


def put(name, *frames):
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(HANDSHAKE + b"".join(frames))


# A58: GET_RESOURCE naming a module with import-time side effects (ResourceRequester's shape).
put("a58-get-resource-this.bin",
    frame(112, b"\x80\x02X\x04\x00\x00\x00thisX\x01\x00\x00\x00x\x86."))
# A58: CALL_FUNCTION upstream (Dispatcher's receiver has has_parent_authority; a master has none).
put("a58-call-function-upstream.bin",
    frame(101, b"\x80\x02N.", reply_to=1005))
# A59: a reply naming 101 new Context ids, one over max_new_contexts_per_frame.
put("a59-101-new-contexts-in-one-frame.bin", frame(1000, contexts(100000, 101)))
# A59: 101 replies of 100 new ids each: 10,100 over the stream, over max_new_contexts_per_stream.
put("a59-10100-new-contexts-over-a-stream.bin",
    *[frame(1000 + k, contexts(100000 + 100 * k, 100)) for k in range(101)])
# A59: ADD_ROUTE makes the parent keep a Context too: 10,000 ids by replies, then one route.
put("a59-add-route-past-the-stream-bound.bin",
    *[frame(1000 + k, contexts(100000 + 100 * k, 100)) for k in range(100)],
    frame(103, b"5:ssh.host", enc=0x4d49))
# A60: a None reply that also does one LONG_BINPUT at 2**27 (CPython 3.11 sizes its memo by
# it). Accepted: the default guard hands on the rewrite `\x80\x02N.`.
put("a60-none-reply-with-long-binput-2-27.bin", frame(1000, b"\x80\x02Nr\x00\x00\x00\x08."))
# A61: a dead message to CALL_SERVICE (ends a service.Pool worker thread).
put("a61-dead-message-to-call-service.bin", frame(110, b"bye", enc=0x4d49, reply_to=999))
# A61: a set reply (one bad value: fails its call, the child stays).
put("a61-set-reply.bin", frame(1000, b"\x80\x02c__builtin__\nset\n]K\x01a\x85R."))
