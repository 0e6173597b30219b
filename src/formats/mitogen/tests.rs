//! Unit tests of Mitogen framing and payloads.

use super::*;
use crate::error::Category;
use crate::policy::Policy;

fn header(enc: Enc, handle: u32, reply_to: u32, length: u32) -> Header {
    Header {
        enc,
        dst_id: 0,
        src_id: 1,
        auth_id: 1,
        handle,
        reply_to,
        length,
    }
}

fn frame(h: Header, payload: &[u8]) -> Vec<u8> {
    let mut v = h.to_bytes().to_vec();
    v.extend_from_slice(payload);
    v
}

fn mitogen() -> Policy {
    Policy::builtin("mitogen").unwrap()
}

#[test]
fn header_round_trip_matches_struct_pack() {
    // struct.pack('>hLLLLLL', 0x4d4a, 1, 2, 3, 4, 5, 6)
    let want = b"\x4d\x4a\x00\x00\x00\x01\x00\x00\x00\x02\x00\x00\x00\x03\x00\x00\x00\x04\x00\x00\x00\x05\x00\x00\x00\x06";
    let h = Header::parse(want, 0, 100).unwrap();
    assert_eq!(
        h,
        Header {
            enc: Enc::Pickle,
            dst_id: 1,
            src_id: 2,
            auth_id: 3,
            handle: 4,
            reply_to: 5,
            length: 6
        }
    );
    assert_eq!(&h.to_bytes(), want);
}

#[test]
fn bad_enc_and_size_limit() {
    let mut bytes = header(Enc::Pickle, 1, 0, 10).to_bytes();
    bytes[1] = 0x4c;
    assert!(matches!(
        Header::parse(&bytes, 7, 100),
        Err(FrameError::BadEnc {
            enc: 0x4d4c,
            offset: 7
        })
    ));
    bytes[1] = 0x4e;
    assert!(Header::parse(&bytes, 0, 100).is_err());
    let ok = header(Enc::Binary, 1, 0, 10).to_bytes();
    assert!(Header::parse(&ok, 0, 10).is_ok());
    let e = Header::parse(&ok, 0, 9).unwrap_err();
    assert_eq!(e.kind_name(), "message_too_large");
    assert_eq!(e.category(), Category::LimitExceeded);
}

#[test]
fn reader_takes_any_piece_sizes() {
    let mut stream = Vec::new();
    let payloads: [&[u8]; 4] = [b"", b"N.", b"\x80\x02K\x05.\x80\x02K\x06.", b"raw"];
    for (i, p) in payloads.iter().enumerate() {
        let enc = if i == 3 { Enc::Binary } else { Enc::Pickle };
        stream.extend(frame(header(enc, 1000 + i as u32, 0, p.len() as u32), p));
    }
    for piece in [1, 2, 3, 7, 25, 26, 27, 1000] {
        let mut r = FrameReader::new();
        let mut got = Vec::new();
        for chunk in stream.chunks(piece) {
            r.push(chunk);
            while let Some(f) = r.next_frame().unwrap() {
                got.push(f);
            }
        }
        r.finish().unwrap();
        assert_eq!(got.len(), 4, "piece {piece}");
        let mut offset = 0;
        for (f, p) in got.iter().zip(payloads) {
            assert_eq!(f.payload(), p);
            assert_eq!(f.offset, offset);
            offset += f.as_bytes().len() as u64;
        }
        assert_eq!(r.offset(), stream.len() as u64);
    }
}

#[test]
fn reader_refuses_oversized_header_before_payload() {
    let mut r = FrameReader::with_max_message_bytes(4);
    r.push(&header(Enc::Pickle, 1, 0, 5).to_bytes());
    let e = r.next_frame().unwrap_err();
    assert!(matches!(
        e,
        FrameError::TooLarge {
            length: 5,
            max: 4,
            offset: 0
        }
    ));
    assert!(r.next_frame().is_err());
}

#[test]
fn truncated_stream() {
    let bytes = frame(header(Enc::Pickle, 1, 0, 2), b"N.");
    for cut in 1..bytes.len() {
        let mut r = FrameReader::new();
        r.push(&bytes[..cut]);
        assert!(r.next_frame().unwrap().is_none());
        let e = r.finish().unwrap_err();
        assert_eq!(e.kind_name(), "truncated");
        assert_eq!(e.category(), Category::Truncated);
    }
}

#[test]
fn payload_kinds() {
    let p = mitogen();
    let l = p.limits;
    let dead = header(Enc::Legacy, 1000, IS_DEAD, 0);
    assert!(matches!(
        decode_payload(&dead, b"Channel closed", &p, l),
        Ok(Content::Dead(r)) if r == "Channel closed"
    ));
    // A reason that is a pickle the policy refuses is refused as it would be in a live
    // message (Message.unpickle(throw_dead=False) unpickles it); one it accepts, and text
    // that starts like a pickle but is not one, pass.
    let bad = b"cmitogen.core\nBlob\n(I1000000000\ntR.";
    let e = decode_payload(&dead, bad, &p, l).unwrap_err();
    assert_eq!(e.kind().name(), "constructor_rejected", "{e}");
    let e = decode_payload(&dead, b"cos\nsystem\n(S'id'\ntR.", &p, l).unwrap_err();
    assert_eq!(e.kind().name(), "global_not_allowed", "{e}");
    // Without its STOP, or with bytes after it, CPython still runs it as far as the
    // REDUCE: refused too, at the first malformation past the first opcode. So is text
    // that is malformed only past its first opcode.
    for bad in [
        &bad[..bad.len() - 1],
        // CPython 3.11 reads "I 5" as 5 and goes on to the GLOBAL.
        b"I 5\ncmitogen.core\nBlob\n(I1000000000\ntR.",
        b"cmitogen.core\nBlob\n(I1000000000\ntR.junk",
        b"cmitogen.core\nBlob\n(I1000000000\ntR0",
        b"(S'x'\n",
    ] {
        assert!(decode_payload(&dead, bad, &p, l).is_err(), "{bad:?}");
    }
    // Every reason Mitogen 0.3.54's core.py writes fails at its first opcode, or decodes.
    for ok in [
        &b"I5\n."[..],
        b"context 3 is gone",
        b"the respondent Context has disconnected",
        b"Channel closed by remote end.",
        b"Channel closed by local end.",
        b"Sender was explicitly closed",
        b"the Receiver has been closed",
        b"An attempt was made to enqueue a message with a Broker that has already exitted.",
        b"cannot register a handle that already exists",
        b"refused by policy",
        b"invalid handle",
        b"message too large (max 134217728 bytes)",
        b"Broker has exitted",
        b"no route to 5, my ID is 1",
        b"routing mode prevents forward of message from context 2 to context 3 via context 1",
        b"reply from unexpected context",
    ] {
        assert!(
            matches!(decode_payload(&dead, ok, &p, l), Ok(Content::Dead(r)) if r.as_bytes() == ok),
            "{ok:?}"
        );
    }
    // With enc binary it is never unpickled.
    let dead_bin = header(Enc::Binary, 1000, IS_DEAD, 0);
    assert!(matches!(
        decode_payload(&dead_bin, bad, &p, l),
        Ok(Content::Dead(_))
    ));
    assert_eq!(
        decode_payload(&dead, b"\xff", &p, l)
            .unwrap_err()
            .kind()
            .name(),
        "invalid_utf8"
    );
    let log = header(Enc::Legacy, handle::FORWARD_LOG, 0, 0);
    assert!(matches!(
        decode_payload(&log, b"mitogen\x0020\x00hi", &p, l),
        Ok(Content::Raw(_))
    ));
    let bin = header(Enc::Binary, 1000, 0, 0);
    assert!(matches!(
        decode_payload(&bin, b"\x00\x01", &p, l),
        Ok(Content::Binary(b"\x00\x01"))
    ));
    let pkl = header(Enc::Pickle, 1000, 0, 0);
    match decode_payload(&pkl, b"", &p, l).unwrap() {
        Content::Values(d) => assert!(d.roots().is_empty()),
        other => panic!("{other:?}"),
    }
    // Two pickles sharing one memo: the second GETs what the first PUT.
    match decode_payload(&pkl, b"\x80\x02]q\x00.\x80\x02h\x00.", &p, l).unwrap() {
        Content::Values(d) => {
            assert_eq!(d.roots().len(), 2);
            assert_eq!(d.roots()[0], d.roots()[1]);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn payload_errors_are_absolute() {
    let p = mitogen();
    let mut stream = frame(header(Enc::Pickle, 1000, 0, 2), b"N.");
    let evil = b"\x80\x02cos\nsystem\nX\x02\x00\x00\x00id\x85R.";
    stream.extend(frame(header(Enc::Pickle, 1000, 0, evil.len() as u32), evil));
    let mut r = FrameReader::new();
    r.push(&stream);
    let first = r.next_frame().unwrap().unwrap();
    assert!(first.decode(&p, p.limits).is_ok());
    let second = r.next_frame().unwrap().unwrap();
    let e = second.decode(&p, p.limits).unwrap_err();
    assert_eq!(e.kind_name(), "global_not_allowed");
    assert_eq!(e.offset(), 28 + 26 + 2);
    assert!(e.to_string().contains("os.system"), "{e}");
}

#[test]
fn handshake() {
    use bootstrap::{Handshake, Step};
    let mut h = Handshake::default();
    assert_eq!(h.feed(b"MITO000\nMITO0", 100), Step::Pending);
    assert_eq!(h.feed(b"01\nnoise\nMITO", 100), Step::Pending);
    assert_eq!(h.feed(b"002\n\x4d\x4a", 100), Step::Done(4));
    assert!(h.is_done());
    // 13 + 13 + 4 bytes of handshake text: the frames start at offset 30.
    assert_eq!(h.text_bytes(), 30);
    assert_eq!(h.feed(b"more", 100), Step::Done(0));
    assert_eq!(h.text_bytes(), 30);
    let mut h = Handshake::new();
    assert_eq!(h.feed(&[b'x'; 11], 10), Step::TooLong);
}

/// The handshake ends where Mitogen's parent ends it: at the `\n` of the first line that
/// holds `MITO002` and neither `MITO000` nor `MITO001` (its patterns are tried in that
/// order with `re.search`), fed whole or a byte at a time. (A review helper found the
/// old rule, a line exactly `MITO002`, let ` MITO002\n` and then frames pass as text
/// while the parent read them as frames.)
#[test]
fn handshake_ends_on_any_line_mitogen_takes_for_ec2() {
    use bootstrap::{Handshake, Step};
    let ends = |input: &[u8]| -> Option<usize> {
        let mut h = Handshake::default();
        match h.feed(input, 1 << 20) {
            Step::Done(k) => {
                // Byte by byte gives the same end.
                let mut g = Handshake::default();
                let at = input
                    .iter()
                    .position(|&b| matches!(g.feed(&[b], 1 << 20), Step::Done(_)));
                assert_eq!(at.map(|p| p + 1), Some(k), "{input:?}");
                Some(k)
            }
            _ => None,
        }
    };
    assert_eq!(ends(b"MITO002\nMJ"), Some(8));
    assert_eq!(ends(b"MITO000\nMITO001\n MITO002\nMJ"), Some(25));
    assert_eq!(ends(b"xMITO002y\n"), Some(10));
    assert_eq!(ends(b"MITO002\r\nMJ"), Some(9));
    assert_eq!(ends(b"noise\nMITMITO002\n"), Some(17));
    // A line that also holds MITO000 or MITO001 is theirs, not the end.
    assert_eq!(ends(b"MITO002 MITO000\n"), None);
    assert_eq!(ends(b"MITO001MITO002\n"), None);
    assert_eq!(ends(b"MITO001MITO002\nMITO002\n"), Some(23));
    // Split markers and no newline yet.
    assert_eq!(ends(b"MITO00\n2\n"), None);
    assert_eq!(ends(b"MITO002"), None);
}
