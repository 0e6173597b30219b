//! Mitogen streams on the command line: `decode --mitogen` (one JSON line per frame) and the
//! frame checker that `filter` and `guard` share, with its audit events.

use std::fs::OpenOptions;
use std::io::{self, Read, Write};
use std::path::PathBuf;
use std::sync::Mutex;

use clap::{Args, ValueEnum};
use picklewarden::mitogen::bootstrap::{Handshake, Step, DEFAULT_MAX_BOOTSTRAP_BYTES};
use picklewarden::mitogen::{
    refusal_notices, Content, Disposition, Frame, FrameError, FrameReader, Header, StreamCheck,
};
use picklewarden::{ErrorKind, Limits, Policy};

use super::{Common, Fatal};

/// What `filter` and `guard` do with a refused frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum OnReject {
    /// Fail only the refused frame's call, as stock Mitogen does when it refuses one message:
    /// the frame is replaced by dead messages naming the refusal
    /// (`picklewarden::mitogen::refusal_notices`) and the child stays connected; but a frame
    /// that shows a hostile child (a framing error, a malformed pickle, a global that is
    /// neither Mitogen's nor plain data) still cuts the stream
    /// (`picklewarden::mitogen::Disposition`).
    FailCall,
    /// Write the audit event and end the stream with exit status 1 on every refusal (as
    /// Mitogen disconnects a stream it cannot read).
    #[value(alias = "fail")]
    Disconnect,
    /// Write the audit event, drop the frame and go on (a call waiting for it waits until its
    /// own timeout, if it has one).
    Drop,
}

/// The help of `filter`'s and `guard`'s `--policy`, with the built-in names taken from the
/// library's list.
fn policy_help() -> String {
    format!(
        "Policy: a built-in name ({}) or a TOML policy file",
        picklewarden::policy::BUILTIN_POLICIES.join(", ")
    )
}

/// Options shared by `filter` and `guard`.
#[derive(Args, Debug)]
pub(crate) struct FrameOpts {
    /// Policy: a built-in name or a TOML policy file (help text: [`policy_help`]).
    #[arg(long, default_value = "mitogen", value_name = "NAME|FILE", help = policy_help())]
    pub(crate) policy: String,
    /// Override one limit of the policy (repeatable), e.g. `max_nesting_depth=100`.
    #[arg(long = "limit", value_name = "NAME=VALUE")]
    pub(crate) limits: Vec<String>,
    /// Largest message payload accepted, in bytes (Mitogen's `max_message_size`; K, M, G
    /// suffixes as for `--limit`).
    #[arg(long, default_value_t = picklewarden::mitogen::DEFAULT_MAX_MESSAGE_BYTES, value_name = "BYTES", value_parser = super::parse_size)]
    pub(crate) max_message_bytes: u64,
    /// What to do with a refused frame (`fail` is accepted for `disconnect`).
    #[arg(long, value_enum, default_value = "fail-call")]
    pub(crate) on_reject: OnReject,
    /// Append audit events (JSON lines) to FILE instead of writing them to stderr.
    #[arg(long, value_name = "FILE")]
    pub(crate) audit_log: Option<PathBuf>,
    /// Hand on the child's own bytes of each accepted frame instead of picklewarden's
    /// canonical protocol-2 rewrite of its pickles (the default). RISK: the parent's CPython
    /// then reads opcodes, memo indices and declared lengths the child chose, which it may read
    /// otherwise than picklewarden: CPython 3.11 sizes its memo by the largest LONG_BINPUT
    /// index (a 9-byte `None` reply makes the parent allocate gigabytes) and allocates a
    /// BINBYTES's declared length before reading it. Use it only to debug, or for a parent
    /// whose unpickler is known to read every accepted pickle as picklewarden does.
    #[arg(long, conflicts_with = "canonical")]
    pub(crate) pass_through: bool,
    /// The default since pass-through became an option; accepted and ignored.
    #[arg(long, hide = true)]
    pub(crate) canonical: bool,
}

/// Loads a policy by built-in name or file, as `--policy` of `check` and `decode` does.
pub(crate) fn load_policy(name: &str, limits: &[String]) -> Result<(Policy, Limits), Fatal> {
    let common = Common {
        policy: Some(name.to_owned()),
        limits: limits.to_vec(),
        python2_str: None,
        stream: true,
        allow_trailing: false,
        buffers: Vec::new(),
        input: Some("-".into()),
    };
    let policy = common.policy()?;
    let limits = common.limits(&policy)?;
    Ok((policy, limits))
}

/// Checks frames under a policy and writes audit events for refusals.
pub(crate) struct Checker {
    pub(crate) policy: Policy,
    pub(crate) limits: Limits,
    pub(crate) stream_name: &'static str,
    /// Frames are handed on rewritten ([`Frame::canonical`]), up to this payload size; `None`
    /// with `--pass-through`.
    pub(crate) canonical: Option<u64>,
    /// The message policy's state for this stream (Context ids named so far).
    pub(crate) stream: StreamCheck,
}

impl Checker {
    pub(crate) fn new(opts: &FrameOpts, stream_name: &'static str) -> Result<Checker, Fatal> {
        let (policy, limits) = load_policy(&opts.policy, &opts.limits)?;
        Ok(Checker {
            policy,
            limits,
            stream_name,
            canonical: (!opts.pass_through).then_some(opts.max_message_bytes),
            stream: StreamCheck::new(),
        })
    }

    /// Checks a frame under the message policy and decodes its payload
    /// ([`StreamCheck::check_frame`]). Gives the frame rewritten when frames are handed on
    /// canonical, else `None` (hand it on as received). Writes no audit event: see
    /// [`Checker::audit`].
    pub(crate) fn check(&mut self, frame: &Frame) -> Result<Option<Vec<u8>>, FrameError> {
        let content = self.stream.check_frame(frame, &self.policy, self.limits)?;
        match self.canonical {
            Some(max) => frame
                .canonical(&content, &self.policy, self.limits, max)
                .map(Some),
            None => Ok(None),
        }
    }

    /// Writes the audit event of a refusal (tracing, JSON lines on stderr).
    pub(crate) fn audit(
        &self,
        header: Option<&Header>,
        frame_offset: u64,
        e: &FrameError,
        action: &str,
    ) {
        // Absent (not empty) when the refusal has no global or opcode (a cut-off frame, an
        // oversized header).
        let global = match e.payload_error().map(|p| p.kind()) {
            Some(ErrorKind::GlobalNotAllowed { module, name }) => Some(format!("{module}.{name}")),
            _ => None,
        };
        let opcode = e.payload_error().and_then(|p| p.opcode_name());
        let h = header.copied();
        tracing::warn!(
            target: "picklewarden::audit",
            event = "mitogen_frame_refused",
            stream = self.stream_name,
            policy = %self.policy.name,
            action,
            frame_offset,
            enc = h.map(|h| h.enc.value()),
            dst_id = h.map(|h| h.dst_id),
            src_id = h.map(|h| h.src_id),
            auth_id = h.map(|h| h.auth_id),
            handle = h.map(|h| h.handle),
            reply_to = h.map(|h| h.reply_to),
            length = h.map(|h| h.length),
            kind = e.kind_name(),
            category = e.category().name(),
            limit = e.limit_name(),
            offset = e.offset(),
            opcode,
            global = global.as_deref(),
            reason = %e,
            "refused a Mitogen frame"
        );
    }
}

/// Sets up the audit log: JSON lines on stderr (or appended to `--audit-log FILE`), one object
/// per event with its fields at the top level (as `serve` writes them), level from
/// `PICKLEWARDEN_LOG` (default `warn`; a value that is not a level or directive is refused,
/// see [`super::log_filter`]).
pub(crate) fn init_audit_log(opts: &FrameOpts) -> Result<(), Fatal> {
    let filter = super::log_filter("warn")?;
    let builder = tracing_subscriber::fmt()
        .json()
        .flatten_event(true)
        .with_current_span(false)
        .with_span_list(false)
        .with_env_filter(filter);
    match &opts.audit_log {
        None => {
            let _ = builder.with_writer(io::stderr).try_init();
        }
        Some(path) => {
            let file = OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| Fatal(format!("cannot open {}: {e}", path.display())))?;
            let _ = builder.with_writer(Mutex::new(file)).try_init();
        }
    }
    Ok(())
}

fn header_json(h: &Header) -> String {
    format!(
        "{{\"enc\":{},\"dst_id\":{},\"src_id\":{},\"auth_id\":{},\"handle\":{},\"reply_to\":{},\"length\":{}}}",
        h.enc.value(),
        h.dst_id,
        h.src_id,
        h.auth_id,
        h.handle,
        h.reply_to,
        h.length
    )
}

/// The `refused` object of a frame line: kind, category, absolute offset, reason, and the
/// opcode and global when the refusal has them (as the filter's audit event and the
/// service's verdict carry them).
fn refused_json(e: &FrameError) -> String {
    let mut v = serde_json::Map::new();
    v.insert("kind".into(), e.kind_name().into());
    v.insert("category".into(), e.category().name().into());
    v.insert("offset".into(), e.offset().into());
    v.insert("reason".into(), e.to_string().into());
    if let Some(limit) = e.limit_name() {
        v.insert("limit".into(), limit.into());
    }
    if let Some(p) = e.payload_error() {
        if let Some(op) = p.opcode_name() {
            v.insert("opcode".into(), op.into());
        }
        if let ErrorKind::GlobalNotAllowed { module, name } = p.kind() {
            v.insert("global".into(), format!("{module}.{name}").into());
        }
    }
    serde_json::Value::Object(v).to_string()
}

/// The line of a refused bootstrap handshake (`decode --mitogen`), in the form of a framing
/// error's line.
fn handshake_refusal(kind: &str, category: &str, reason: &str) -> String {
    let refused = serde_json::json!({
        "kind": kind,
        "category": category,
        "offset": 0,
        "reason": reason,
    });
    format!("{{\"offset\":0,\"refused\":{refused}}}\n")
}

/// Lowercase hex, two digits a byte (no `format!` per byte: that allocated a string for each
/// byte of a binary payload).
fn hex(bytes: &[u8]) -> String {
    let digit = |d: u8| char::from_digit(u32::from(d), 16).unwrap_or('0');
    let mut s = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        s.push(digit(b >> 4));
        s.push(digit(b & 0xf));
    }
    s
}

/// The JSON line of one frame: offset, header, and `values` (typed JSON nodes, ids shared
/// across the pickles of the payload), `binary`/`raw` (hex), `dead` (the reason) or `refused`.
fn frame_line(frame: &Frame, policy: &Policy, limits: Limits) -> (String, bool) {
    let head = format!(
        "{{\"offset\":{},\"header\":{}",
        frame.offset,
        header_json(&frame.header)
    );
    let (body, ok) = match frame.decode(policy, limits) {
        Ok(Content::Values(doc)) => {
            let text = picklewarden::json::to_typed_json(&doc);
            let prefix = format!(
                "{{\"format\":\"{}\",\"values\":",
                picklewarden::json::FORMAT
            );
            let values = text
                .strip_prefix(prefix.as_str())
                .and_then(|t| t.strip_suffix('}'))
                .map_or_else(|| "[]".to_owned(), str::to_owned);
            (format!("\"values\":{values}"), true)
        }
        Ok(Content::Binary(b)) => (format!("\"binary\":{{\"hex\":\"{}\"}}", hex(b)), true),
        Ok(Content::Raw(b)) => (format!("\"raw\":{{\"hex\":\"{}\"}}", hex(b)), true),
        Ok(Content::Dead(reason)) => (
            format!(
                "\"dead\":{{\"reason\":{}}}",
                serde_json::Value::String(reason.into_owned())
            ),
            true,
        ),
        Err(e) => (format!("\"refused\":{}", refused_json(&e)), false),
    };
    (format!("{head},{body}}}\n"), ok)
}

/// The first line a Mitogen child writes on its stdout (`mitogen/parent.py`'s first stage).
const HANDSHAKE_START: &[u8] = b"MITO000\n";

/// How passing a child's bootstrap handshake ended ([`pass_handshake`]).
pub(crate) enum HandshakeEnd {
    /// `MITO002\n` was passed on: the handshake's length and the framed bytes that came after
    /// it in the same read.
    Done(u64, Vec<u8>),
    /// The input ended first (what came of the handshake was passed on).
    Ended,
    /// More than the bound came before `MITO002\n`; the audit event is written and nothing
    /// past the bound was passed on.
    TooLong,
}

/// Passes a Mitogen child's bootstrap handshake (the lines up to and including `MITO002\n`)
/// from `input` to `out` unchanged, at most `max` bytes of it: `head` (bytes already read
/// from `input`) first, then reads. Every byte read is also written to `tap`, as received.
pub(crate) fn pass_handshake(
    input: &mut dyn Read,
    out: &mut dyn Write,
    mut tap: Option<&mut dyn Write>,
    max: usize,
    head: &[u8],
) -> io::Result<HandshakeEnd> {
    let mut hs = Handshake::default();
    let mut buf = vec![0u8; 1 << 16];
    let mut total = 0u64;
    let mut first = Some(head).filter(|h| !h.is_empty());
    loop {
        let piece = match first.take() {
            Some(h) => h,
            None => match input.read(&mut buf) {
                Ok(0) => return Ok(HandshakeEnd::Ended),
                Ok(n) => {
                    let piece = buf.get(..n).unwrap_or_default();
                    if let Some(t) = tap.as_deref_mut() {
                        t.write_all(piece)?;
                    }
                    piece
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            },
        };
        match hs.feed(piece, max) {
            Step::Pending => {
                out.write_all(piece)?;
                out.flush()?;
                total += piece.len() as u64;
            }
            Step::Done(k) => {
                let (text, rest) = piece.split_at(k.min(piece.len()));
                out.write_all(text)?;
                out.flush()?;
                return Ok(HandshakeEnd::Done(total + text.len() as u64, rest.to_vec()));
            }
            Step::TooLong => {
                tracing::warn!(
                    target: "picklewarden::audit",
                    event = "mitogen_bootstrap_too_long",
                    max,
                    "more than the bound before MITO002"
                );
                return Ok(HandshakeEnd::TooLong);
            }
        }
    }
}

/// `decode --mitogen`: one JSON line per frame of the input. A payload refusal is written in
/// place of the values and decoding goes on with the next frame; a framing error (bad enc,
/// oversized length, truncated frame) is written as a line with `offset` and `refused` only
/// and ends the output. An input that starts with a child's bootstrap handshake
/// (`MITO000\n`, as `guard --capture` saves the child's stdout in `up.bin`) has the
/// handshake, up to and including `MITO002\n`, passed over first (at most
/// [`DEFAULT_MAX_BOOTSTRAP_BYTES`]); offsets stay absolute in the input. Returns whether
/// every frame was accepted.
pub(crate) fn decode_frames(
    common: &Common,
    default_policy: &str,
    max_message_bytes: u64,
) -> Result<bool, Fatal> {
    let policy = common.policy_or(default_policy)?;
    let limits = common.limits(&policy)?;
    let path = common.input()?;
    let mut input: Box<dyn Read> = if path.as_os_str() == "-" {
        Box::new(io::stdin().lock())
    } else {
        Box::new(
            std::fs::File::open(path)
                .map_err(|e| Fatal(format!("cannot read {}: {e}", path.display())))?,
        )
    };
    let mut reader = FrameReader::with_max_message_bytes(max_message_bytes);
    let mut out = io::stdout().lock();
    let mut all_ok = true;
    let mut buf = vec![0u8; 1 << 16];
    // The first bytes, until there are enough to tell a handshake from a frame header.
    let mut head: Option<Vec<u8>> = Some(Vec::new());
    let mut handshake: Option<(Handshake, u64)> = None;
    let write = |out: &mut io::StdoutLock<'_>, line: &str| -> Result<bool, Fatal> {
        match out.write_all(line.as_bytes()) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(false),
            Err(e) => Err(Fatal(format!("cannot write output: {e}"))),
        }
    };
    loop {
        let n = match input.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Fatal(format!("cannot read input: {e}"))),
        };
        let mut piece = buf.get(..n).unwrap_or_default();
        let first;
        if let Some(mut h) = head.take() {
            h.extend_from_slice(piece);
            if h.len() < HANDSHAKE_START.len() && HANDSHAKE_START.starts_with(&h) {
                head = Some(h);
                continue;
            }
            if h.starts_with(HANDSHAKE_START) {
                handshake = Some((Handshake::default(), 0));
            }
            first = h;
            piece = &first;
        }
        if let Some((hs, len)) = handshake.as_mut() {
            match hs.feed(piece, DEFAULT_MAX_BOOTSTRAP_BYTES) {
                Step::Pending => {
                    *len += piece.len() as u64;
                    continue;
                }
                Step::Done(k) => {
                    *len += k as u64;
                    reader =
                        FrameReader::with_max_message_bytes(max_message_bytes).starting_at(*len);
                    piece = piece.get(k..).unwrap_or_default();
                    handshake = None;
                }
                Step::TooLong => {
                    let reason = format!(
                        "no MITO002 line in the first {DEFAULT_MAX_BOOTSTRAP_BYTES} bytes of the \
                         bootstrap handshake"
                    );
                    write(
                        &mut out,
                        &handshake_refusal("bootstrap_too_long", "limit_exceeded", &reason),
                    )?;
                    return Ok(false);
                }
            }
        }
        reader.push(piece);
        loop {
            match reader.next_frame() {
                Ok(Some(frame)) => {
                    let (line, ok) = frame_line(&frame, &policy, limits);
                    all_ok &= ok;
                    if !write(&mut out, &line)? {
                        return Ok(all_ok);
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    let line = format!(
                        "{{\"offset\":{},\"refused\":{}}}\n",
                        e.offset(),
                        refused_json(&e)
                    );
                    write(&mut out, &line)?;
                    return Ok(false);
                }
            }
        }
    }
    if let Some(h) = head {
        // Shorter than a handshake's first line: too short for a frame header too, which
        // `finish` reports.
        reader.push(&h);
    }
    if handshake.is_some() {
        let reason = "the input ends inside the bootstrap handshake (no MITO002 line)";
        write(
            &mut out,
            &handshake_refusal("bootstrap_truncated", "truncated", reason),
        )?;
        return Ok(false);
    }
    if let Err(e) = reader.finish() {
        let line = format!(
            "{{\"offset\":{},\"refused\":{}}}\n",
            e.offset(),
            refused_json(&e)
        );
        write(&mut out, &line)?;
        return Ok(false);
    }
    let _ = out.flush();
    Ok(all_ok)
}

/// Relays frames from `input` to `output`, checking each: the loop of `filter` and of the
/// child-to-parent direction of `guard`. `reader` may already hold bytes. Returns `Ok(true)`
/// at a clean end of input, `Ok(false)` when the stream was cut off (a refusal with
/// `--on-reject disconnect`, one whose [`Disposition`] is `Disconnect` with `fail-call`, or a
/// framing error, which is always fatal since frame boundaries are lost).
pub(crate) fn relay_frames(
    checker: &mut Checker,
    on_reject: OnReject,
    reader: &mut FrameReader,
    input: &mut dyn Read,
    output: &mut dyn Write,
    mut tap: Option<&mut dyn Write>,
) -> io::Result<bool> {
    let mut buf = vec![0u8; 1 << 16];
    loop {
        loop {
            match reader.next_frame() {
                Ok(Some(frame)) => match checker.check(&frame) {
                    Ok(rewritten) => {
                        output.write_all(rewritten.as_deref().unwrap_or(frame.as_bytes()))?;
                        output.flush()?;
                    }
                    Err(e) => {
                        let action = match (on_reject, e.disposition()) {
                            (OnReject::Drop, _) => "drop",
                            (OnReject::FailCall, Disposition::FailCall) => "fail_call",
                            _ => "disconnect",
                        };
                        checker.audit(Some(&frame.header), frame.offset, &e, action);
                        match action {
                            "drop" => {}
                            "fail_call" => {
                                let notices = refusal_notices(&frame.header, &notice_reason(&e));
                                if !notices.is_empty() {
                                    output.write_all(&notices)?;
                                    output.flush()?;
                                }
                            }
                            _ => return Ok(false),
                        }
                    }
                },
                Ok(None) => break,
                Err(e) => {
                    checker.audit(None, e.offset(), &e, "disconnect");
                    return Ok(false);
                }
            }
        }
        let n = match input.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let piece = buf.get(..n).unwrap_or_default();
        if let Some(t) = tap.as_deref_mut() {
            t.write_all(piece)?;
        }
        reader.push(piece);
    }
    if let Err(e) = reader.finish() {
        checker.audit(None, e.offset(), &e, "disconnect");
        return Ok(false);
    }
    Ok(true)
}

/// The reason a dead notice gives: the kind (the limit's name for a limit), then the refusal
/// as the audit event words it.
fn notice_reason(e: &FrameError) -> String {
    format!(
        "{} ({}): {e}",
        e.kind_name(),
        e.limit_name().unwrap_or(e.category().name())
    )
}
