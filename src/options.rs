//! [`DecodeOptions`]: the one set of options of a decode, a scan and a bounded output — the
//! limits, one pickle or a stream, a deadline, out-of-band buffers and trailing bytes — and
//! [`OutputBound`], the one bound of the writers ([`crate::json`], [`crate::repr`],
//! [`crate::canonical`]).

use std::time::Instant;

use crate::build::Decoder;
use crate::scan::{ScanReport, Scanner};
use crate::value::Document;
use crate::{Limits, Policy, Result};

/// One pickle, or several one after another.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Pickles {
    /// One pickle: the input ends at its STOP (unless [`DecodeOptions::allow_trailing`]).
    #[default]
    One,
    /// Pickles one after another sharing one memo, read to the end of the input (the form
    /// Mitogen and `pickle.Pickler` dumping several objects to one file write).
    Stream,
}

/// How to decode or scan: every entry point ([`decode_with`], [`scan_with`],
/// [`crate::from_slice_with`], [`Decoder::options`]) takes these.
///
/// `DecodeOptions::default()` is one pickle under the policy's own limits, no deadline, no
/// out-of-band buffers and no trailing bytes: what [`crate::decode`] does.
///
/// ```
/// use std::time::{Duration, Instant};
/// use picklewarden::{decode_with, DecodeOptions, Limits, Policy};
/// let mut limits = Limits::default();
/// limits.max_nesting_depth = 50;
/// let options = DecodeOptions::default()
///     .limits(limits)
///     .deadline(Some(Instant::now() + Duration::from_secs(1)));
/// // pickle.dumps([[]], protocol=2)
/// let doc = decode_with(b"\x80\x02]q\x00]q\x01a.", &Policy::data(), &options)?;
/// assert_eq!(doc.len(), 2);
/// # Ok::<(), picklewarden::Error>(())
/// ```
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct DecodeOptions<'b> {
    /// The limits; `None` for the policy's own ([`Policy::limits`]).
    pub limits: Option<Limits>,
    /// One pickle or a stream.
    pub pickles: Pickles,
    /// Refuse with [`ErrorKind::DeadlineExceeded`](crate::ErrorKind::DeadlineExceeded) once
    /// this instant has passed (see [`Decoder::deadline`] for how late the check can be).
    pub deadline: Option<Instant>,
    /// Out-of-band buffers for NEXT_BUFFER (protocol 5), as `pickle.loads(data,
    /// buffers=...)`; `None` refuses NEXT_BUFFER.
    pub buffers: Option<Vec<&'b [u8]>>,
    /// Allow bytes after the STOP of one pickle ([`Decoder::allow_trailing`]).
    pub allow_trailing: bool,
}

impl<'b> DecodeOptions<'b> {
    /// The defaults: one pickle under the policy's limits.
    pub fn new() -> DecodeOptions<'b> {
        DecodeOptions::default()
    }

    /// The defaults with `policy`'s limits written in (so [`DecodeOptions::effective_limits`]
    /// needs no policy).
    pub fn from_policy(policy: &Policy) -> DecodeOptions<'b> {
        DecodeOptions::default().limits(policy.limits)
    }

    /// Replaces the limits.
    pub fn limits(mut self, limits: Limits) -> DecodeOptions<'b> {
        self.limits = Some(limits);
        self
    }

    /// Reads a stream of pickles sharing one memo ([`Pickles::Stream`]).
    pub fn stream(mut self) -> DecodeOptions<'b> {
        self.pickles = Pickles::Stream;
        self
    }

    /// Sets or clears the deadline.
    pub fn deadline(mut self, at: Option<Instant>) -> DecodeOptions<'b> {
        self.deadline = at;
        self
    }

    /// Supplies out-of-band buffers.
    pub fn buffers(mut self, buffers: Vec<&'b [u8]>) -> DecodeOptions<'b> {
        self.buffers = Some(buffers);
        self
    }

    /// Allows (or refuses) bytes after the STOP of one pickle.
    pub fn allow_trailing(mut self, allow: bool) -> DecodeOptions<'b> {
        self.allow_trailing = allow;
        self
    }

    /// The limits in force under `policy`.
    pub fn effective_limits(&self, policy: &Policy) -> Limits {
        self.limits.unwrap_or(policy.limits)
    }

    /// The output bound that keeps this deadline, with room for `max_bytes` of output.
    pub fn output_bound(&self, max_bytes: usize) -> OutputBound {
        OutputBound {
            max_bytes,
            deadline: self.deadline,
        }
    }
}

/// Decodes `input` under `policy` with `options`.
///
/// # Errors
/// Any refusal, with its kind, offset and opcode.
pub fn decode_with<'a>(
    input: &'a [u8],
    policy: &Policy,
    options: &DecodeOptions<'a>,
) -> Result<Document<'a>> {
    let d = Decoder::new(input, policy).options(options);
    match options.pickles {
        Pickles::One => d.decode(),
        Pickles::Stream => d.decode_stream(),
    }
}

/// Scans `input` under `policy` with `options` (validation without building values; see
/// [`crate::scan`](mod@crate::scan)). Buffers are counted, not read.
pub fn scan_with(input: &[u8], policy: &Policy, options: &DecodeOptions<'_>) -> ScanReport {
    Scanner::new(input, policy)
        .limits(options.effective_limits(policy))
        .stream(options.pickles == Pickles::Stream)
        .deadline(options.deadline)
        .buffers(options.buffers.as_ref().map(Vec::len))
        .allow_trailing(options.allow_trailing)
        .run()
}

impl<'a, 'p> Decoder<'a, 'p> {
    /// Applies `options` (limits, deadline, buffers, trailing bytes). Whether the input is one
    /// pickle or a stream is chosen by the call that runs it ([`Decoder::decode`] or
    /// [`Decoder::decode_stream`]); [`decode_with`] follows [`DecodeOptions::pickles`].
    pub fn options(self, options: &DecodeOptions<'a>) -> Decoder<'a, 'p> {
        let mut d = self.allow_trailing(options.allow_trailing);
        if let Some(limits) = options.limits {
            d = d.limits(limits);
        }
        if let Some(at) = options.deadline {
            d = d.deadline(at);
        }
        if let Some(buffers) = &options.buffers {
            d = d.buffers(buffers.clone());
        }
        d
    }
}

/// The bound of an output: the writers give up past `max_bytes` of text (by at most one
/// scalar value) or once `deadline` has passed, so a caller that must bound its memory and
/// time (the service) never holds more. [`OutputBound::NONE`] bounds nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct OutputBound {
    /// The most bytes of output.
    pub max_bytes: usize,
    /// When to give up.
    pub deadline: Option<Instant>,
}

impl OutputBound {
    /// No bound.
    pub const NONE: OutputBound = OutputBound {
        max_bytes: usize::MAX,
        deadline: None,
    };

    /// At most `max_bytes` of output, no deadline.
    pub fn bytes(max_bytes: usize) -> OutputBound {
        OutputBound {
            max_bytes,
            deadline: None,
        }
    }

    /// Also gives up once `at` has passed.
    pub fn deadline(mut self, at: Option<Instant>) -> OutputBound {
        self.deadline = at;
        self
    }
}

impl Default for OutputBound {
    fn default() -> OutputBound {
        OutputBound::NONE
    }
}
