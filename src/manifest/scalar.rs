//! Scalar resolution, as `kubectl` does it.
//!
//! `kubectl` turns YAML into JSON with `sigs.k8s.io/yaml`, which decodes with
//! go-yaml v2 into `interface{}` values and then marshals them as JSON. The
//! rules below reproduce that pipeline for untyped (unstructured) objects:
//!
//! * Only plain (unquoted) scalars are resolved; quoted, literal and folded
//!   scalars are always strings.
//! * `null`, `Null`, `NULL`, `~` and the empty scalar are null.
//! * YAML 1.1 booleans: `true/True/TRUE`, `false/False/FALSE`, and also
//!   `yes/Yes/YES`, `no/No/NO`, `on/On/ON`, `off/Off/OFF`, `y/Y`, `n/N`.
//!   `kubectl apply` sends `enabled: yes` as `true`, so a policy must see
//!   `true` too.
//! * Integers as Go's `strconv.ParseInt(s, 0, 64)` reads them after removing
//!   `_`: decimal, `0x` hex, `0o` and leading-`0` octal, `0b` binary, with an
//!   optional sign; values above `i64::MAX` that fit `u64` stay exact.
//! * Floats: `1.5`, `.5`, `1e3`, `-2.5E-3` and `.inf`/`.nan` spellings.
//!   JSON has no infinity or NaN, and `kubectl` fails on them, so they are an
//!   error here too. A float with an integral value (`3.0`, `1e3`) becomes an
//!   integer, because Go's JSON encoder writes `3` for it and the API server
//!   then reads an integer.
//! * Timestamps (`2024-01-01`) stay strings (go-yaml keeps them as text when
//!   decoding into `interface{}`).
//! * Everything else is a string.
//!
//! Core-schema tags (`!!str`, `!!int`, `!!float`, `!!bool`, `!!null`,
//! `!!binary`) force a type; other tags on a scalar leave its text as a
//! string, as go-yaml does.

use serde_json::{Number, Value};

/// The result of resolving one scalar, before it becomes JSON.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Resolved<'a> {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Float(f64),
    Str(std::borrow::Cow<'a, str>),
    /// The plain key `<<`.
    Merge,
}

/// How a scalar was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Style {
    Plain,
    Quoted,
}

/// A reason a scalar could not be turned into JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ScalarError {
    /// `.inf` or `.nan`, which JSON cannot hold.
    NotFinite(String),
    /// A core tag that does not fit the text, such as `!!int abc`.
    TagMismatch { tag: String, text: String },
    /// `!!binary` text that is not base64.
    BadBinary,
}

impl std::fmt::Display for ScalarError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScalarError::NotFinite(text) => write!(
                f,
                "`{text}` is a YAML float that JSON cannot represent (Kubernetes objects are JSON); quote it if you mean a string"
            ),
            ScalarError::TagMismatch { tag, text } => {
                write!(f, "cannot read `{text}` as !!{tag}")
            }
            ScalarError::BadBinary => write!(f, "!!binary value is not valid base64"),
        }
    }
}

/// The core-schema tag of a scalar, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CoreTag {
    Str,
    Int,
    Float,
    Bool,
    Null,
    Binary,
    /// A tag that leaves the text as a string (custom tags, `!!timestamp`...).
    Other,
}

impl CoreTag {
    pub(crate) fn from_parts(handle: &str, suffix: &str) -> CoreTag {
        if handle != "tag:yaml.org,2002:" {
            return CoreTag::Other;
        }
        match suffix {
            "str" => CoreTag::Str,
            "int" => CoreTag::Int,
            "float" => CoreTag::Float,
            "bool" => CoreTag::Bool,
            "null" => CoreTag::Null,
            "binary" => CoreTag::Binary,
            _ => CoreTag::Other,
        }
    }
}

/// Resolves a scalar's text to a typed value.
pub(crate) fn resolve<'a>(
    text: std::borrow::Cow<'a, str>,
    style: Style,
    tag: Option<CoreTag>,
) -> Result<Resolved<'a>, ScalarError> {
    match tag {
        None => {
            if style == Style::Quoted {
                return Ok(Resolved::Str(text));
            }
            Ok(resolve_plain(text))
        }
        Some(CoreTag::Str) | Some(CoreTag::Other) => Ok(Resolved::Str(text)),
        Some(CoreTag::Binary) => {
            use base64::Engine as _;
            let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(compact.as_bytes())
                .map_err(|_| ScalarError::BadBinary)?;
            Ok(Resolved::Str(std::borrow::Cow::Owned(
                String::from_utf8_lossy(&bytes).into_owned(),
            )))
        }
        Some(want) => {
            let raw = text.clone().into_owned();
            let got = resolve_plain(text);
            let ok = matches!(
                (&got, want),
                (Resolved::Int(_) | Resolved::Uint(_), CoreTag::Int)
                    | (Resolved::Float(_), CoreTag::Float)
                    | (Resolved::Bool(_), CoreTag::Bool)
                    | (Resolved::Null, CoreTag::Null)
            );
            if ok {
                return Ok(got);
            }
            // !!float accepts an integer.
            if want == CoreTag::Float {
                match got {
                    Resolved::Int(i) => return Ok(Resolved::Float(i as f64)),
                    Resolved::Uint(u) => return Ok(Resolved::Float(u as f64)),
                    _ => {}
                }
            }
            let tag = match want {
                CoreTag::Int => "int",
                CoreTag::Float => "float",
                CoreTag::Bool => "bool",
                _ => "null",
            };
            Err(ScalarError::TagMismatch {
                tag: tag.to_string(),
                text: raw,
            })
        }
    }
}

/// Resolves a plain scalar as go-yaml v2 does.
pub(crate) fn resolve_plain(text: std::borrow::Cow<'_, str>) -> Resolved<'_> {
    let s: &str = &text;
    let Some(&first) = s.as_bytes().first() else {
        return Resolved::Null;
    };
    match first {
        b'y' | b'Y' | b'n' | b'N' | b't' | b'T' | b'f' | b'F' | b'o' | b'O' | b'~' => match s {
            "y" | "Y" | "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
                Resolved::Bool(true)
            }
            "n" | "N" | "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off"
            | "OFF" => Resolved::Bool(false),
            "~" | "null" | "Null" | "NULL" => Resolved::Null,
            _ => Resolved::Str(text),
        },
        b'.' => match s {
            ".nan" | ".NaN" | ".NAN" => Resolved::Float(f64::NAN),
            ".inf" | ".Inf" | ".INF" => Resolved::Float(f64::INFINITY),
            _ => match parse_go_float(s) {
                Some(f) => Resolved::Float(f),
                None => Resolved::Str(text),
            },
        },
        b'<' if s == "<<" => Resolved::Merge,
        b'+' | b'-' | b'0'..=b'9' => {
            match s {
                "+.inf" | "+.Inf" | "+.INF" => return Resolved::Float(f64::INFINITY),
                "-.inf" | "-.Inf" | "-.INF" => return Resolved::Float(f64::NEG_INFINITY),
                _ => {}
            }
            let plain: std::borrow::Cow<'_, str> = if s.contains('_') {
                std::borrow::Cow::Owned(s.replace('_', ""))
            } else {
                std::borrow::Cow::Borrowed(s)
            };
            match parse_go_int(&plain) {
                Some(GoInt::I64(i)) => return Resolved::Int(i),
                Some(GoInt::U64(u)) => return Resolved::Uint(u),
                Some(GoInt::Big(f)) => {
                    // Go tries the float syntax before falling back to big.Int;
                    // both end up as the same number once in JSON.
                    return Resolved::Float(f);
                }
                None => {}
            }
            if is_yaml_float(&plain) {
                if let Some(f) = parse_go_float(&plain) {
                    return Resolved::Float(f);
                }
            }
            Resolved::Str(text)
        }
        _ => Resolved::Str(text),
    }
}

enum GoInt {
    I64(i64),
    U64(u64),
    /// Out of 64-bit range; JSON readers see it as a float.
    Big(f64),
}

/// `strconv.ParseInt(s, 0, 64)`, then `ParseUint`, then `big.Int.SetString(s, 0)`.
fn parse_go_int(s: &str) -> Option<GoInt> {
    let (neg, signed, body) = match s.as_bytes().first()? {
        b'-' => (true, true, &s[1..]),
        b'+' => (false, true, &s[1..]),
        _ => (false, false, s),
    };
    let bytes = body.as_bytes();
    let (radix, digits) = if bytes.len() >= 2 && bytes[0] == b'0' {
        match bytes[1] {
            b'x' | b'X' => (16, &body[2..]),
            b'o' | b'O' => (8, &body[2..]),
            b'b' | b'B' => (2, &body[2..]),
            _ => (8, &body[1..]),
        }
    } else {
        (10, body)
    };
    if digits.is_empty() {
        return None;
    }
    let mut mag: u128 = 0;
    let mut big = 0f64;
    let mut overflow = false;
    for c in digits.chars() {
        let d = c.to_digit(radix)? as u128;
        if !overflow {
            match mag
                .checked_mul(radix as u128)
                .and_then(|m| m.checked_add(d))
            {
                Some(m) => mag = m,
                None => {
                    overflow = true;
                    big = mag as f64;
                }
            }
        }
        if overflow {
            big = big * radix as f64 + d as f64;
        }
    }
    if overflow || mag > u64::MAX as u128 {
        let f = if overflow { big } else { mag as f64 };
        return Some(GoInt::Big(if neg { -f } else { f }));
    }
    if neg {
        if mag <= i64::MAX as u128 + 1 {
            return Some(GoInt::I64((mag as i128).wrapping_neg() as i64));
        }
        return Some(GoInt::Big(-(mag as f64)));
    }
    if mag <= i64::MAX as u128 {
        return Some(GoInt::I64(mag as i64));
    }
    if signed {
        // ParseUint takes no sign: Go then reads "+18446744073709551615" as a float.
        return Some(GoInt::Big(mag as f64));
    }
    Some(GoInt::U64(mag as u64))
}

/// `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`
fn is_yaml_float(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
        i += 1;
    }
    let digits = |i: &mut usize| {
        let start = *i;
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
        *i - start
    };
    if i < b.len() && b[i] == b'.' {
        i += 1;
        if digits(&mut i) == 0 {
            return false;
        }
    } else {
        if digits(&mut i) == 0 {
            return false;
        }
        if i < b.len() && b[i] == b'.' {
            i += 1;
            digits(&mut i);
        }
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        i += 1;
        if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return false;
        }
    }
    i == b.len()
}

/// A float in the decimal syntax that both Go and Rust accept.
fn parse_go_float(s: &str) -> Option<f64> {
    if !is_yaml_float(s) {
        return None;
    }
    s.parse::<f64>().ok()
}

/// Turns a resolved scalar into a JSON value.
pub(crate) fn to_json(r: Resolved<'_>) -> Result<Value, ScalarError> {
    Ok(match r {
        Resolved::Null => Value::Null,
        Resolved::Bool(b) => Value::Bool(b),
        Resolved::Int(i) => Value::Number(i.into()),
        Resolved::Uint(u) => Value::Number(u.into()),
        Resolved::Float(f) => float_to_json(f).ok_or_else(|| {
            let spelling = if f.is_nan() {
                ".nan"
            } else if f > 0.0 {
                ".inf"
            } else {
                "-.inf"
            };
            ScalarError::NotFinite(spelling.to_string())
        })?,
        Resolved::Str(s) => Value::String(s.into_owned()),
        Resolved::Merge => Value::String("<<".to_string()),
    })
}

/// A float as the API server would read it after Go's JSON encoder wrote it:
/// integral values below 2^63 become integers.
pub(crate) fn float_to_json(f: f64) -> Option<Value> {
    if !f.is_finite() {
        return None;
    }
    if f.fract() == 0.0 && f.abs() < 9_223_372_036_854_775_808.0 {
        return Some(Value::Number((f as i64).into()));
    }
    Number::from_f64(f).map(Value::Number)
}

/// A resolved scalar as a JSON object key, as `sigs.k8s.io/yaml` converts
/// non-string keys. `None` for null keys, which it rejects.
pub(crate) fn to_key(r: Resolved<'_>) -> Option<String> {
    Some(match r {
        Resolved::Null => return None,
        Resolved::Bool(b) => b.to_string(),
        Resolved::Int(i) => i.to_string(),
        Resolved::Uint(u) => u.to_string(),
        Resolved::Float(f) => go_format_float32(f),
        Resolved::Str(s) => s.into_owned(),
        Resolved::Merge => "<<".to_string(),
    })
}

/// Go's `strconv.FormatFloat(f, 'g', -1, 32)` with go-yaml's spellings of
/// infinities and NaN.
pub(crate) fn go_format_float32(f: f64) -> String {
    if f.is_nan() {
        return ".nan".to_string();
    }
    let v = f as f32;
    if v.is_infinite() {
        return if v > 0.0 { ".inf" } else { "-.inf" }.to_string();
    }
    // Shortest round-trip digits of the f32, in scientific form: "-1.25e3".
    let sci = format!("{v:e}");
    let (neg, sci) = match sci.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, sci.as_str()),
    };
    let (mant, exp) = sci.split_once('e').unwrap_or((sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mant.chars().filter(|c| *c != '.').collect();
    let digits = if digits.is_empty() {
        "0".to_string()
    } else {
        digits
    };
    let nd = digits.len() as i32;
    let mut out = String::new();
    if neg {
        out.push('-');
    }
    if v == 0.0 {
        out.push('0');
        return out;
    }
    if !(-4..6).contains(&exp) {
        out.push_str(&digits[..1]);
        if nd > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        out.push(if exp < 0 { '-' } else { '+' });
        let e = exp.unsigned_abs();
        if e < 10 {
            out.push('0');
        }
        out.push_str(&e.to_string());
        return out;
    }
    let dp = exp + 1; // digits before the decimal point
    let digit = |i: i32| -> char {
        if i >= 0 && i < nd {
            digits.as_bytes()[i as usize] as char
        } else {
            '0'
        }
    };
    if dp > 0 {
        for i in 0..dp {
            out.push(digit(i));
        }
    } else {
        out.push('0');
    }
    let frac = (nd - dp).max(0);
    if frac > 0 {
        out.push('.');
        for i in 0..frac {
            out.push(digit(dp + i));
        }
    }
    out
}

#[cfg(test)]
#[path = "scalar_tests.rs"]
mod tests;
