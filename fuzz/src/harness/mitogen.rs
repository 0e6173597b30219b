//! The `mitogen_frames` target: the Mitogen frame reader and the message policy give the same
//! frames and verdicts whatever the pieces the stream arrives in.

use std::sync::OnceLock;

use picklewarden::{json, repr, Category, Error, ErrorKind, Limits, Policy};

use super::invariants::{check_json, has_set_and_record, KNOWN_OPEN_JSON_SET_CYCLE};
use super::{may_be_tuple_dag, tight_limits, KNOWN_OPEN_TUPLE_DAG_HASH};

/// The `mitogen_frames` target: the Mitogen frame reader fed a byte stream in pieces of
/// pseudo-random sizes must cut exactly the frames it cuts from the whole stream at once, each
/// frame's bytes must be the stream's bytes at its offset, the reader must never buffer more
/// than one frame plus the last piece, and every payload decodes (under the `mitogen` policy,
/// default and tight limits) to a result whose error offsets fall inside that payload. The
/// message policy (`StreamCheck`, one for the stream, as `filter` runs it) gives the same
/// verdicts whatever the pieces, refuses with an offset inside the frame, and each refusal's
/// dead notices read back as dead frames carrying the reason.
///
/// The first input byte steers: bit 0 set wraps the rest in one pickle frame with a correct
/// header (so pickle corpora are frame seeds; bit 1 makes it a dead message), and the byte
/// seeds the piece sizes.
pub fn check_mitogen_frames(data: &[u8]) {
    use picklewarden::mitogen::{Enc, Header, IS_DEAD};
    let Some((&ctl, rest)) = data.split_first() else {
        return;
    };
    if KNOWN_OPEN_TUPLE_DAG_HASH && may_be_tuple_dag(rest) {
        return;
    }
    let stream: Vec<u8> = if ctl & 1 == 1 {
        let header = Header {
            enc: if ctl & 4 == 0 {
                Enc::Pickle
            } else {
                Enc::Legacy
            },
            dst_id: 0,
            src_id: 1,
            auth_id: 1,
            handle: 1000 + u32::from(ctl >> 3),
            reply_to: if ctl & 2 == 2 { IS_DEAD } else { 0 },
            length: u32::try_from(rest.len()).unwrap_or(u32::MAX),
        };
        let mut s = header.to_bytes().to_vec();
        s.extend_from_slice(rest);
        s
    } else {
        rest.to_vec()
    };
    let whole = read_frames(&stream, &[stream.len().max(1)]);
    let mut x = u64::from(ctl) | 0x9E37_79B9_0000_0000;
    let sizes: Vec<usize> = (0..64)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            1 + (x % 97) as usize
        })
        .collect();
    let pieces = read_frames(&stream, &sizes);
    assert_eq!(
        whole, pieces,
        "frames differ when the stream arrives in pieces"
    );
}

/// Maximum payload the frame harness allows (small, so the size check is reached).
const FRAME_MAX: u64 = 4096;

fn mitogen_policy() -> &'static Policy {
    static P: OnceLock<Policy> = OnceLock::new();
    P.get_or_init(|| Policy::builtin("mitogen").unwrap_or_else(|| Policy::empty("mitogen")))
}

/// Reads `stream` in pieces of `sizes` (cycled); returns a summary of every frame and error.
fn read_frames(stream: &[u8], sizes: &[usize]) -> Vec<String> {
    use picklewarden::mitogen::{Content, FrameReader, HEADER_LEN};
    let mut reader = FrameReader::with_max_message_bytes(FRAME_MAX);
    let mut out = Vec::new();
    let mut check = picklewarden::mitogen::StreamCheck::new();
    let mut at = 0usize; // bytes pushed
    let mut next = 0usize; // stream offset of the next frame
    let mut i = 0usize;
    while at < stream.len() {
        let n = sizes.get(i % sizes.len()).copied().unwrap_or(1).max(1);
        i += 1;
        let end = (at + n).min(stream.len());
        reader.push(stream.get(at..end).unwrap_or_default());
        at = end;
        loop {
            match reader.next_frame() {
                Ok(None) => break,
                Ok(Some(frame)) => {
                    let bytes = frame.as_bytes();
                    assert_eq!(
                        frame.payload_offset(),
                        (next + HEADER_LEN) as u64,
                        "frame offset"
                    );
                    assert_eq!(
                        Some(bytes),
                        stream.get(next..next + bytes.len()),
                        "frame bytes are not the stream's bytes at its offset"
                    );
                    assert!(frame.payload().len() as u64 <= FRAME_MAX);
                    next += bytes.len();
                    let start = frame.payload_offset();
                    let stop = start + frame.payload().len() as u64;
                    let policy = mitogen_policy();
                    let mut summary = format!("frame@{}:{}", next, bytes.len());
                    summary.push_str(&check_message_policy(&mut check, &frame, policy));
                    for limits in [policy.limits, tight_limits(&policy.limits)] {
                        let decoded = frame.decode(policy, limits);
                        if limits == policy.limits {
                            if let Ok(content) = &decoded {
                                check_frame_canonical(&frame, content, policy);
                            }
                        }
                        match decoded {
                            Ok(Content::Values(doc)) => {
                                if !(KNOWN_OPEN_JSON_SET_CYCLE && has_set_and_record(&doc)) {
                                    let text = json::to_typed_json(&doc);
                                    check_json(&text, &limits);
                                }
                                let _ = repr::to_repr(&doc);
                                summary.push_str(&format!(" values:{}", doc.roots().len()));
                            }
                            Ok(other) => summary.push_str(&format!(" {other:?}")),
                            Err(e) => {
                                assert!(
                                    (start..=stop).contains(&e.offset()),
                                    "payload error offset {} outside the payload {start}..{stop}: {e}",
                                    e.offset()
                                );
                                if let Some(pe) = e.payload_error() {
                                    check_error_kind_only(pe, &limits);
                                }
                                summary.push_str(&format!(" err:{}@{}", e.kind_name(), e.offset()));
                            }
                        }
                    }
                    out.push(summary);
                }
                Err(e) => {
                    assert!(e.offset() <= stream.len() as u64, "frame error offset: {e}");
                    out.push(format!("error {}@{}", e.kind_name(), e.offset()));
                    return out;
                }
            }
            assert!(
                reader.buffered() as u64 <= HEADER_LEN as u64 + FRAME_MAX + n as u64,
                "reader buffers {} bytes (one frame plus a piece of {n} at most)",
                reader.buffered()
            );
        }
    }
    match reader.finish() {
        Ok(()) => out.push("end".into()),
        Err(e) => out.push(format!("end {}@{}", e.kind_name(), e.offset())),
    }
    out
}

/// One frame through the stream's message policy check: a refusal's offset is inside the
/// frame, and its dead notices are whole dead frames (enc legacy, `reply_to` 999, the child's
/// `src_id` and `auth_id`) whose reason, which starts `refused by picklewarden: `, decodes as a
/// dead message's under the policy. Gives the verdict for the summary.
fn check_message_policy(
    check: &mut picklewarden::mitogen::StreamCheck,
    frame: &picklewarden::mitogen::Frame,
    policy: &Policy,
) -> String {
    use picklewarden::mitogen::{refusal_notices, Content, FrameReader, IS_DEAD};
    let e = match check.check_frame(frame, policy, policy.limits) {
        Ok(_) => return " msg:ok".into(),
        Err(e) => e,
    };
    let end = frame.offset + frame.as_bytes().len() as u64;
    assert!(
        (frame.offset..=end).contains(&e.offset()),
        "message policy refusal offset {} outside the frame {}..{end}: {e}",
        e.offset(),
        frame.offset
    );
    let _ = e.disposition();
    let notices = refusal_notices(&frame.header, &e.to_string());
    let mut reader = FrameReader::new();
    reader.push(&notices);
    let mut n = 0;
    while let Ok(Some(dead)) = reader.next_frame() {
        n += 1;
        assert_eq!(dead.header.reply_to, IS_DEAD, "a notice is a dead message");
        assert_eq!(
            (dead.header.src_id, dead.header.auth_id),
            (frame.header.src_id, frame.header.auth_id)
        );
        match picklewarden::mitogen::decode_payload(
            &dead.header,
            dead.payload(),
            policy,
            policy.limits,
        ) {
            Ok(Content::Dead(reason)) => {
                assert!(reason.starts_with("refused by picklewarden: "), "{reason}")
            }
            other => panic!("a notice does not read as a dead message: {other:?}"),
        }
    }
    assert!(
        reader.finish().is_ok() && n <= 2,
        "{n} notices, or bytes after them"
    );
    format!(" msg:{}@{}", e.kind_name(), e.offset())
}

/// `Frame::canonical` (what `filter` and `guard` hand on by default): one frame, the header
/// but for the
/// length, and a payload that decodes under the same policy to the same typed JSON (or, for a
/// frame that is not pickles, the frame as received). Allowed: no canonical pickle
/// (`FrameError::NoCanonical`), and a limit the rewrite passes (bytes become a call of
/// `_codecs.encode` at protocol 2, a few nodes more).
fn check_frame_canonical(
    frame: &picklewarden::mitogen::Frame,
    content: &picklewarden::mitogen::Content<'_>,
    policy: &Policy,
) {
    use picklewarden::mitogen::{Content, FrameError, FrameReader};
    let mut limits = policy.limits;
    limits.max_input_bytes = 4 * FRAME_MAX;
    let out = match frame.canonical(content, policy, limits, 4 * FRAME_MAX) {
        Ok(out) => out,
        Err(
            FrameError::NoCanonical { offset, .. } | FrameError::CanonicalRefused { offset, .. },
        ) => {
            assert_eq!(offset, frame.offset, "NoCanonical offset");
            return;
        }
        Err(e) => panic!("Frame::canonical: {e}"),
    };
    let Content::Values(doc) = content else {
        assert_eq!(
            out,
            frame.as_bytes(),
            "a frame without pickles is handed on as received"
        );
        return;
    };
    let mut reader = FrameReader::with_max_message_bytes(4 * FRAME_MAX);
    reader.push(&out);
    let again = match reader.next_frame() {
        Ok(Some(f)) => f,
        other => panic!("the rewritten frame does not read back: {other:?}"),
    };
    assert_eq!(
        again.as_bytes().len(),
        out.len(),
        "one frame, nothing after"
    );
    let mut header = again.header;
    header.length = frame.header.length;
    assert_eq!(header, frame.header, "the header but for the length");
    match again.decode(policy, limits) {
        Ok(Content::Values(doc2)) => {
            if !(KNOWN_OPEN_JSON_SET_CYCLE && has_set_and_record(doc)) {
                assert_eq!(
                    json::to_typed_json(&doc2),
                    json::to_typed_json(doc),
                    "the rewritten frame decodes to other values: {out:?}"
                );
            }
        }
        Ok(other) => panic!("the rewritten frame is not pickles: {other:?}"),
        Err(e) => panic!("Frame::canonical gave a frame the policy refuses: {e}: {out:?}"),
    }
}

/// The parts of [`check_error`](super::invariants::check_error) that do not need the input
/// (payload errors are shifted).
fn check_error_kind_only(e: &Error, limits: &Limits) {
    assert_ne!(e.category(), Category::Io);
    if let ErrorKind::LimitExceeded { limit, seen, max } = e.kind() {
        assert_eq!(*max, limits.get(*limit));
        assert!(seen > max);
    }
}
