//! Latin-1 and the UTF-8 text that stands for it: protocols 0-2 write `bytes` as
//! `_codecs.encode(text, 'latin1')`, where each byte is a code point of the text (below
//! U+0100). The decoder checks such text once ([`len`]) and keeps it; these make its bytes
//! when they are asked for.
//!
//! In valid UTF-8, U+0080..U+00FF are exactly the two-byte sequences with lead byte C2 or C3,
//! so a lead byte of C4 or more is the only way to hold a code point above U+00FF (C0 and C1
//! cannot occur). The value of a continuation byte `b` after lead `l` is `(l << 6) | (b &
//! 0x3f)` truncated to 8 bits.

#[cfg(test)]
use std::borrow::Cow;

/// Input bytes transcoded at a time by [`for_each_chunk`] and [`eq`], on the stack.
const CHUNK_BYTES: usize = 4096;

/// The Latin-1 bytes of `text` (valid UTF-8 whose code points are all below U+0100, checked by
/// the caller), which are `len` bytes ([`len`]).
pub(crate) fn pack(text: &[u8], len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len];
    pack_into(text, &mut out);
    out
}

/// Writes the bytes of a Python `bytes` value into `out`, which must be exactly
/// [`PyBytes::len`](crate::PyBytes::len) bytes long: for a caller that makes the bytes in a
/// buffer of its own (such as a Python `bytes` object of that length, as the Python package
/// does), with no allocation or copy in between. Bytes the document holds as they are are
/// copied; the protocol 0-2 form, `_codecs.encode(text, 'latin1')`, is transcoded from its
/// UTF-8 text straight into `out` (the text was checked when it was decoded, and its Latin-1
/// length counted then, so nothing is checked or counted again here). About 3 GB/s on SSE2
/// (bench/NOTES.md), against the 4 KiB pieces of [`PyBytes::for_each_chunk`](crate::value::PyBytes::for_each_chunk), which count
/// each piece's length first.
///
/// Returns `false`, leaving `out` as it was, when `out.len()` is not `bytes.len()`.
///
/// ```
/// use picklewarden::{copy_bytes_into, Decoder, Policy, Value};
/// let policy = Policy::data();
/// // pickle.dumps(b"\xe9t\xe9", 2): _codecs.encode("\u{e9}t\u{e9}", "latin1")
/// let p = b"\x80\x02c_codecs\nencode\nq\x00X\x05\x00\x00\x00\xc3\xa9t\xc3\xa9q\x01X\x06\x00\x00\x00latin1q\x02\x86q\x03Rq\x04.";
/// let doc = Decoder::new(p, &policy).decode()?;
/// let b = match doc.root().and_then(|r| doc.get(r)) {
///     Some(Value::Bytes(b)) => b,
///     other => panic!("not bytes: {other:?}"),
/// };
/// let mut out = vec![0u8; b.len()];
/// assert!(copy_bytes_into(&b, &mut out));
/// assert_eq!(out, b"\xe9t\xe9");
/// assert!(!copy_bytes_into(&b, &mut [0u8; 2]));
/// # Ok::<(), picklewarden::Error>(())
/// ```
#[must_use]
pub fn copy_bytes_into(bytes: &crate::PyBytes<'_>, out: &mut [u8]) -> bool {
    if out.len() != bytes.len() {
        return false;
    }
    match (bytes.as_slice(), bytes.latin1_text()) {
        (Some(raw), _) => out.copy_from_slice(raw),
        (None, Some(text)) => pack_into(text, out),
        (None, None) => return false,
    }
    true
}

/// The end of the piece of `text` that starts at `from` and holds at most [`CHUNK_BYTES`]
/// bytes, not cutting a two-byte sequence.
fn chunk_end(text: &[u8], from: usize) -> usize {
    let mut end = from.saturating_add(CHUNK_BYTES).min(text.len());
    // A continuation byte is never first: the piece ends before its lead byte instead.
    if text.get(end).is_some_and(|&b| b & 0xC0 == 0x80) {
        end -= 1;
    }
    end
}

/// Calls `f` on the Latin-1 bytes of `text` (as [`pack`]) in pieces of at most
/// [`CHUNK_BYTES`], transcoded on the stack.
pub(crate) fn for_each_chunk(text: &[u8], mut f: impl FnMut(&[u8])) {
    for_each_chunk_while(text, |piece| {
        f(piece);
        true
    });
}

/// [`for_each_chunk`] until `f` returns false: nothing past that piece is transcoded.
pub(crate) fn for_each_chunk_while(text: &[u8], mut f: impl FnMut(&[u8]) -> bool) {
    let mut buf = [0u8; CHUNK_BYTES];
    let mut from = 0;
    while from < text.len() {
        let end = chunk_end(text, from);
        let piece = text.get(from..end).unwrap_or_default();
        let n = piece.iter().filter(|&&b| b & 0xC0 != 0xC0).count();
        if let Some(out) = buf.get_mut(..n) {
            pack_into(piece, out);
            if !f(out) {
                return;
            }
        }
        from = end.max(from + 1);
    }
}

/// Whether the Latin-1 bytes of `text` (as [`pack`]) are `raw`, without allocating.
pub(crate) fn eq(text: &[u8], mut raw: &[u8]) -> bool {
    let mut same = true;
    for_each_chunk(text, |piece| match raw.split_at_checked(piece.len()) {
        Some((head, rest)) if same && head == piece => raw = rest,
        _ => same = false,
    });
    same && raw.is_empty()
}

/// Latin-1 bytes of valid UTF-8 text, or `None` if it holds a code point above U+00FF.
///
/// No intermediate string: ASCII text is borrowed as it is; otherwise one pass checks that no
/// byte is C4 or more and one pass packs the bytes ([`pack_into`]). In valid UTF-8,
/// U+0080..U+00FF are exactly the
/// two-byte sequences with lead byte C2 or C3, so a lead byte of C4 or more is the only way to
/// hold a code point above U+00FF (C0 and C1 cannot occur). The value of a continuation byte
/// `b` after lead `l` is `(l << 6) | (b & 0x3f)` truncated to 8 bits.
#[cfg(test)]
fn encode(s: &[u8]) -> Option<Cow<'_, [u8]>> {
    // `s` is valid UTF-8. Its code points are all below U+0100 exactly when no byte is a lead
    // byte of a longer code point (C4..FF); then every non-ASCII code point is C2 or C3
    // followed by one continuation byte, and its Latin-1 byte is that continuation byte, plus
    // 0x40 after C3.
    if s.is_ascii() {
        return Some(Cow::Borrowed(s));
    }
    let len = len(s)?;
    Some(Cow::Owned(pack(s, len)))
}

/// The Latin-1 length of valid UTF-8 text (one byte per byte that is not a lead byte C2 or
/// C3), or `None` when a byte is C4 or more (a code point above U+00FF). One pass, counting in
/// `u8` lanes over runs of 255 bytes, which the compiler vectorises (a plain
/// `filter().count()` does not: 2.4 against 32 GB/s on SSE2).
pub(crate) fn len(s: &[u8]) -> Option<usize> {
    let mut leads = 0usize;
    for run in s.chunks(255) {
        let (n, top) = run.iter().fold((0u8, 0u8), |(n, top), &b| {
            (n + u8::from(b >= 0xC0), top.max(b))
        });
        if top >= 0xC4 {
            return None;
        }
        leads += usize::from(n);
    }
    Some(s.len() - leads)
}

/// The Latin-1 bytes of UTF-8 text whose bytes are all below C4 (checked by the caller), into
/// `out`, whose length is exactly theirs ([`len`]): eight input bytes at a time while eight output bytes fit,
/// then [`pack_bytes`] for the rest. In each word, a continuation byte after C3 gains
/// 0x40 and BMI2's PEXT drops the lead bytes (C2, C3). About 2x the byte loop on Zen 4
/// (bench/NOTES.md); AMD Zen 1 and 2 run PEXT in microcode, so builds for them should leave
/// BMI2 off.
#[cfg(all(target_arch = "x86_64", target_feature = "bmi2"))]
fn pack_into(s: &[u8], out: &mut [u8]) {
    /// Bit 7 of every byte.
    const HIGH: u64 = 0x8080_8080_8080_8080;
    /// Bit 0 of every byte.
    const LOW: u64 = 0x0101_0101_0101_0101;
    let mut w = 0usize;
    let mut i = 0usize;
    // The byte before the current word (0 before the first), in the low byte.
    let mut carry = 0u64;
    while let (Some(word), Some(slot)) = (s.get(i..i + 8), out.get_mut(w..w + 8)) {
        let mut b = [0u8; 8];
        b.copy_from_slice(word);
        let x = u64::from_le_bytes(b);
        // Byte k of `prev` is the byte before byte k of `x`.
        let prev = (x << 8) | carry;
        carry = x >> 56;
        // Bit 7 of each continuation byte (10xxxxxx) and of each lead byte (11xxxxxx).
        let cont = x & !(x << 1) & HIGH;
        let lead = x & (x << 1) & HIGH;
        // A continuation byte after C3 (bit 0 set; C2 has it clear) gains 0x40 (bit 6).
        let v = x | (((prev & LOW) << 6) & (cont >> 1));
        let keep = !((lead >> 7) * 0xFF);
        // The kept bytes land at `w`; the bytes after them are overwritten by the next word.
        slot.copy_from_slice(&safe_arch::population_extract_u64(v, keep).to_le_bytes());
        w += 8 - lead.count_ones() as usize;
        i += 8;
    }
    pack_bytes(
        s.get(i..).unwrap_or_default(),
        carry as u8,
        out.get_mut(w..).unwrap_or_default(),
    );
}

/// [`pack_into`] one byte at a time, branch-free: every byte is written at the output
/// position, and the position moves on past all but lead bytes (C2, C3), so a lead byte is
/// overwritten by the continuation byte that follows it. `prev` is the byte before `s`.
fn pack_bytes(s: &[u8], mut prev: u8, out: &mut [u8]) {
    let mut w = 0usize;
    for &b in s {
        if let Some(slot) = out.get_mut(w) {
            *slot = b | (u8::from(prev == 0xC3) << 6);
        }
        w += usize::from(b < 0xC0);
        prev = b;
    }
}

/// [`pack_into`] for x86-64 without BMI2: SSE2, which every x86-64 CPU has, sixteen input
/// bytes at a time while sixteen output bytes fit, then [`pack_bytes`] for the rest.
///
/// In each block a continuation byte after C3 gains 0x40 (the byte before lane 0 is the last
/// of the block before), lead bytes (C2, C3) are cleared, and each 8-byte half is compressed
/// on its own, as Hacker's Delight (2nd ed., 7-4) compresses bits: a kept byte moves down by
/// the number `d` of lead bytes before it in its half (0 to 4 in valid text; the algorithm
/// is exact for any 0 to 7), in three steps of 1, 2 and 4 bytes taken where that bit of `d`
/// is set, `d` moving with its byte. Shifts stay inside 64-bit lanes, so a half never spills
/// into the other. The halves land at `w` and at `w` plus the low half's kept count; the
/// bytes after each are overwritten by the next. 3.2 GB/s against the byte loop's 1.8 on text
/// in cache (the Xeon VM, random Latin-1 as in Mitogen's transfers; bench/NOTES.md).
#[cfg(all(target_arch = "x86_64", not(target_feature = "bmi2")))]
fn pack_into(s: &[u8], out: &mut [u8]) {
    use safe_arch::{
        add_i8_m128i, bitand_m128i, bitandnot_m128i, bitor_m128i, byte_shl_imm_u128_m128i,
        byte_shr_imm_u128_m128i, cmp_eq_mask_i8_m128i, load_unaligned_m128i, m128i,
        set_splat_i8_m128i, shl_imm_u64_m128i, shr_imm_u64_m128i,
    };
    /// Moves the lanes of `x` selected by `m` (0xFF lanes) down by `BITS / 8` bytes within
    /// their 64-bit half; the other lanes stay.
    #[inline(always)]
    fn shift_where<const BITS: i32>(m: m128i, x: m128i) -> m128i {
        bitor_m128i(
            bitandnot_m128i(m, x),
            shr_imm_u64_m128i::<BITS>(bitand_m128i(m, x)),
        )
    }
    /// 0xFF in the lanes of `d` that have `bit` set.
    #[inline(always)]
    fn lanes_with(d: m128i, bit: m128i) -> m128i {
        cmp_eq_mask_i8_m128i(bitand_m128i(d, bit), bit)
    }
    let splat = |b: u8| set_splat_i8_m128i(i8::from_ne_bytes([b]));
    let (top2, c3, x40) = (splat(0xC0), splat(0xC3), splat(0x40));
    let (one, two, four) = (splat(1), splat(2), splat(4));
    let len = out.len();
    let mut w = 0usize;
    let mut i = 0usize;
    let mut before = m128i::default();
    while let (Some(block), true) = (s.get(i..i + 16), w + 16 <= len) {
        let Ok(block) = <&[u8; 16]>::try_from(block) else {
            break;
        };
        let b = load_unaligned_m128i(block);
        // Byte k of `prev` is the byte before byte k of `b`.
        let prev = bitor_m128i(
            byte_shl_imm_u128_m128i::<1>(b),
            byte_shr_imm_u128_m128i::<15>(before),
        );
        before = b;
        // 0xFF in the lanes of lead bytes (11xxxxxx).
        let lead = cmp_eq_mask_i8_m128i(bitand_m128i(b, top2), top2);
        let v = bitor_m128i(b, bitand_m128i(cmp_eq_mask_i8_m128i(prev, c3), x40));
        let mut v = bitandnot_m128i(lead, v);
        // Lead bytes up to and including each lane, within its half.
        let l = bitand_m128i(lead, one);
        let mut upto = add_i8_m128i(l, shl_imm_u64_m128i::<8>(l));
        upto = add_i8_m128i(upto, shl_imm_u64_m128i::<16>(upto));
        upto = add_i8_m128i(upto, shl_imm_u64_m128i::<32>(upto));
        // A kept lane's count is that of the leads before it; a lead lane does not move.
        let mut d = bitandnot_m128i(lead, upto);
        let m = lanes_with(d, one);
        v = shift_where::<8>(m, v);
        d = shift_where::<8>(m, d);
        let m = lanes_with(d, two);
        v = shift_where::<16>(m, v);
        d = shift_where::<16>(m, d);
        v = shift_where::<32>(lanes_with(d, four), v);
        let [low, high]: [u64; 2] = v.into();
        let [_, _, _, _, _, _, _, low_leads, _, _, _, _, _, _, _, high_leads]: [u8; 16] =
            upto.into();
        for (half, leads) in [(low, low_leads), (high, high_leads)] {
            if let Some(slot) = out.get_mut(w..w + 8) {
                slot.copy_from_slice(&half.to_le_bytes());
            }
            w += 8 - usize::from(leads);
        }
        i += 16;
    }
    let prev = match i.checked_sub(1).and_then(|k| s.get(k)) {
        Some(&b) => b,
        None => 0,
    };
    pack_bytes(
        s.get(i..).unwrap_or_default(),
        prev,
        out.get_mut(w..).unwrap_or_default(),
    );
}

#[cfg(not(target_arch = "x86_64"))]
fn pack_into(s: &[u8], out: &mut [u8]) {
    pack_bytes(s, 0, out);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_matches_the_definition() {
        let all: String = (0u32..=0xFF).filter_map(char::from_u32).collect();
        let want: Vec<u8> = (0u8..=0xFF).collect();
        assert_eq!(encode(all.as_bytes()).unwrap().as_ref(), want.as_slice());
        let mixed = "a\u{e9}\u{ff}b\u{80}\u{c0}\u{3}";
        assert_eq!(
            encode(mixed.as_bytes()).unwrap().as_ref(),
            b"a\xe9\xffb\x80\xc0\x03"
        );
        assert!(encode("x\u{100}".as_bytes()).is_none());
        assert!(encode("\u{20ac}".as_bytes()).is_none());
        assert!(encode("\u{1f600}".as_bytes()).is_none());
        assert!(matches!(encode(b"abc"), Some(Cow::Borrowed(_))));
    }

    /// `copy_bytes_into` of Latin-1 text and of raw bytes at every length up to 300 (across
    /// the SSE2 blocks and BMI2 words, with lead bytes everywhere) gives `pack`'s bytes and
    /// the raw bytes, and refuses an `out` of any other length without writing to it.
    #[test]
    fn copy_bytes_into_writes_the_bytes_and_refuses_a_wrong_length() {
        let latin1: Vec<u8> = (0..300u32).map(|i| (i * 97 + 13) as u8).collect();
        for n in 0..latin1.len() {
            let want = &latin1[..n];
            let text: String = want.iter().map(|&b| char::from(b)).collect();
            let lazy = crate::PyBytes::latin1(text.as_bytes(), n);
            let raw = crate::PyBytes::raw(want);
            for b in [lazy, raw] {
                let mut out = vec![0u8; n];
                assert!(copy_bytes_into(&b, &mut out));
                assert_eq!(out, want, "n {n}");
                for wrong in [n + 1, n.saturating_sub(1)] {
                    if wrong == n {
                        continue;
                    }
                    let mut out = vec![0xAAu8; wrong];
                    assert!(!copy_bytes_into(&b, &mut out));
                    assert!(out.iter().all(|&x| x == 0xAA));
                }
            }
        }
    }

    /// The packing used by this build (BMI2 words or bytes) against the byte loop and against
    /// Rust's own `char` decoding, at every length up to 40 and every start offset within a
    /// word, on text mixing ASCII, C2 and C3 characters (so lead bytes fall at every position
    /// of a word, and across words).
    #[test]
    fn latin1_pack_agrees_with_the_byte_loop_at_every_alignment() {
        let mut x: u32 = 0x9e37_79b9;
        let latin1: Vec<u8> = (0..4096)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x as u8
            })
            .collect();
        let text: String = latin1.iter().map(|&b| char::from(b)).collect();
        let utf8 = text.as_bytes();
        let want = |t: &[u8]| -> Vec<u8> {
            std::str::from_utf8(t)
                .unwrap()
                .chars()
                .map(|c| u8::try_from(u32::from(c)).unwrap())
                .collect()
        };
        let bytewise = |t: &[u8]| -> Vec<u8> {
            let mut out = vec![0u8; len(t).unwrap()];
            pack_bytes(t, 0, &mut out);
            out
        };
        assert_eq!(pack(utf8, latin1.len()), latin1);
        assert_eq!(bytewise(utf8), latin1);
        let starts: Vec<usize> = (0..utf8.len())
            .filter(|&i| utf8[i] & 0xC0 != 0x80)
            .take(16)
            .collect();
        for &start in &starts {
            for len in 0..40 {
                let mut end = (start + len).min(utf8.len());
                while end < utf8.len() && utf8[end] & 0xC0 == 0x80 {
                    end += 1;
                }
                let t = &utf8[start..end];
                assert_eq!(pack(t, want(t).len()), want(t), "start {start} len {len}");
                assert_eq!(bytewise(t), want(t), "start {start} len {len}");
            }
        }
    }

    /// The packing used by this build against Rust's own `char` decoding on every way lead
    /// bytes can fall in a 16-byte block of valid text (no two adjacent: 2,584 patterns),
    /// each after a block that ends in ASCII and, where the pattern starts with a
    /// continuation's room, after one that ends in a lead byte (so lane 0 continues it), with
    /// C2 and C3 leads and continuation and ASCII values drawn from a fixed xorshift.
    #[test]
    fn latin1_pack_is_exact_on_every_block_pattern() {
        let mut x: u32 = 0x2545_f491;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x
        };
        // One 16-byte block with leads where `mask` has bits; `continues` makes lane 0 the
        // continuation of a lead that ended the block before.
        let mut block = |mask: u16, continues: bool| -> Vec<u8> {
            let mut b = Vec::with_capacity(16);
            let mut k = 0;
            while k < 16 {
                let r = next();
                if k == 0 && continues {
                    b.push(0x80 | (r as u8 & 0x3F));
                } else if mask & (1 << k) != 0 {
                    b.push(0xC2 | (r as u8 & 1));
                    if k + 1 < 16 {
                        b.push(0x80 | ((r >> 8) as u8 & 0x3F));
                        k += 1;
                    }
                } else {
                    b.push(r as u8 & 0x7F);
                }
                k += 1;
            }
            b
        };
        let valid = |m: u16| m & (m >> 1) == 0;
        let mut text = Vec::new();
        // Whether the last block ended in a lead byte (the next one starts with its
        // continuation).
        let mut open = false;
        let ends_open = |m: u16| m & (1 << 15) != 0;
        for mask in (0..=u16::MAX).filter(|&m| valid(m)) {
            text.extend(block(0, open));
            text.extend(block(mask, false));
            open = ends_open(mask);
            if mask & 1 == 0 {
                text.extend(block(1 << 15, open));
                text.extend(block(mask, true));
                open = ends_open(mask);
            }
        }
        if open {
            text.push(0x80);
        }
        let want: Vec<u8> = std::str::from_utf8(&text)
            .unwrap()
            .chars()
            .map(|c| u8::try_from(u32::from(c)).unwrap())
            .collect();
        assert_eq!(len(&text), Some(want.len()));
        assert_eq!(pack(&text, want.len()), want);
    }

    /// A code point above U+00FF anywhere in a text (at the start, around the 255-byte runs of
    /// the length pass, in the block or word loop, in the tail) makes the Latin-1 encoding
    /// give up, whatever text is around it; U+00FF itself, the largest Latin-1 character, is
    /// packed.
    #[test]
    fn encode_refuses_a_code_point_above_u00ff_wherever_it_is() {
        let filler = "\u{e9}a\u{ff}\u{80}".repeat(2500); // 12,500 bytes, lead bytes C3 and C2
        let n = filler.len();
        for bad in ["\u{100}", "\u{20ac}", "\u{1f600}", "\u{7ff}"] {
            let cuts = (0..70).chain(240..280).chain(4060..4140).chain(n - 40..=n);
            for cut in cuts {
                let at = (0..=cut)
                    .rev()
                    .find(|&i| filler.is_char_boundary(i))
                    .unwrap();
                let text = format!("{}{bad}{}", &filler[..at], &filler[at..]);
                assert_eq!(encode(text.as_bytes()), None, "{bad:?} at {at}");
            }
        }
        let max = "\u{ff}".repeat(1000);
        assert_eq!(encode(max.as_bytes()).unwrap().as_ref(), &[0xFF; 1000]);
        let packed = encode(filler.as_bytes()).unwrap();
        assert_eq!(packed.len(), 10_000);
        assert!(packed.chunks(4).all(|c| c == [0xE9, b'a', 0xFF, 0x80]));
    }

    /// Pieces of at most CHUNK_BYTES input bytes that never cut a two-byte sequence, and the
    /// comparison built on them, at lengths around the chunk size.
    #[test]
    fn chunks_and_equality_agree_with_pack() {
        for n in [0, 1, 2, 100, 2047, 2048, 2049, 4095, 4096, 4097, 10_000] {
            let latin1: Vec<u8> = (0..n).map(|i| (i * 7 + i / 3) as u8).collect();
            let text: String = latin1.iter().map(|&b| char::from(b)).collect();
            let t = text.as_bytes();
            let mut got = Vec::new();
            let mut pieces = 0;
            for_each_chunk(t, |p| {
                assert!(!p.is_empty() && p.len() <= CHUNK_BYTES);
                got.extend_from_slice(p);
                pieces += 1;
            });
            assert_eq!(got, latin1, "{n}");
            assert_eq!(pack(t, n), latin1);
            assert!(eq(t, &latin1));
            if n > 0 {
                let mut other = latin1.clone();
                other[n - 1] ^= 0x80;
                assert!(!eq(t, &other), "{n}");
                assert!(!eq(t, &latin1[..n - 1]), "{n}");
            }
            let mut longer = latin1.clone();
            longer.push(0);
            assert!(!eq(t, &longer), "{n}");
        }
    }
}
