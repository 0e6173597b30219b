use super::*;
use crate::mitogen::{decode_payload, FrameReader};

fn header(handle: u32, reply_to: u32) -> Header {
    Header {
        enc: Enc::Pickle,
        dst_id: 0,
        src_id: 7,
        auth_id: 7,
        handle,
        reply_to,
        length: 0,
    }
}

fn frame_of(h: Header, payload: &[u8]) -> Frame {
    let h = Header {
        length: payload.len() as u32,
        ..h
    };
    let mut bytes = h.to_bytes().to_vec();
    bytes.extend_from_slice(payload);
    let mut r = FrameReader::new();
    r.push(&bytes);
    r.next_frame().unwrap().unwrap()
}

/// The notices are whole frames addressed as `_maybe_send_dead` addresses its own, and
/// their reason reads as a dead message's reason under the `mitogen` policy (its first byte
/// fails as a pickle at once).
#[test]
fn refusal_notices_are_dead_messages_addressed_as_mitogen_would() {
    let policy = Policy::builtin("mitogen").unwrap();
    let notices = refusal_notices(&header(1003, 0), "x");
    let mut r = FrameReader::new();
    r.push(&notices);
    let f = r.next_frame().unwrap().unwrap();
    assert!(r.next_frame().unwrap().is_none());
    assert_eq!(
        f.header,
        Header {
            enc: Enc::Legacy,
            dst_id: 0,
            src_id: 7,
            auth_id: 7,
            handle: 1003,
            reply_to: IS_DEAD,
            length: 26,
        }
    );
    match decode_payload(&f.header, f.payload(), &policy, policy.limits).unwrap() {
        Content::Dead(reason) => assert_eq!(reason, "refused by picklewarden: x"),
        other => panic!("{other:?}"),
    }
    // A request with reply_to: the child's handle; both when both apply; none for a dead
    // frame or a standard handle without reply_to.
    let both = refusal_notices(&header(1003, 1010), "x");
    let mut r = FrameReader::new();
    r.push(&both);
    let a = r.next_frame().unwrap().unwrap();
    let b = r.next_frame().unwrap().unwrap();
    assert_eq!((a.header.dst_id, a.header.handle), (0, 1003));
    assert_eq!((b.header.dst_id, b.header.handle), (7, 1010));
    assert_eq!(
        refusal_notices(&header(101, 1010), "x").len(),
        HEADER_LEN + 26
    );
    assert!(refusal_notices(&header(101, 0), "x").is_empty());
    assert!(refusal_notices(&header(1003, IS_DEAD), "x").is_empty());
    // The reason is cut at a character boundary.
    let long = "é".repeat(2000);
    let n = refusal_notices(&header(1003, 0), &long);
    assert_eq!(n.len(), HEADER_LEN + MAX_NOTICE_REASON_BYTES - 1);
    assert!(std::str::from_utf8(&n[HEADER_LEN..]).is_ok());
}

#[test]
fn dispositions() {
    let policy = Policy::builtin("mitogen").unwrap();
    let mut check = StreamCheck::new();
    let disposition = |check: &mut StreamCheck, handle: u32, payload: &[u8]| {
        check
            .check_frame(
                &frame_of(header(handle, 0), payload),
                &policy,
                policy.limits,
            )
            .unwrap_err()
            .disposition()
    };
    use Disposition::{Disconnect, FailCall};
    for (payload, want) in [
        (&b"\x80\x02c__builtin__\nset\n)R."[..], FailCall),
        (b"\x80\x02cdatetime\ndate\n)R.", FailCall),
        (b"\x80\x02cos\nsystem\n)R.", Disconnect),
        (
            b"\x80\x02cmitogen.core\nBlob\nJ\x00\xca\x9a;\x85R.",
            FailCall,
        ),
        (b"\x80\x02N\xff.", Disconnect),
        (b"\x80\x02X\x05\x00\x00\x00ab", Disconnect),
        (b"\x80\x02Q.", FailCall),
    ] {
        assert_eq!(disposition(&mut check, 1000, payload), want, "{payload:?}");
    }
    assert_eq!(disposition(&mut check, 101, b"N."), FailCall);
    assert_eq!(disposition(&mut check, 100, b"a b"), FailCall);
    assert_eq!(check.contexts_seen(), 0);
}

#[test]
fn module_names_and_context_ids() {
    for ok in [
        "os",
        "os.path",
        "_x.y_1",
        "ansible_mitogen.plugins.connection",
        "é",
    ] {
        assert!(module_name(ok.as_bytes()).is_ok(), "{ok}");
    }
    for bad in ["", ".", "os.", ".os", "1os", "os path", "os/path", "a-b"] {
        assert!(module_name(bad.as_bytes()).is_err(), "{bad}");
    }
    assert!(module_name(&vec![b'a'; MAX_MODULE_NAME_BYTES]).is_ok());
    assert!(module_name(&vec![b'a'; MAX_MODULE_NAME_BYTES + 1]).is_err());
    assert_eq!(context_id(b"0"), Ok(0));
    assert_eq!(context_id(b"4294967295"), Ok(u32::MAX));
    for bad in [
        &b""[..],
        b"4294967296",
        b"+5",
        b"-1",
        b" 5",
        b"5 ",
        b"0x5",
        b"5_0",
    ] {
        assert!(context_id(bad).is_err(), "{bad:?}");
    }
}
