//! The value of a `datetime`-family record as CPython compares and hashes it as a dict key or
//! set item ([`crate::policy::RecordKey::Datetime`]).
//!
//! The records are the calls CPython's `datetime` module writes (`Lib/datetime.py`
//! `__reduce__`/`__getinitargs__`, `Modules/_datetimemodule.c`): `date(state)` (4 bytes: year
//! high, year low, month, day), `time(state[, tzinfo])` (6 bytes: hour, whose bit 0x80 is
//! `fold`, minute, second, 3 bytes of microseconds), `datetime(state[, tzinfo])` (10 bytes:
//! year 2, month (bit 0x80: `fold`), day, hour, minute, second, microseconds 3),
//! `timedelta(days, seconds, microseconds)` and `timezone(offset[, name])`. Equality, as
//! CPython's rich comparisons define it:
//! - a date equals a date of the same day (never a datetime: `date == datetime` is False);
//! - naive datetimes and times compare their fields, `fold` ignored; aware ones (a `timezone`
//!   record as tzinfo) compare the instant, UTC offset subtracted; naive never equals aware;
//! - a timedelta equals a timedelta of the same total microseconds; a timezone equals a
//!   timezone of the same offset (its name is ignored).
//!
//! A record whose value cannot be read this way (a state CPython would reject, a tzinfo that
//! is not a `timezone(timedelta)` record) has no key: it is refused as unhashable rather than
//! compared by identity, which could count two equal values as two keys. Nothing here
//! recurses: a tzinfo is read only as a `timezone` record, and its offset only as a
//! `timedelta` record.

use crate::value::{Arena, NodeId, Object, Value};

/// The value a datetime-family record is compared as; equal values are equal keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum DatetimeKey {
    /// A date: days since 0001-01-01.
    Date(i64),
    /// A naive time: microseconds since midnight.
    NaiveTime(i64),
    /// An aware time: microseconds since midnight, UTC offset subtracted.
    AwareTime(i64),
    /// A naive datetime: microseconds since 0001-01-01T00:00.
    NaiveDatetime(i128),
    /// An aware datetime: the instant, microseconds since 0001-01-01T00:00 UTC.
    AwareDatetime(i128),
    /// A timedelta: total microseconds.
    Timedelta(i128),
    /// A timezone: its offset in microseconds.
    Timezone(i128),
}

const MICROS_PER_DAY: i128 = 86_400_000_000;

/// Days from 0001-01-01 to `y-m-d` (proleptic Gregorian), `None` for a day that does not
/// exist (CPython's constructor refuses it).
fn days(y: i64, m: i64, d: i64) -> Option<i64> {
    if !(1..=9999).contains(&y) || !(1..=12).contains(&m) || d < 1 {
        return None;
    }
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let month_days = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    let before: i64 = month_days.iter().take((m - 1) as usize).sum();
    if d > *month_days.get((m - 1) as usize)? {
        return None;
    }
    let py = y - 1;
    Some(py * 365 + py / 4 - py / 100 + py / 400 + before + d - 1)
}

/// Microseconds of `h:m:s.us`, `None` out of range.
fn clock(h: u8, m: u8, s: u8, us: i64) -> Option<i64> {
    if h > 23 || m > 59 || s > 59 || !(0..1_000_000).contains(&us) {
        return None;
    }
    Some(((i64::from(h) * 60 + i64::from(m)) * 60 + i64::from(s)) * 1_000_000 + us)
}

fn int_arg(arena: &Arena<'_>, id: NodeId) -> Option<i64> {
    match arena.get(id)? {
        Value::Int(i) => Some(i),
        Value::Bool(b) => Some(i64::from(b)),
        _ => None,
    }
}

/// The positional arguments of a record.
fn args<'x>(arena: &'x Arena<'_>, o: &Object) -> Option<&'x [NodeId]> {
    match arena.get(o.args)? {
        Value::Tuple(items) => Some(items),
        _ => None,
    }
}

/// The `(module, name)` of a record's callable, as CPython resolves it.
fn callable<'x>(arena: &'x Arena<'_>, o: &Object) -> Option<(&'x str, &'x str)> {
    match arena.get(o.callable)? {
        Value::Global(g) => Some(g.python3_name()),
        _ => None,
    }
}

/// A state argument of exactly `N` bytes.
fn state<const N: usize>(arena: &Arena<'_>, id: NodeId) -> Option<[u8; N]> {
    let Value::Bytes(b) = arena.get(id)? else {
        return None;
    };
    if b.len() != N {
        return None;
    }
    let mut out = [0u8; N];
    let mut at = 0usize;
    b.for_each_chunk(|piece| {
        for &x in piece {
            if let Some(slot) = out.get_mut(at) {
                *slot = x;
            }
            at += 1;
        }
    });
    Some(out)
}

/// The UTC offset in microseconds of a tzinfo argument: `None` (absent, naive) as `Ok(None)`;
/// a `timezone(timedelta(...)[, name])` record as its offset; anything else `Err`.
fn offset(arena: &Arena<'_>, tz: Option<&NodeId>) -> Result<Option<i128>, ()> {
    let Some(&tz) = tz else {
        return Ok(None);
    };
    match arena.get(tz) {
        Some(Value::None) => Ok(None),
        Some(Value::Object(o)) if callable(arena, o) == Some(("datetime", "timezone")) => {
            timezone(arena, o).map(Some).ok_or(())
        }
        _ => Err(()),
    }
}

/// The offset of a `timezone(offset[, name])` record whose offset is a timedelta record.
fn timezone(arena: &Arena<'_>, o: &Object) -> Option<i128> {
    let [off, rest @ ..] = args(arena, o)? else {
        return None;
    };
    if rest.len() > 1 {
        return None;
    }
    match arena.get(*off)? {
        Value::Object(delta) if callable(arena, delta) == Some(("datetime", "timedelta")) => {
            timedelta(arena, delta)
        }
        _ => None,
    }
}

/// The total microseconds of a `timedelta(days, seconds, microseconds)` record.
fn timedelta(arena: &Arena<'_>, o: &Object) -> Option<i128> {
    let [d, s, us] = args(arena, o)? else {
        return None;
    };
    Some(
        i128::from(int_arg(arena, *d)?) * MICROS_PER_DAY
            + i128::from(int_arg(arena, *s)?) * 1_000_000
            + i128::from(int_arg(arena, *us)?),
    )
}

/// The key of a datetime-family record (module docs); `None` when it has none.
pub(crate) fn key_of(arena: &Arena<'_>, o: &Object) -> Option<DatetimeKey> {
    let (module, name) = callable(arena, o)?;
    if module != "datetime" {
        return None;
    }
    let a = args(arena, o)?;
    match (name, a) {
        ("date", [s]) => {
            let [yh, yl, m, d] = state::<4>(arena, *s)?;
            let y = i64::from(yh) * 256 + i64::from(yl);
            Some(DatetimeKey::Date(days(y, i64::from(m), i64::from(d))?))
        }
        ("time", [s, rest @ ..]) if rest.len() <= 1 => {
            let [h, mi, sec, u0, u1, u2] = state::<6>(arena, *s)?;
            let us = (i64::from(u0) << 16) | (i64::from(u1) << 8) | i64::from(u2);
            let t = clock(h & 0x7f, mi, sec, us)?;
            match offset(arena, rest.first()).ok()? {
                None => Some(DatetimeKey::NaiveTime(t)),
                Some(off) => Some(DatetimeKey::AwareTime(
                    i64::try_from(i128::from(t) - off).ok()?,
                )),
            }
        }
        ("datetime", [s, rest @ ..]) if rest.len() <= 1 => {
            let [yh, yl, m, d, h, mi, sec, u0, u1, u2] = state::<10>(arena, *s)?;
            let y = i64::from(yh) * 256 + i64::from(yl);
            let day = days(y, i64::from(m & 0x7f), i64::from(d))?;
            let us = (i64::from(u0) << 16) | (i64::from(u1) << 8) | i64::from(u2);
            let t = i128::from(day) * MICROS_PER_DAY + i128::from(clock(h, mi, sec, us)?);
            match offset(arena, rest.first()).ok()? {
                None => Some(DatetimeKey::NaiveDatetime(t)),
                Some(off) => Some(DatetimeKey::AwareDatetime(t - off)),
            }
        }
        ("timedelta", _) => timedelta(arena, o).map(DatetimeKey::Timedelta),
        ("timezone", _) => timezone(arena, o).map(DatetimeKey::Timezone),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::days;

    /// Days from 0001-01-01 as Python's `date.toordinal() - 1`.
    #[test]
    fn days_are_pythons_ordinals() {
        // python3 -c "import datetime as d; print([d.date(*t).toordinal() - 1 for t in ...])"
        assert_eq!(days(1, 1, 1), Some(0));
        assert_eq!(days(2000, 2, 29), Some(730_178));
        assert_eq!(days(1900, 2, 29), None);
        assert_eq!(days(9999, 12, 31), Some(3_652_058));
        assert_eq!(days(2024, 13, 1), None);
        assert_eq!(days(2024, 4, 31), None);
    }
}
