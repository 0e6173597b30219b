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
    pub fn stream(self) -> DecodeOptions<'b> {
        self.pickles(Pickles::Stream)
    }

    /// One pickle or a stream.
    pub fn pickles(mut self, pickles: Pickles) -> DecodeOptions<'b> {
        self.pickles = pickles;
        self
    }

    /// Sets the deadline (an `Instant`), or sets or clears it (an `Option<Instant>`).
    pub fn deadline(mut self, at: impl Into<Option<Instant>>) -> DecodeOptions<'b> {
        self.deadline = at.into();
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

/// Scans `input` as one pickle under `policy` and its limits: every check a decode makes
/// that needs no values, building none (see [`crate::scan`](mod@crate::scan)). The scan's
/// counterpart of [`crate::decode`]; [`scan_with`] takes options.
///
/// ```
/// use picklewarden::{scan, Policy};
/// // pickle.dumps([1, "a"], protocol=2)
/// let report = scan(b"\x80\x02]q\x00(K\x01X\x01\x00\x00\x00aq\x01e.", &Policy::data());
/// assert!(report.result.is_ok());
/// assert_eq!((report.protocol, report.pickles), (2, 1));
/// ```
pub fn scan(input: &[u8], policy: &Policy) -> ScanReport {
    Scanner::new(input, policy).run()
}

/// Scans `input` under `policy` with `options` (validation without building values; see
/// [`crate::scan`](mod@crate::scan)). Buffers are counted, not read.
pub fn scan_with(input: &[u8], policy: &Policy, options: &DecodeOptions<'_>) -> ScanReport {
    Scanner::new(input, policy).options(options).run()
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
        d = d.deadline(options.deadline);
        if let Some(buffers) = &options.buffers {
            d = d.buffers(buffers.clone());
        }
        d
    }

    /// Decodes one pickle or a stream (`pickles`), as [`Decoder::decode`] or
    /// [`Decoder::decode_stream`], and also returns the scan pass's report: the globals named
    /// (up to the first refusal the scan finds), the opcode counts and the protocol. The scan
    /// runs once, as in `decode`.
    ///
    /// # Errors
    /// The first refusal of the scan or the build, as `decode` returns it. The report's own
    /// `result` is the scan's verdict alone.
    pub fn decode_and_report(self, pickles: Pickles) -> (Result<Document<'a>>, ScanReport) {
        #[allow(deprecated)]
        self.decode_with_report(pickles == Pickles::Stream)
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

    /// Also gives up once `at` has passed (an `Instant`, or an `Option<Instant>` where `None`
    /// is no deadline).
    pub fn deadline(mut self, at: impl Into<Option<Instant>>) -> OutputBound {
        self.deadline = at.into();
        self
    }
}

impl Default for OutputBound {
    fn default() -> OutputBound {
        OutputBound::NONE
    }
}

#[cfg(test)]
#[path = "options_test.rs"]
mod tests;
