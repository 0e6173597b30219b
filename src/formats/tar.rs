//! A tar as Python's `tarfile` reads it, the reader `torch.load` uses for the older torch
//! layout (`src/formats/torch_tar.rs`): this module's own header walk rather than a tar
//! crate, since what must be matched is CPython's `tarfile`, and the subset accepted here (one
//! header block per member, regular files only) is a few rules, each taken from
//! `Lib/tarfile.py` (`TarInfo.frombuf`, `nti`, `calc_chksums`, `TarFile.next`). A general tar
//! reader applies GNU and PAX extensions and stopping rules of its own, which is what would let
//! two readers see different members.

/// tarfile's `BLOCKSIZE`.
pub(crate) const BLOCK: usize = 512;

/// Whether `bytes` starts with a header Python's `tarfile` accepts as a first member
/// (`TarInfo.frombuf`: a full block, not all zeros, a checksum that matches the unsigned or
/// signed sum, every numeric field readable by `nti`). Such a file is read as a tar by
/// `torch.load` before anything else is tried.
pub(crate) fn is_tar(bytes: &[u8]) -> bool {
    bytes.get(..BLOCK).is_some_and(|b| header(b).is_ok())
}

/// The member names that make `torch.load` read a tar as its layout (`legacy_load` extracts
/// `storages` first, and raises `KeyError` on a tar without it, reading no pickle).
const TORCH_MEMBERS: [&[u8]; 4] = [b"storages", b"tensors", b"pickle", b"sys_info"];

/// Whether a tar (whose first header [`is_tar`] accepted) is torch's layout, from its member
/// headers as `TarFile.next` walks them (`block_at(offset)` reads the 512 bytes there): a
/// member named as one of the layout's, or a header this walk does not follow (a GNU or PAX
/// extension, which could rename a member), makes it one, and then its scan refuses what is
/// not the layout. Otherwise no pickle is read from it: it is not pickle-bearing. At most
/// `max` headers are read (past them: taken as the layout, and refused by its scan).
pub(crate) fn torch_layout(mut block_at: impl FnMut(u64) -> Option<[u8; BLOCK]>, max: u64) -> bool {
    let mut at = 0u64;
    for _ in 0..max {
        let Some(block) = block_at(at) else {
            return false;
        };
        if block.iter().all(|&b| b == 0) {
            return false;
        }
        // tarfile stops at a bad header after the first (the first was checked).
        let Ok(h) = header(&block) else {
            return false;
        };
        if !matches!(
            h.typeflag,
            b'0' | 0 | b'1' | b'2' | b'3' | b'4' | b'5' | b'6' | b'7'
        ) {
            return true;
        }
        if TORCH_MEMBERS.contains(&h.name.as_slice()) {
            return true;
        }
        let Ok(size) = u64::try_from(h.size) else {
            return false;
        };
        let Some(next) = size
            .div_ceil(BLOCK as u64)
            .checked_mul(BLOCK as u64)
            .and_then(|d| d.checked_add(at + BLOCK as u64))
        else {
            return false;
        };
        at = next;
    }
    true
}

/// One member header, as `TarInfo.frombuf` reads it.
struct Header {
    name: Vec<u8>,
    size: i128,
    typeflag: u8,
}

/// `TarInfo.frombuf` over one block; `Err` says why tarfile refuses it.
fn header(b: &[u8]) -> Result<Header, &'static str> {
    if b.len() != BLOCK {
        return Err("a header block cut short");
    }
    if b.iter().all(|&x| x == 0) {
        return Err("the end-of-archive block");
    }
    let field = |from: usize, to: usize| b.get(from..to).unwrap_or_default();
    let chksum = nti(field(148, 156)).ok_or("a checksum field tarfile cannot read")?;
    let (unsigned, signed) = b
        .iter()
        .enumerate()
        .fold((256i128, 256i128), |(u, s), (i, &x)| {
            if (148..156).contains(&i) {
                (u, s)
            } else {
                (u + i128::from(x), s + i128::from(x as i8))
            }
        });
    if chksum != unsigned && chksum != signed {
        return Err("a header whose checksum does not match");
    }
    // mode, uid, gid, size, mtime, devmajor, devminor: each read by nti.
    let mut size = 0;
    for (from, to) in [
        (100, 108),
        (108, 116),
        (116, 124),
        (124, 136),
        (136, 148),
        (329, 337),
        (337, 345),
    ] {
        let n = nti(field(from, to)).ok_or("a numeric header field tarfile cannot read")?;
        if from == 124 {
            size = n;
        }
    }
    let typeflag = b.get(156).copied().unwrap_or(0);
    let mut name = nts(field(0, 100)).to_vec();
    let prefix = nts(field(345, 500));
    // GNU types (L, K, S) keep the name alone; they are refused below in any case.
    if !prefix.is_empty() && !matches!(typeflag, b'L' | b'K' | b'S') {
        let mut full = prefix.to_vec();
        full.push(b'/');
        full.extend_from_slice(&name);
        name = full;
    }
    Ok(Header {
        name,
        size,
        typeflag,
    })
}

/// tarfile's `nts`: the bytes up to the first NUL.
fn nts(s: &[u8]) -> &[u8] {
    s.iter()
        .position(|&b| b == 0)
        .map_or(s, |p| s.get(..p).unwrap_or_default())
}

/// tarfile's `nti`: base-256 when the first byte is 0o200 or 0o377, else
/// `int(nts(s).decode("ascii").strip() or "0", 8)`; `None` where Python raises.
pub(crate) fn nti(s: &[u8]) -> Option<i128> {
    match s.first() {
        Some(&first @ (0o200 | 0o377)) => {
            let mut n: i128 = 0;
            for &b in s.get(1..).unwrap_or_default() {
                n = (n << 8) + i128::from(b);
            }
            if first == 0o377 {
                let width = u32::try_from(s.len().saturating_sub(1)).ok()?;
                n = -(1i128.checked_shl(8 * width)? - n);
            }
            Some(n)
        }
        _ => {
            let t = nts(s);
            if !t.is_ascii() {
                return None;
            }
            py_int_base8(t)
        }
    }
}

/// Python's `int(text.strip() or "0", 8)` over ASCII text: whitespace around, a sign, an
/// optional `0o` prefix, octal digits with single underscores between them (and after the
/// prefix). `None` where Python raises `ValueError`.
pub(crate) fn py_int_base8(t: &[u8]) -> Option<i128> {
    // str.isspace() within ASCII: \t \n \v \f \r, \x1c-\x1f and space.
    let space = |b: &u8| matches!(b, b'\t'..=b'\r' | 0x1c..=0x1f | b' ');
    let start = t.iter().position(|b| !space(b)).unwrap_or(t.len());
    let end = t.iter().rposition(|b| !space(b)).map_or(start, |p| p + 1);
    let mut s = t.get(start..end).unwrap_or_default();
    if s.is_empty() {
        return Some(0);
    }
    let negative = s.first() == Some(&b'-');
    if matches!(s.first(), Some(b'-' | b'+')) {
        s = s.get(1..).unwrap_or_default();
    }
    let mut after_prefix = false;
    if matches!(s.get(..2), Some(b"0o" | b"0O")) {
        s = s.get(2..).unwrap_or_default();
        after_prefix = true;
    }
    let mut n: i128 = 0;
    let mut digits = 0usize;
    let mut last_underscore = false;
    for &b in s {
        match b {
            b'0'..=b'7' => {
                n = n.checked_mul(8)?.checked_add(i128::from(b - b'0'))?;
                digits += 1;
                last_underscore = false;
            }
            b'_' if !last_underscore && (digits > 0 || after_prefix) => last_underscore = true,
            _ => return None,
        }
    }
    if digits == 0 || last_underscore {
        return None;
    }
    Some(if negative { -n } else { n })
}

/// The members of a tar, as `TarFile.next` walks them (regular files only).
pub(crate) struct Member<'a> {
    pub(crate) name: Vec<u8>,
    pub(crate) data: &'a [u8],
    /// Where `data` starts in the file.
    pub(crate) at: usize,
}

/// Walks the tar's members. Refusals are `(kind, why, offset)`; `Ok` also gives the offset
/// where the archive ends (its end-of-archive block or the end of the input).
pub(crate) fn members(
    bytes: &[u8],
    max: u64,
) -> Result<(Vec<Member<'_>>, usize), (&'static str, String, usize)> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    loop {
        let Some(block) = bytes.get(pos..pos.saturating_add(BLOCK)) else {
            // tarfile stops at a short block (or at the end of the input).
            return Ok((out, pos));
        };
        if block.iter().all(|&b| b == 0) {
            return Ok((out, pos));
        }
        let h = header(block).map_err(|why| ("tar_malformed", why.to_owned(), pos))?;
        if !matches!(h.typeflag, b'0' | 0) {
            return Err((
                "tar_layout",
                format!(
                    "member type {:?} (a link, directory, PAX or GNU header, or special file) is not read",
                    char::from(h.typeflag)
                ),
                pos,
            ));
        }
        if out.len() as u64 >= max {
            return Err((
                "container_limit",
                format!("more than max_entries {max} tar members"),
                pos,
            ));
        }
        let size = usize::try_from(h.size)
            .map_err(|_| ("tar_malformed", format!("a member size of {}", h.size), pos))?;
        let data_at = pos + BLOCK;
        // `_block(size)`: the data padded to whole blocks, all of which tarfile needs.
        let padded = size.div_ceil(BLOCK).checked_mul(BLOCK);
        let next = padded.and_then(|p| data_at.checked_add(p));
        let data = match (next, bytes.get(data_at..data_at.saturating_add(size))) {
            (Some(n), Some(d)) if n <= bytes.len() => d,
            _ => {
                return Err((
                    "tar_malformed",
                    format!("a member of {size} bytes runs past the end of the file"),
                    pos,
                ))
            }
        };
        out.push(Member {
            name: h.name,
            data,
            at: data_at,
        });
        pos = next.unwrap_or(bytes.len());
    }
}
