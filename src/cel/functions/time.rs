//! Durations and timestamps: conversions, arithmetic and accessors, with
//! Go's parsing and formatting rules (cel-go uses Go's time package).

use super::{no_overload, FnDecl, Lib, LiteralError};
use crate::cel::error::{EvalError, EvalResult};
use crate::cel::program::Ctx;
use crate::cel::value::{Duration, Timestamp, Value};
use chrono::{DateTime, Datelike, FixedOffset, NaiveDateTime, Offset, Timelike};

pub const DECLS: &[FnDecl] = &[
    FnDecl::global("duration", 1, Lib::Core, to_duration).validated(check_duration_literal),
    FnDecl::global("timestamp", 1, Lib::Core, to_timestamp).validated(check_timestamp_literal),
    FnDecl::new(
        "getFullYear",
        super::Style::Member,
        super::Arity::Range(1, 2),
        Lib::Core,
        full_year,
    ),
    FnDecl::new(
        "getMonth",
        super::Style::Member,
        super::Arity::Range(1, 2),
        Lib::Core,
        month,
    ),
    FnDecl::new(
        "getDayOfYear",
        super::Style::Member,
        super::Arity::Range(1, 2),
        Lib::Core,
        day_of_year,
    ),
    FnDecl::new(
        "getDayOfMonth",
        super::Style::Member,
        super::Arity::Range(1, 2),
        Lib::Core,
        day_of_month,
    ),
    FnDecl::new(
        "getDate",
        super::Style::Member,
        super::Arity::Range(1, 2),
        Lib::Core,
        date,
    ),
    FnDecl::new(
        "getDayOfWeek",
        super::Style::Member,
        super::Arity::Range(1, 2),
        Lib::Core,
        day_of_week,
    ),
    FnDecl::new(
        "getHours",
        super::Style::Member,
        super::Arity::Range(1, 2),
        Lib::Core,
        hours,
    ),
    FnDecl::new(
        "getMinutes",
        super::Style::Member,
        super::Arity::Range(1, 2),
        Lib::Core,
        minutes,
    ),
    FnDecl::new(
        "getSeconds",
        super::Style::Member,
        super::Arity::Range(1, 2),
        Lib::Core,
        seconds,
    ),
    FnDecl::new(
        "getMilliseconds",
        super::Style::Member,
        super::Arity::Range(1, 2),
        Lib::Core,
        millis,
    ),
];

/// cel-go's duration literal validator, in its words.
fn check_duration_literal(_: usize, s: &str) -> Result<(), LiteralError> {
    parse_duration(s)
        .map(|_| ())
        .map_err(|_| LiteralError::Duration)
}

fn check_timestamp_literal(_: usize, s: &str) -> Result<(), LiteralError> {
    parse_timestamp(s)
        .map(|_| ())
        .map_err(|_| LiteralError::Timestamp)
}

fn to_duration<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    match &a[0] {
        Value::Duration(_) => Ok(a[0].clone()),
        Value::String(s) => parse_duration(s.as_str())
            .map(Value::Duration)
            .map_err(|_| EvalError::conversion("string", "google.protobuf.Duration")),
        Value::Int(i) => Ok(Value::Duration(Duration(*i))),
        _ => no_overload("duration", a),
    }
}

fn to_timestamp<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    match &a[0] {
        Value::Timestamp(_) => Ok(a[0].clone()),
        Value::String(s) => parse_timestamp(s.as_str())
            .map(Value::Timestamp)
            .map_err(|_| EvalError::conversion("string", "google.protobuf.Timestamp")),
        Value::Int(i) => Ok(Value::Timestamp(
            Timestamp::new(*i, 0).map_err(|_| EvalError::timestamp_overflow())?,
        )),
        _ => no_overload("timestamp", a),
    }
}

pub fn add_duration(t: Timestamp, d: i64) -> EvalResult<Timestamp> {
    Timestamp::from_total_nanos(t.total_nanos() + d as i128)
        .map(|sum| sum.at_offset(t.offset))
        .map_err(|_| EvalError::timestamp_overflow())
}

/// Go's time.ParseDuration.
pub fn parse_duration(s: &str) -> EvalResult<Duration> {
    let bad = || EvalError::new(format!("invalid duration: {s:?}"));
    let (neg, mut rest) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if rest == "0" {
        return Ok(Duration(0));
    }
    if rest.is_empty() {
        return Err(bad());
    }
    let mut total: i128 = 0;
    while !rest.is_empty() {
        let int_len = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let (int_part, after) = rest.split_at(int_len);
        let (frac_part, after) = match after.strip_prefix('.') {
            Some(f) => {
                let n = f.find(|c: char| !c.is_ascii_digit()).unwrap_or(f.len());
                (&f[..n], &f[n..])
            }
            None => ("", after),
        };
        if int_part.is_empty() && frac_part.is_empty() {
            return Err(bad());
        }
        let unit_len = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_len);
        let scale: i128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return Err(bad()),
        };
        let whole: i128 = if int_part.is_empty() {
            0
        } else {
            int_part.parse().map_err(|_| bad())?
        };
        total = total
            .checked_add(whole.checked_mul(scale).ok_or_else(bad)?)
            .ok_or_else(bad)?;
        let mut frac_scale = scale;
        for d in frac_part.bytes().take(30) {
            frac_scale /= 10;
            total += (d - b'0') as i128 * frac_scale;
        }
        if total > i64::MAX as i128 + 1 {
            return Err(bad());
        }
        rest = after;
    }
    let total = if neg { -total } else { total };
    i64::try_from(total).map(Duration).map_err(|_| bad())
}

/// RFC 3339, as Go's time.Parse(time.RFC3339, s).
pub fn parse_timestamp(s: &str) -> EvalResult<Timestamp> {
    let dt = DateTime::parse_from_rfc3339(s)
        .map_err(|e| EvalError::new(format!("invalid timestamp {s:?}: {e}")))?;
    // Go requires an upper-case T and Z; chrono is more lenient.
    if s.len() < 20 || s.as_bytes()[10] != b'T' || s.ends_with('z') {
        return Err(EvalError::new(format!("invalid timestamp {s:?}")));
    }
    Ok(Timestamp::new(dt.timestamp(), dt.timestamp_subsec_nanos())?
        .at_offset(dt.offset().local_minus_utc()))
}

/// `2009-02-13T23:31:30.5Z`, `2024-01-01T10:00:00+02:00`: Go's
/// RFC3339Nano at the timestamp's offset, trailing zeros dropped.
pub fn format_timestamp(t: Timestamp) -> String {
    let (Some(dt), Some(offset)) = (
        DateTime::from_timestamp(t.secs, t.nanos),
        FixedOffset::east_opt(t.offset),
    ) else {
        return format!("{}s", t.secs);
    };
    let base = dt.with_timezone(&offset).format("%Y-%m-%dT%H:%M:%S");
    let frac = match t.nanos {
        0 => String::new(),
        n => format!(".{}", format!("{n:09}").trim_end_matches('0')),
    };
    let zone = match t.offset {
        0 => "Z".to_string(),
        o => {
            let sign = if o < 0 { '-' } else { '+' };
            let m = o.unsigned_abs() / 60;
            format!("{sign}{:02}:{:02}", m / 60, m % 60)
        }
    };
    format!("{base}{frac}{zone}")
}

/// Go's `time.Time.String()`, as `%v` prints a timestamp:
/// `2024-01-01 00:00:00 +0000 UTC`, or with the offset it was parsed
/// with as its zone's name, `2024-01-01 01:00:00.5 +0100 +0100`.
pub fn go_time(t: Timestamp) -> String {
    let rfc = format_timestamp(t);
    let Some(end) = rfc
        .find(['Z', '+'])
        .or_else(|| rfc.rfind('-').filter(|&i| i > 10))
    else {
        return rfc;
    };
    let m = t.offset.unsigned_abs() / 60;
    let sign = if t.offset < 0 { '-' } else { '+' };
    let offset = format!("{sign}{:02}{:02}", m / 60, m % 60);
    let zone = if t.offset == 0 { "UTC" } else { &offset };
    format!("{} {offset} {zone}", rfc[..end].replacen('T', " ", 1))
}

/// Go's `time.Duration.String()`, as `%v` prints a duration: `1.5s`,
/// `1m0s`, `2h0m0.5s`, `1.2ms`, `0s`.
pub fn go_duration(d: Duration) -> String {
    /// `v / 10^prec` with the fraction's trailing zeros (and point) cut.
    fn frac(v: u64, prec: u32) -> String {
        let p = 10u64.pow(prec);
        match v % p {
            0 => (v / p).to_string(),
            f => {
                let digits = format!("{f:0width$}", width = prec as usize);
                format!("{}.{}", v / p, digits.trim_end_matches('0'))
            }
        }
    }
    let u = d.0.unsigned_abs();
    let sign = if d.0 < 0 { "-" } else { "" };
    let body = match u {
        0 => return "0s".into(),
        1..=999 => format!("{u}ns"),
        1_000..=999_999 => format!("{}µs", frac(u, 3)),
        1_000_000..=999_999_999 => format!("{}ms", frac(u, 6)),
        _ => {
            let (secs, nanos) = (u / 1_000_000_000, u % 1_000_000_000);
            let s = frac((secs % 60) * 1_000_000_000 + nanos, 9);
            match (secs / 3600, secs / 60 % 60) {
                (0, 0) => format!("{s}s"),
                (0, m) => format!("{m}m{s}s"),
                (h, m) => format!("{h}h{m}m{s}s"),
            }
        }
    };
    format!("{sign}{body}")
}

/// `3600s`, `1.5s`, `-0.000000001s`.
pub fn format_duration(d: Duration) -> String {
    let neg = d.0 < 0;
    let n = d.0.unsigned_abs();
    let (secs, nanos) = (n / 1_000_000_000, n % 1_000_000_000);
    let sign = if neg { "-" } else { "" };
    if nanos == 0 {
        return format!("{sign}{secs}s");
    }
    let frac = format!("{nanos:09}");
    format!("{sign}{secs}.{}s", frac.trim_end_matches('0'))
}

/// A time zone argument, as cel-go reads it: without a `:`, a name for
/// Go's `time.LoadLocation` (`UTC`, `America/New_York`); with one, an offset
/// `[+-]HH:MM`. Errors are Go's.
fn local_time(t: Timestamp, tz: Option<&str>) -> EvalResult<NaiveDateTime> {
    let utc = DateTime::from_timestamp(t.secs, t.nanos)
        .ok_or_else(|| EvalError::new("timestamp out of range"))?;
    // Without a time zone the getters read UTC, whatever the offset the
    // timestamp was written with (kube-apiserver v1.36 answers 22 for
    // `timestamp('2024-01-02T01:30:00+03:00').getHours()`).
    let offset = match tz {
        None => 0,
        Some(tz) if tz.contains(':') => parse_offset(tz)?,
        Some("" | "UTC") => 0,
        Some(name) => {
            let zone: chrono_tz::Tz = name
                .parse()
                .map_err(|_| EvalError::new(format!("unknown time zone {name}")))?;
            utc.with_timezone(&zone).offset().fix().local_minus_utc()
        }
    };
    let offset = FixedOffset::east_opt(offset)
        .ok_or_else(|| EvalError::new(format!("time zone offset out of range: {offset}s")))?;
    Ok(utc.with_timezone(&offset).naive_local())
}

/// Seconds east of UTC of `[+-]HH:MM`, as kube-apiserver's cel-go computes
/// them (with `strconv.Atoi` on both parts).
fn parse_offset(tz: &str) -> EvalResult<i32> {
    let (h, m) = tz.split_once(':').unwrap_or((tz, ""));
    let atoi = |s: &str| -> EvalResult<i64> {
        let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(EvalError::new(format!(
                "strconv.Atoi: parsing {}: invalid syntax",
                super::strings::go_quote(s)
            )));
        }
        s.parse().map_err(|_| {
            EvalError::new(format!(
                "strconv.Atoi: parsing {}: value out of range",
                super::strings::go_quote(s)
            ))
        })
    };
    // kube-apiserver v1.36's cel-go does not range-check the minutes
    // (`+01:75` is 2h15 east).
    let (hours, minutes) = (atoi(h)?, atoi(m)?);
    let total = if tz.starts_with('-') {
        hours * 60 - minutes
    } else {
        hours * 60 + minutes
    };
    i32::try_from(total * 60)
        .map_err(|_| EvalError::new(format!("time zone offset out of range: {tz}")))
}

fn timestamp_part<'a>(
    name: &str,
    a: &[Value<'a>],
    f: impl Fn(&NaiveDateTime) -> i64,
) -> EvalResult<Value<'a>> {
    let t = match &a[0] {
        Value::Timestamp(t) => *t,
        _ => return no_overload(name, a),
    };
    let tz = match a.get(1) {
        None => None,
        Some(Value::String(s)) => Some(s.as_str()),
        Some(_) => return no_overload(name, a),
    };
    Ok(Value::Int(f(&local_time(t, tz)?)))
}

fn duration_part<'a>(name: &str, a: &[Value<'a>], unit: i64) -> EvalResult<Value<'a>> {
    match (&a[0], a.len()) {
        (Value::Duration(d), 1) => Ok(Value::Int(d.0 / unit)),
        _ => no_overload(name, a),
    }
}

fn full_year<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    timestamp_part("getFullYear", a, |t| t.year() as i64)
}
fn month<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    timestamp_part("getMonth", a, |t| t.month0() as i64)
}
fn day_of_year<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    timestamp_part("getDayOfYear", a, |t| t.ordinal0() as i64)
}
fn day_of_month<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    timestamp_part("getDayOfMonth", a, |t| t.day0() as i64)
}
fn date<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    timestamp_part("getDate", a, |t| t.day() as i64)
}
fn day_of_week<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    timestamp_part("getDayOfWeek", a, |t| {
        t.weekday().num_days_from_sunday() as i64
    })
}
fn hours<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    if matches!(a[0], Value::Duration(_)) {
        return duration_part("getHours", a, 3_600_000_000_000);
    }
    timestamp_part("getHours", a, |t| t.hour() as i64)
}
fn minutes<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    if matches!(a[0], Value::Duration(_)) {
        return duration_part("getMinutes", a, 60_000_000_000);
    }
    timestamp_part("getMinutes", a, |t| t.minute() as i64)
}
fn seconds<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    if matches!(a[0], Value::Duration(_)) {
        return duration_part("getSeconds", a, 1_000_000_000);
    }
    timestamp_part("getSeconds", a, |t| t.second() as i64)
}
fn millis<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    if matches!(a[0], Value::Duration(_)) {
        return duration_part("getMilliseconds", a, 1_000_000);
    }
    timestamp_part("getMilliseconds", a, |t| {
        (t.nanosecond() / 1_000_000) as i64
    })
}

#[cfg(test)]
#[path = "time_tests.rs"]
mod tests;
