//! cel-go's strings extension (charAt, indexOf, replace, split, format...).

use super::{int_arg, no_overload, str_arg, Arity, FnDecl, Lib, Style};
use crate::cel::error::{EvalError, EvalResult};
use crate::cel::program::Ctx;
use crate::cel::value::{Map, Value};

pub const DECLS: &[FnDecl] = &[
    FnDecl::member("charAt", 2, Lib::Strings, char_at),
    // Before the generic ones, which the cel-spec cases expect: the
    // compiler binds the first declaration that fits.
    FnDecl::new(
        "indexOf",
        Style::Member,
        Arity::Range(2, 3),
        Lib::LocaleFormat,
        index_of_vendored,
    ),
    FnDecl::new(
        "lastIndexOf",
        Style::Member,
        Arity::Range(2, 3),
        Lib::LocaleFormat,
        last_index_of_vendored,
    ),
    FnDecl::new(
        "indexOf",
        Style::Member,
        Arity::Range(2, 3),
        Lib::Strings,
        index_of,
    ),
    FnDecl::new(
        "lastIndexOf",
        Style::Member,
        Arity::Range(2, 3),
        Lib::Strings,
        last_index_of,
    ),
    FnDecl::member("lowerAscii", 1, Lib::Strings, lower_ascii),
    FnDecl::member("upperAscii", 1, Lib::Strings, upper_ascii),
    FnDecl::new(
        "replace",
        Style::Member,
        Arity::Range(3, 4),
        Lib::Strings,
        replace,
    ),
    FnDecl::new(
        "split",
        Style::Member,
        Arity::Range(2, 3),
        Lib::Strings,
        split,
    ),
    FnDecl::new(
        "substring",
        Style::Member,
        Arity::Range(2, 3),
        Lib::Strings,
        substring,
    ),
    FnDecl::member("trim", 1, Lib::Strings, trim),
    FnDecl::new(
        "join",
        Style::Member,
        Arity::Range(1, 2),
        Lib::Strings,
        join,
    ),
    // kube-apiserver's strings extension predates `reverse` on strings:
    // there only the lists extension's applies.
    FnDecl::member("reverse", 1, Lib::LocaleFormat, super::lists::reverse),
    FnDecl::member("reverse", 1, Lib::Strings, reverse),
    // First: where both are enabled, the older printer wins.
    FnDecl::member("format", 2, Lib::LocaleFormat, format_locale),
    FnDecl::member("format", 2, Lib::Strings, format),
    FnDecl::global("strings.quote", 1, Lib::Strings, quote),
];

fn chars(s: &str) -> Vec<char> {
    s.chars().collect()
}

fn out_of_range(i: i64) -> EvalError {
    EvalError::new(format!("index out of range: {i}"))
}

fn char_at<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    let s = str_arg("charAt", a, 0)?;
    let i = int_arg("charAt", a, 1)?;
    let cs = chars(s);
    if i < 0 || i as usize > cs.len() {
        return Err(out_of_range(i));
    }
    Ok(Value::string(
        cs.get(i as usize)
            .map(|c| c.to_string())
            .unwrap_or_default(),
    ))
}

/// The last match of a non-empty `needle` no longer than `hay` that
/// starts at or before `from`.
fn rfind_from(hay: &[char], needle: &[char], from: usize) -> Option<usize> {
    let start = from.min(hay.len() - needle.len());
    (0..=start).rev().find(|&i| hay[i..].starts_with(needle))
}

fn find_from(hay: &[char], needle: &[char], from: usize) -> Option<usize> {
    if needle.is_empty() {
        return Some(from);
    }
    (from..=hay.len().saturating_sub(needle.len())).find(|&i| hay[i..].starts_with(needle))
}

/// `indexOf` as the strings extension kube-apiserver v1.36 vendors answers
/// it (cel-go before its #1335): an empty needle is found at the offset,
/// whatever it is; an offset at or past the end finds nothing; only a
/// negative one is an error.
fn index_of_vendored<'a>(ctx: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    if matches!(a[0], Value::List(_)) {
        return super::lists::index_of(ctx, a, false);
    }
    let s = str_arg("indexOf", a, 0)?;
    let sub = str_arg("indexOf", a, 1)?;
    let off = if a.len() == 3 {
        int_arg("indexOf", a, 2)?
    } else {
        0
    };
    ctx.charge((s.len() / 10) as u64)?;
    if sub.is_empty() {
        return Ok(Value::Int(off));
    }
    let (hay, needle) = (chars(s), chars(sub));
    if off < 0 {
        return Err(out_of_range(off));
    }
    if off as usize >= hay.len() || needle.len() > hay.len() {
        return Ok(Value::Int(-1));
    }
    Ok(Value::Int(
        find_from(&hay, &needle, off as usize).map_or(-1, |i| i as i64),
    ))
}

/// `lastIndexOf`, likewise (an offset past the end finds nothing).
fn last_index_of_vendored<'a>(ctx: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    if matches!(a[0], Value::List(_)) {
        return super::lists::index_of(ctx, a, true);
    }
    let s = str_arg("lastIndexOf", a, 0)?;
    let sub = str_arg("lastIndexOf", a, 1)?;
    ctx.charge((s.len() / 10) as u64)?;
    let (hay, needle) = (chars(s), chars(sub));
    let off = match a.len() {
        3 => int_arg("lastIndexOf", a, 2)?,
        _ if needle.is_empty() => return Ok(Value::Int(hay.len() as i64)),
        _ if s.len() < sub.len() => return Ok(Value::Int(-1)),
        _ => hay.len() as i64 - 1,
    };
    if needle.is_empty() {
        return Ok(Value::Int(off));
    }
    if off < 0 {
        return Err(out_of_range(off));
    }
    if off as usize >= hay.len() || needle.len() > hay.len() {
        return Ok(Value::Int(-1));
    }
    Ok(Value::Int(
        rfind_from(&hay, &needle, off as usize).map_or(-1, |i| i as i64),
    ))
}

fn index_of<'a>(ctx: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    if matches!(a[0], Value::List(_)) {
        return super::lists::index_of(ctx, a, false);
    }
    let s = str_arg("indexOf", a, 0)?;
    let sub = str_arg("indexOf", a, 1)?;
    let off = if a.len() == 3 {
        int_arg("indexOf", a, 2)?
    } else {
        0
    };
    ctx.charge((s.len() / 10) as u64)?;
    let (hay, needle) = (chars(s), chars(sub));
    if off < 0 || off as usize > hay.len() {
        return Err(out_of_range(off));
    }
    if needle.len() > hay.len() {
        return Ok(Value::Int(-1));
    }
    Ok(Value::Int(
        find_from(&hay, &needle, off as usize).map_or(-1, |i| i as i64),
    ))
}

fn last_index_of<'a>(ctx: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    if matches!(a[0], Value::List(_)) {
        return super::lists::index_of(ctx, a, true);
    }
    let s = str_arg("lastIndexOf", a, 0)?;
    let sub = str_arg("lastIndexOf", a, 1)?;
    let (hay, needle) = (chars(s), chars(sub));
    ctx.charge((s.len() / 10) as u64)?;
    let off = if a.len() == 3 {
        int_arg("lastIndexOf", a, 2)?
    } else {
        hay.len() as i64
    };
    if off < 0 || off as usize > hay.len() {
        return Err(out_of_range(off));
    }
    if needle.is_empty() {
        return Ok(Value::Int(off));
    }
    if needle.len() > hay.len() {
        return Ok(Value::Int(-1));
    }
    Ok(Value::Int(
        rfind_from(&hay, &needle, off as usize).map_or(-1, |i| i as i64),
    ))
}

/// Kubernetes' cost of `lowerAscii`, `upperAscii`, `substring`, `trim`
/// (one traversal of the receiver), and the bytes of a result as long.
fn charge_copy(ctx: &mut Ctx, s: &str) -> EvalResult<()> {
    ctx.charge_traversal(s.len(), 1)?;
    ctx.alloc(s.len())
}

fn lower_ascii<'a>(ctx: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    let s = str_arg("lowerAscii", a, 0)?;
    charge_copy(ctx, s)?;
    Ok(Value::string(s.to_ascii_lowercase()))
}

fn upper_ascii<'a>(ctx: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    let s = str_arg("upperAscii", a, 0)?;
    charge_copy(ctx, s)?;
    Ok(Value::string(s.to_ascii_uppercase()))
}

fn replace<'a>(ctx: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    let s = str_arg("replace", a, 0)?;
    let old = str_arg("replace", a, 1)?;
    let new = str_arg("replace", a, 2)?;
    let n = if a.len() == 4 {
        int_arg("replace", a, 3)?
    } else {
        -1
    };
    // Kubernetes: ceil(size * 2 * 0.1), the traversal plus the result.
    ctx.charge_traversal(s.len(), 2)?;
    // The result's size before it is built: replacing "" (between every
    // character) or a short match with a long string multiplies the input.
    let matches = if old.is_empty() {
        s.chars().count() + 1
    } else {
        s.matches(old).count()
    };
    let matches = if n < 0 {
        matches
    } else {
        matches.min(n as usize)
    };
    let len = s
        .len()
        .saturating_sub(matches.saturating_mul(old.len()))
        .saturating_add(matches.saturating_mul(new.len()));
    ctx.alloc(len)?;
    let out = if n < 0 {
        s.replace(old, new)
    } else {
        s.replacen(old, new, n as usize)
    };
    Ok(Value::string(out))
}

fn split<'a>(ctx: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    let s = str_arg("split", a, 0)?;
    let sep = str_arg("split", a, 1)?;
    let n = if a.len() == 3 {
        int_arg("split", a, 2)?
    } else {
        -1
    };
    // Kubernetes: ceil(size * 2 * 0.1), the traversal plus the result.
    ctx.charge_traversal(s.len(), 2)?;
    // At most one part per character: the bytes, plus a string per part.
    let parts_max = if sep.is_empty() {
        s.chars().count()
    } else {
        s.matches(sep).count() + 1
    };
    let parts_max = if n < 0 {
        parts_max
    } else {
        parts_max.min(n as usize)
    };
    ctx.alloc(s.len())?;
    ctx.alloc_values(parts_max)?;
    let parts: Vec<String> = match n {
        0 => vec![],
        _ if sep.is_empty() => {
            let cs = chars(s);
            let limit = if n < 0 {
                cs.len()
            } else {
                (n as usize).min(cs.len())
            };
            let mut v: Vec<String> = cs
                .iter()
                .take(limit.saturating_sub(1))
                .map(|c| c.to_string())
                .collect();
            if limit > 0 {
                v.push(cs[limit - 1..].iter().collect());
            }
            v
        }
        n if n < 0 => s.split(sep).map(str::to_string).collect(),
        n => s.splitn(n as usize, sep).map(str::to_string).collect(),
    };
    Ok(Value::list(parts.into_iter().map(Value::string).collect()))
}

fn substring<'a>(ctx: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    let s = str_arg("substring", a, 0)?;
    ctx.charge_traversal(s.len(), 1)?;
    let cs = chars(s);
    let start = int_arg("substring", a, 1)?;
    let end = if a.len() == 3 {
        int_arg("substring", a, 2)?
    } else {
        cs.len() as i64
    };
    // cel-go checks the order of two indexes first.
    if a.len() == 3 && start > end {
        return Err(EvalError::new(format!(
            "invalid substring range. start: {start}, end: {end}"
        )));
    }
    if start < 0 || start as usize > cs.len() {
        return Err(out_of_range(start));
    }
    if end < 0 || end as usize > cs.len() {
        return Err(out_of_range(end));
    }
    let out = cs[start as usize..end as usize].iter().collect::<String>();
    // No longer than the receiver: accounted for once built.
    ctx.alloc(out.len())?;
    Ok(Value::string(out))
}

fn trim<'a>(ctx: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    let s = str_arg("trim", a, 0)?;
    charge_copy(ctx, s)?;
    Ok(Value::string(s.trim()))
}

fn reverse<'a>(ctx: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    if matches!(a[0], Value::List(_)) {
        return super::lists::reverse(ctx, a);
    }
    let s = str_arg("reverse", a, 0)?;
    charge_copy(ctx, s)?;
    Ok(Value::string(s.chars().rev().collect::<String>()))
}

fn list_head<'a>(v: &Value<'a>) -> Option<Value<'a>> {
    match v {
        Value::List(l) => l.get(0),
        _ => None,
    }
}

fn join<'a>(ctx: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    // cel-go's type guard looks at the first element only.
    let (Value::List(l), None | Some(Value::String(_))) = (&a[0], list_head(&a[0])) else {
        return no_overload("join", a);
    };
    let sep = if a.len() == 2 {
        str_arg("join", a, 1)?
    } else {
        ""
    };
    // The result's size first, from the parts as they are (no copies):
    // a list of one shared 1 MiB string a thousand times over costs a
    // thousand units to build and would join into a gigabyte.
    let mut len = sep.len().saturating_mul(l.len().saturating_sub(1));
    for v in l.iter() {
        match v {
            Value::String(s) => len = len.saturating_add(s.as_str().len()),
            _ => return no_overload("join", a),
        }
    }
    // Kubernetes: ceil(size(result) * 2 * 0.1).
    ctx.charge_traversal(len, 2)?;
    ctx.alloc(len)?;
    let mut out = String::with_capacity(len);
    for (i, v) in l.iter().enumerate() {
        if i > 0 {
            out.push_str(sep);
        }
        if let Value::String(s) = v {
            out.push_str(s.as_str());
        }
    }
    Ok(Value::string(out))
}

fn quote<'a>(ctx: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    let s = str_arg("strings.quote", a, 0)?;
    // Every character may become a two-character escape.
    ctx.charge_traversal(s.len(), 1)?;
    ctx.alloc(s.len().saturating_mul(2).saturating_add(2))?;
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            c => out.push(c),
        }
    }
    out.push('"');
    Ok(Value::string(out))
}

fn format<'a>(ctx: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    format_with(ctx, a, false)
}

/// `format` as kube-apiserver's strings extension (version 2) prints.
fn format_locale<'a>(ctx: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    format_with(ctx, a, true)
}

fn format_with<'a>(ctx: &mut Ctx<'a, '_>, a: &[Value<'a>], locale: bool) -> EvalResult<Value<'a>> {
    let fmt = str_arg("format", a, 0)?;
    let Value::List(args) = &a[1] else {
        return no_overload("format", a);
    };
    ctx.charge((fmt.len() / 10 + args.len()) as u64)?;
    let mut out = String::new();
    let b = fmt.as_bytes();
    let (mut i, mut next_arg) = (0, 0usize);
    while i < b.len() {
        // '%' is ASCII, so the text between clauses is whole characters.
        let run = b[i..]
            .iter()
            .position(|&c| c == b'%')
            .map_or(b.len(), |n| i + n);
        out.push_str(&fmt[i..run]);
        i = run;
        if i >= b.len() {
            break;
        }
        if b.get(i + 1) == Some(&b'%') {
            out.push('%');
            i += 2;
            continue;
        }
        // cel-go's order: the argument is fetched before the clause is
        // read, so `'%v'.format([])` is out of range, not a bad clause.
        let arg = args
            .get(next_arg)
            .ok_or_else(|| EvalError::new(format!("index {next_arg} out of range")))?;
        if i + 1 >= b.len() {
            return Err(EvalError::new("unexpected end of string"));
        }
        let spec = clause(&b[i + 1..])
            .map_err(|m| EvalError::new(format!("could not parse formatting clause: {m}")))?;
        // Bounded: a precision is output size, and Rust's formatter
        // refuses widths past u16::MAX.
        let precision = match spec.precision {
            Some(p) if p > MAX_PRECISION as i64 => {
                return Err(EvalError::new(format!(
                "could not parse formatting clause: precision {p} is larger than {MAX_PRECISION}"
            )))
            }
            p => p.map(|p| p as usize),
        };
        next_arg += 1;
        // A clause prints at most its argument (and a bounded precision):
        // accounted for as each is printed, so a format string of many
        // `%s` of one large shared string stops at the memory budget.
        let piece = format_clause(char::from(spec.verb), precision, &arg, locale)?;
        ctx.alloc(piece.len())?;
        out.push_str(&piece);
        i += 1 + spec.read;
    }
    Ok(Value::string(out))
}

/// A formatting clause cel-go refuses, in its words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ClauseError {
    #[error("error while parsing precision: could not find end of precision specifier")]
    UnendedPrecision,
    /// Go's strconv.Atoi refused the digits.
    #[error("error while parsing precision: error while converting precision to integer: strconv.Atoi: parsing \"{digits}\": {why}")]
    Precision { digits: String, why: &'static str },
    #[error("unrecognized formatting clause \"{0}\"")]
    Verb(char),
}

/// A formatting clause after its `%`: how many bytes it takes, its verb
/// and its precision.
pub(crate) struct Clause {
    pub read: usize,
    pub verb: u8,
    pub precision: Option<i64>,
}

/// cel-go's `parseFormattingClause` and `parsePrecision` on the bytes
/// after a `%` (never empty), or cel-go's message. The runtime and the
/// checker's `format` validator share it.
pub(crate) fn clause(b: &[u8]) -> Result<Clause, ClauseError> {
    let mut i = 0;
    let mut precision = None;
    if b[0] == b'.' {
        i = 1;
        let start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i >= b.len() {
            return Err(ClauseError::UnendedPrecision);
        }
        let digits = std::str::from_utf8(&b[start..i]).unwrap_or_default();
        match digits.parse::<i64>() {
            Ok(p) => precision = Some(p),
            Err(e) => {
                // Go's strconv.Atoi; version 2 sets no maximum precision.
                let why = match e.kind() {
                    std::num::IntErrorKind::PosOverflow => "value out of range",
                    _ => "invalid syntax",
                };
                return Err(ClauseError::Precision {
                    digits: digits.to_string(),
                    why,
                });
            }
        }
    }
    let verb = b[i];
    if !b"sdfebxXo".contains(&verb) {
        // cel-go reads one byte as the verb, so a multi-byte character
        // shows as its first byte's Latin-1 letter.
        return Err(ClauseError::Verb(char::from(verb)));
    }
    Ok(Clause {
        read: i + 1,
        verb,
        precision,
    })
}

const MAX_PRECISION: usize = 1000;

fn fmt_err(msg: String) -> EvalError {
    EvalError::new(format!("error during formatting: {msg}"))
}

fn special_double(d: f64) -> Option<String> {
    if d.is_nan() {
        Some("NaN".into())
    } else if d.is_infinite() {
        Some(if d > 0.0 { "Infinity" } else { "-Infinity" }.into())
    } else {
        None
    }
}

fn format_clause(
    verb: char,
    precision: Option<usize>,
    v: &Value,
    locale: bool,
) -> EvalResult<String> {
    let tn = v.type_name();
    match verb {
        's' if locale => format_string_v1(v),
        's' => format_string(v),
        'd' => match v {
            Value::Int(i) => Ok(i.to_string()),
            Value::Uint(u) => Ok(u.to_string()),
            Value::Double(d) if special_double(*d).is_some() => {
                Ok(special_double(*d).unwrap_or_default())
            }
            _ => Err(fmt_err(format!(
                "decimal clause can only be used on integers, was given {tn}"
            ))),
        },
        'f' | 'e' if locale => locale_float(verb, precision, v),
        'f' | 'e' => {
            let d = match v {
                Value::Double(d) => *d,
                Value::Int(i) => *i as f64,
                Value::Uint(u) => *u as f64,
                _ if verb == 'f' => {
                    return Err(fmt_err(format!(
                        "fixed-point clause can only be used on doubles, was given {tn}"
                    )))
                }
                _ => {
                    return Err(fmt_err(format!(
                        "scientific clause can only be used on doubles, was given {tn}"
                    )))
                }
            };
            if let Some(s) = special_double(d) {
                return Ok(s);
            }
            let p = precision.unwrap_or(6);
            Ok(if verb == 'f' {
                format!("{d:.p$}")
            } else {
                go_exponent(&format!("{d:.p$e}"))
            })
        }
        'b' => match v {
            Value::Int(i) => Ok(signed_radix(*i, 2, false)),
            Value::Uint(u) => Ok(format!("{u:b}")),
            Value::Bool(b) => Ok(if *b { "1" } else { "0" }.into()),
            _ => Err(fmt_err(format!(
                "only integers and bools can be formatted as binary, was given {tn}"
            ))),
        },
        'o' => match v {
            Value::Int(i) => Ok(signed_radix(*i, 8, false)),
            Value::Uint(u) => Ok(format!("{u:o}")),
            _ => Err(fmt_err(format!(
                "octal clause can only be used on integers, was given {tn}"
            ))),
        },
        _ => {
            let upper = verb == 'X';
            let s = match v {
                Value::Int(i) => signed_radix(*i, 16, upper),
                Value::Uint(u) => format!("{u:x}"),
                Value::String(s) => hex(s.as_str().as_bytes()),
                Value::Bytes(b) => hex(b),
                _ => {
                    return Err(fmt_err(format!(
                        "only integers, byte buffers, and strings can be formatted as hex, was given {tn}"
                    )))
                }
            };
            Ok(if upper { s.to_uppercase() } else { s })
        }
    }
}

fn signed_radix(i: i64, radix: u32, upper: bool) -> String {
    let mag = i.unsigned_abs();
    let digits = match radix {
        2 => format!("{mag:b}"),
        8 => format!("{mag:o}"),
        _ if upper => format!("{mag:X}"),
        _ => format!("{mag:x}"),
    };
    if i < 0 {
        format!("-{digits}")
    } else {
        digits
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// `%f` and `%e` as the strings extension before version 4 prints them:
/// through golang.org/x/text's printer for `en-US`. `%.2f` groups the
/// integer digits (`1,234.50`); `%e` is written `%<precision>e`, so the
/// precision is a *width* and the mantissa always has 6 decimals
/// (`1.234560×10⁰⁵`, `   NaN`). Infinities print as `∞`. Only doubles and
/// the strings `NaN`, `Infinity`, `-Infinity` are accepted.
fn locale_float(verb: char, precision: Option<usize>, v: &Value) -> EvalResult<String> {
    let d = match v {
        Value::Double(d) => *d,
        Value::String(s) if matches!(s.as_str(), "NaN" | "Infinity" | "-Infinity") => {
            match s.as_str() {
                "NaN" => f64::NAN,
                "Infinity" => f64::INFINITY,
                _ => f64::NEG_INFINITY,
            }
        }
        _ => {
            let what = if verb == 'f' {
                "fixed-point"
            } else {
                "scientific"
            };
            return Err(fmt_err(format!(
                "{what} clause can only be used on doubles, was given {}",
                v.type_name()
            )));
        }
    };
    let special = if d.is_nan() {
        Some("NaN".to_string())
    } else if d.is_infinite() {
        Some(if d > 0.0 { "∞" } else { "-∞" }.to_string())
    } else {
        None
    };
    if verb == 'f' {
        let p = precision.unwrap_or(6);
        return Ok(special.unwrap_or_else(|| group_thousands(&format!("{d:.p$}"))));
    }
    let width = precision.unwrap_or(6);
    let s = special.unwrap_or_else(|| superscript_exponent(&format!("{d:.6e}")));
    let pad = width.saturating_sub(s.chars().count());
    Ok(format!("{}{s}", " ".repeat(pad)))
}

/// `-1234567.50` → `-1,234,567.50`.
fn group_thousands(s: &str) -> String {
    let (sign, rest) = match s.strip_prefix('-') {
        Some(r) => ("-", r),
        None => ("", s),
    };
    let (int, frac) = match rest.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (rest, None),
    };
    let mut grouped = String::with_capacity(int.len() + int.len() / 3);
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(c);
    }
    match frac {
        Some(f) => format!("{sign}{grouped}.{f}"),
        None => format!("{sign}{grouped}"),
    }
}

/// Rust writes `1.5e-3`; golang.org/x/text's printer writes `1.5×10⁻⁰³`
/// (at least two exponent digits, a sign only when negative).
fn superscript_exponent(s: &str) -> String {
    const DIGITS: [char; 10] = ['⁰', '¹', '²', '³', '⁴', '⁵', '⁶', '⁷', '⁸', '⁹'];
    match s.split_once('e') {
        Some((m, e)) => {
            let (minus, digits) = match e.strip_prefix('-') {
                Some(d) => ("⁻", d),
                None => ("", e),
            };
            let digits: String = format!("{digits:0>2}")
                .chars()
                .map(|c| c.to_digit(10).map_or(c, |d| DIGITS[d as usize]))
                .collect();
            format!("{m}×10{minus}{digits}")
        }
        None => s.to_string(),
    }
}

/// Rust writes `1.5e3`; Go writes `1.5e+03`.
fn go_exponent(s: &str) -> String {
    match s.split_once('e') {
        Some((m, e)) => {
            let (sign, digits) = match e.strip_prefix('-') {
                Some(d) => ('-', d),
                None => ('+', e),
            };
            format!("{m}e{sign}{digits:0>2}")
        }
        None => s.to_string(),
    }
}

fn format_string(v: &Value) -> EvalResult<String> {
    Ok(match v {
        Value::String(s) => s.as_str().to_string(),
        Value::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Int(i) => i.to_string(),
        Value::Uint(u) => u.to_string(),
        Value::Double(d) => special_double(*d).unwrap_or_else(|| super::core::format_double(*d)),
        Value::Type(t) => t.name().to_string(),
        Value::Duration(d) => super::time::format_duration(*d),
        Value::Timestamp(t) => super::time::format_timestamp(*t),
        Value::List(l) => {
            let items: EvalResult<Vec<String>> = l.iter().map(|x| format_string(&x)).collect();
            format!("[{}]", items?.join(", "))
        }
        Value::Map(m) => format_map(m)?,
        other => {
            return Err(fmt_err(format!(
                "string clause can only be used on strings, bools, bytes, ints, doubles, maps, lists, types, durations, and timestamps, was given {}",
                other.type_name()
            )))
        }
    })
}

/// `%s` as the strings extension before version 4 prints it (cel-go's
/// `FormatString`): scalars as `string()` converts them, lists and maps with
/// their members written as CEL literals (`[1.500000, "a", b"x",
/// duration("1s")]`, `{"a":1, "b":2}`).
fn format_string_v1(v: &Value) -> EvalResult<String> {
    match v {
        Value::List(l) => format_list_v1(l.iter()),
        Value::Map(m) => format_map_v1(m),
        Value::Double(d) => Ok(super::core::format_double(*d)),
        other => format_string(other),
    }
}

fn format_list_v1<'a>(items: impl Iterator<Item = Value<'a>>) -> EvalResult<String> {
    let items: EvalResult<Vec<String>> = items.map(|x| member_v1(&x)).collect();
    Ok(format!("[{}]", items?.join(", ")))
}

fn format_map_v1(m: &Map) -> EvalResult<String> {
    let mut items = Vec::with_capacity(m.len());
    for (k, v) in m.entries() {
        let key = match &k {
            Value::String(s) => go_quote(s.as_str()),
            Value::Bool(b) => b.to_string(),
            Value::Int(i) => i.to_string(),
            Value::Uint(u) => u.to_string(),
            other => {
                return Err(fmt_err(format!(
                    "no formatting function for map key of type {}",
                    other.type_name()
                )))
            }
        };
        items.push((key, member_v1(&v)?));
    }
    items.sort_by(|a, b| a.0.cmp(&b.0));
    let parts: Vec<String> = items.into_iter().map(|(k, v)| format!("{k}:{v}")).collect();
    Ok(format!("{{{}}}", parts.join(", ")))
}

/// A list member or map value, as a CEL literal (cel-go's `quoteForCEL`).
fn member_v1(v: &Value) -> EvalResult<String> {
    Ok(match v {
        Value::String(s) => go_quote(s.as_str()),
        Value::Bytes(b) => {
            let s = std::str::from_utf8(b)
                .map_err(|_| EvalError::new("invalid UTF-8 in bytes, cannot convert to string"))?;
            format!("b{}", go_quote(s))
        }
        Value::Double(d) => {
            // Go's `%.6f`; NaN and the infinities quoted.
            if d.is_nan() {
                "\"NaN\"".into()
            } else if d.is_infinite() {
                if *d > 0.0 { "\"+Inf\"" } else { "\"-Inf\"" }.into()
            } else {
                format!("{d:.6}")
            }
        }
        Value::Duration(d) => format!("duration({})", go_quote(&super::time::format_duration(*d))),
        Value::Timestamp(t) => format!(
            "timestamp({})",
            go_quote(&super::time::format_timestamp(*t))
        ),
        Value::List(l) => format_list_v1(l.iter())?,
        Value::Map(m) => format_map_v1(m)?,
        Value::Int(_) | Value::Uint(_) | Value::Bool(_) | Value::Null | Value::Type(_) => {
            format_string(v)?
        }
        other => {
            return Err(fmt_err(format!(
                "no formatting function for {}",
                other.type_name()
            )))
        }
    })
}

pub(super) fn go_quote(s: &str) -> String {
    crate::cel::k8s::goquote::quote(s)
}

fn format_map(m: &Map) -> EvalResult<String> {
    let mut items = Vec::with_capacity(m.len());
    for (k, v) in m.entries() {
        items.push((format_string(&k)?, format_string(&v)?));
    }
    items.sort();
    let parts: Vec<String> = items
        .into_iter()
        .map(|(k, v)| format!("{k}: {v}"))
        .collect();
    Ok(format!("{{{}}}", parts.join(", ")))
}
