//! The CEL standard library: operators, size, string predicates, conversions.

use super::{no_overload, no_trait_overload, FnDecl, Lib};
use crate::cel::error::{EvalError, EvalResult};
use crate::cel::program::Ctx;
use crate::cel::value::{numeric_cmp, Value};
use std::cmp::Ordering;
use std::sync::Arc;

pub const DECLS: &[FnDecl] = &[
    FnDecl::global("_+_", 2, Lib::Core, add),
    FnDecl::global("_-_", 2, Lib::Core, sub),
    FnDecl::global("_*_", 2, Lib::Core, mul),
    FnDecl::global("_/_", 2, Lib::Core, div),
    FnDecl::global("_%_", 2, Lib::Core, rem),
    FnDecl::global("-_", 1, Lib::Core, neg),
    FnDecl::global("!_", 1, Lib::Core, not),
    FnDecl::global("_==_", 2, Lib::Core, eq),
    FnDecl::global("_!=_", 2, Lib::Core, ne),
    FnDecl::global("_<_", 2, Lib::Core, lt),
    FnDecl::global("_<=_", 2, Lib::Core, le),
    FnDecl::global("_>_", 2, Lib::Core, gt),
    FnDecl::global("_>=_", 2, Lib::Core, ge),
    FnDecl::global("@in", 2, Lib::Core, in_),
    FnDecl::global(
        "@sortByAssociatedKeys",
        2,
        Lib::ListsExt,
        super::lists::sort_by_keys,
    ),
    FnDecl::global("size", 1, Lib::Core, size),
    FnDecl::member("size", 1, Lib::Core, size),
    FnDecl::member("contains", 2, Lib::Core, contains),
    FnDecl::member("startsWith", 2, Lib::Core, starts_with),
    FnDecl::member("endsWith", 2, Lib::Core, ends_with),
    FnDecl::global("int", 1, Lib::Core, to_int),
    FnDecl::global("uint", 1, Lib::Core, to_uint),
    FnDecl::global("double", 1, Lib::Core, to_double),
    FnDecl::global("string", 1, Lib::Core, to_string),
    FnDecl::global("bytes", 1, Lib::Core, to_bytes),
    FnDecl::global("bool", 1, Lib::Core, to_bool),
    FnDecl::global("dyn", 1, Lib::Core, dyn_),
    FnDecl::global("type", 1, Lib::Core, type_of),
];

fn add<'a>(ctx: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    use Value::*;
    Ok(match (&a[0], &a[1]) {
        (Int(x), Int(y)) => Int(x.checked_add(*y).ok_or_else(EvalError::overflow)?),
        (Uint(x), Uint(y)) => Uint(x.checked_add(*y).ok_or_else(EvalError::uint_overflow)?),
        (Double(x), Double(y)) => Double(x + y),
        (String(x), String(y)) => {
            // cel-go: ceil((m + n) * 0.1), the copy into a new string.
            let len = x.as_str().len().saturating_add(y.as_str().len());
            ctx.charge_traversal(len, 1)?;
            ctx.alloc(len)?;
            let mut s = std::string::String::with_capacity(len);
            s.push_str(x.as_str());
            s.push_str(y.as_str());
            Value::string(s)
        }
        (Bytes(x), Bytes(y)) => {
            let len = x.len().saturating_add(y.len());
            ctx.charge_traversal(len, 1)?;
            ctx.alloc(len)?;
            Bytes(x.iter().chain(y.iter()).copied().collect())
        }
        // cel-go answers with the other list itself when one is empty.
        (List(x), List(_)) if x.is_empty() => a[1].clone(),
        (List(_), List(y)) if y.is_empty() => a[0].clone(),
        (List(x), List(y)) => {
            // cel-go charges one unit (its concatenation is lazy); this one
            // copies, so it is charged by length.
            let len = x.len().saturating_add(y.len());
            ctx.charge(len as u64)?;
            ctx.alloc_values(len)?;
            let mut v = x.to_vec();
            v.extend(y.iter());
            Value::List(crate::cel::value::List::Concat(std::sync::Arc::new(v)))
        }
        (Duration(x), Duration(y)) => Duration(crate::cel::value::Duration(
            x.0.checked_add(y.0)
                .ok_or_else(EvalError::duration_overflow)?,
        )),
        (Timestamp(t), Duration(d)) | (Duration(d), Timestamp(t)) => {
            Timestamp(super::time::add_duration(*t, d.0)?)
        }
        _ => {
            let adder = matches!(a[0], Int(_) | Uint(_) | Double(_) | Bytes(_) | List(_));
            return no_trait_overload("_+_", &a[0], adder);
        }
    })
}

fn sub<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    use Value::*;
    Ok(match (&a[0], &a[1]) {
        (Int(x), Int(y)) => Int(x.checked_sub(*y).ok_or_else(EvalError::overflow)?),
        (Uint(x), Uint(y)) => Uint(x.checked_sub(*y).ok_or_else(EvalError::uint_overflow)?),
        (Double(x), Double(y)) => Double(x - y),
        (Duration(x), Duration(y)) => Duration(crate::cel::value::Duration(
            x.0.checked_sub(y.0)
                .ok_or_else(EvalError::duration_overflow)?,
        )),
        (Timestamp(t), Duration(d)) => Timestamp(super::time::add_duration(
            *t,
            d.0.checked_neg()
                .ok_or_else(EvalError::timestamp_overflow)?,
        )?),
        (Timestamp(x), Timestamp(y)) => {
            let n = x.total_nanos() - y.total_nanos();
            Duration(crate::cel::value::Duration(
                i64::try_from(n).map_err(|_| EvalError::duration_overflow())?,
            ))
        }
        _ => return no_trait_overload("_-_", &a[0], matches!(a[0], Int(_) | Uint(_) | Double(_))),
    })
}

fn mul<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    use Value::*;
    Ok(match (&a[0], &a[1]) {
        (Int(x), Int(y)) => Int(x.checked_mul(*y).ok_or_else(EvalError::overflow)?),
        (Uint(x), Uint(y)) => Uint(x.checked_mul(*y).ok_or_else(EvalError::uint_overflow)?),
        (Double(x), Double(y)) => Double(x * y),
        _ => return no_trait_overload("_*_", &a[0], matches!(a[0], Int(_) | Uint(_) | Double(_))),
    })
}

fn div<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    use Value::*;
    Ok(match (&a[0], &a[1]) {
        (Int(_), Int(0)) | (Uint(_), Uint(0)) => return Err(EvalError::division_by_zero()),
        (Int(x), Int(y)) => Int(x.checked_div(*y).ok_or_else(EvalError::overflow)?),
        (Uint(x), Uint(y)) => Uint(x / y),
        (Double(x), Double(y)) => Double(x / y),
        _ => return no_trait_overload("_/_", &a[0], matches!(a[0], Int(_) | Uint(_) | Double(_))),
    })
}

fn rem<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    use Value::*;
    Ok(match (&a[0], &a[1]) {
        (Int(_), Int(0)) | (Uint(_), Uint(0)) => return Err(EvalError::modulus_by_zero()),
        (Int(x), Int(y)) => Int(x.checked_rem(*y).ok_or_else(EvalError::overflow)?),
        (Uint(x), Uint(y)) => Uint(x % y),
        _ => return no_trait_overload("_%_", &a[0], matches!(a[0], Int(_) | Uint(_))),
    })
}

fn neg<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    match &a[0] {
        Value::Int(x) => Ok(Value::Int(x.checked_neg().ok_or_else(EvalError::overflow)?)),
        Value::Double(x) => Ok(Value::Double(-x)),
        _ => no_trait_overload("-_", &a[0], matches!(a[0], Value::Bool(_))),
    }
}

fn not<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    match &a[0] {
        Value::Bool(b) => Ok(Value::Bool(!b)),
        _ => Err(EvalError::no_overload("!_")),
    }
}

/// cel-go's size of a value for the cost of comparing it: bytes of a
/// string (cel-go counts code points; bytes are never fewer), elements of a
/// list or map, 1 for anything else.
fn cost_size(v: &Value) -> usize {
    match v {
        Value::String(s) => s.as_str().len(),
        Value::Bytes(b) => b.len(),
        Value::List(l) => l.len(),
        Value::Map(m) => m.len(),
        _ => 1,
    }
}

/// cel-go's cost of `==`, `!=`, `<` and friends: `ceil(min(m, n) * 0.1)`,
/// the traversal of the shorter operand.
fn charge_comparison(ctx: &mut Ctx, a: &[Value]) -> EvalResult<()> {
    ctx.charge_traversal(cost_size(&a[0]).min(cost_size(&a[1])), 1)
}

/// CEL equality, except that a library value on the left may refuse the
/// comparison (see `k8s_bindings::library_equal`).
fn equal(a: &[Value]) -> EvalResult<bool> {
    if let Value::Opaque(x) = &a[0] {
        if let Some(r) = crate::cel::k8s_bindings::library_equal(x.as_ref(), &a[1]) {
            return r;
        }
    }
    Ok(a[0].equals(&a[1]))
}

fn eq<'a>(ctx: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    charge_comparison(ctx, a)?;
    Ok(Value::Bool(equal(a)?))
}

/// cel-go's `!=` is `Equal(a, b) != true`: a value that refuses the
/// comparison (`no such overload`) is simply not equal.
fn ne<'a>(ctx: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    charge_comparison(ctx, a)?;
    Ok(Value::Bool(!matches!(equal(a), Ok(true))))
}

/// Orders two values for `<` and friends.
fn order(name: &str, a: &[Value]) -> EvalResult<Option<Ordering>> {
    use Value::*;
    match (&a[0], &a[1]) {
        // cel-go's numbers refuse to order NaN (an error, not false), a
        // NaN receiver before it looks at the other operand.
        (Int(_) | Uint(_) | Double(_), Int(_) | Uint(_) | Double(_)) => numeric_cmp(&a[0], &a[1])
            .map(Some)
            .ok_or_else(|| EvalError::new("NaN values cannot be ordered")),
        (Double(d), _) if d.is_nan() => Err(EvalError::new("NaN values cannot be ordered")),
        (Bool(_), Bool(_))
        | (String(_), String(_))
        | (Bytes(_), Bytes(_))
        | (Duration(_), Duration(_))
        | (Timestamp(_), Timestamp(_)) => a[0].compare(&a[1]).map(Some),
        (Opaque(x), Opaque(y)) if x.type_name() == y.type_name() => match x.compare(y.as_ref()) {
            Some(o) => Ok(Some(o)),
            None => no_trait_overload(name, &a[0], false),
        },
        _ => {
            let comparer = matches!(a[0], Int(_) | Uint(_) | Double(_) | Bool(_) | Bytes(_));
            no_trait_overload(name, &a[0], comparer)
        }
    }
}

fn lt<'a>(ctx: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    charge_comparison(ctx, a)?;
    Ok(Value::Bool(order("_<_", a)? == Some(Ordering::Less)))
}
fn le<'a>(ctx: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    charge_comparison(ctx, a)?;
    Ok(Value::Bool(matches!(
        order("_<=_", a)?,
        Some(Ordering::Less | Ordering::Equal)
    )))
}
fn gt<'a>(ctx: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    charge_comparison(ctx, a)?;
    Ok(Value::Bool(order("_>_", a)? == Some(Ordering::Greater)))
}
fn ge<'a>(ctx: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    charge_comparison(ctx, a)?;
    Ok(Value::Bool(matches!(
        order("_>=_", a)?,
        Some(Ordering::Greater | Ordering::Equal)
    )))
}

fn in_<'a>(ctx: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    match &a[1] {
        Value::List(l) => {
            ctx.charge(l.len() as u64)?;
            Ok(Value::Bool(l.iter().any(|v| v.equals(&a[0]))))
        }
        Value::Map(m) => match m.find(&a[0]) {
            Ok(found) => Ok(Value::Bool(found.is_some())),
            Err(unhashable) => Err(ctx.panic(unhashable)),
        },
        _ => Err(EvalError::no_overload("@in")),
    }
}

fn size<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    let n = match &a[0] {
        Value::String(s) => s.as_str().chars().count(),
        Value::Bytes(b) => b.len(),
        Value::List(l) => l.len(),
        Value::Map(m) => m.len(),
        other => return no_trait_overload("size", other, false),
    };
    Ok(Value::Int(n as i64))
}

/// The operands of `contains`, `startsWith` and `endsWith`, which cel-go
/// declares without type guards: their implementations refuse other
/// values themselves, in the plain words.
fn strings2<'v>(name: &str, a: &'v [Value]) -> EvalResult<(&'v str, &'v str)> {
    match (&a[0], &a[1]) {
        (Value::String(x), Value::String(y)) => Ok((x.as_str(), y.as_str())),
        _ => Err(EvalError::no_overload(name)),
    }
}

fn contains<'a>(ctx: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    let (s, sub) = strings2("contains", a)?;
    ctx.charge((s.len() / 10) as u64)?;
    Ok(Value::Bool(s.contains(sub)))
}

fn starts_with<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    let (s, p) = strings2("startsWith", a)?;
    Ok(Value::Bool(s.starts_with(p)))
}

fn ends_with<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    let (s, p) = strings2("endsWith", a)?;
    Ok(Value::Bool(s.ends_with(p)))
}

pub fn double_to_int(d: f64) -> EvalResult<i64> {
    // The bounds are i64::MIN and i64::MAX as doubles (both round to 2^63).
    if d.is_nan() || d <= i64::MIN as f64 || d >= i64::MAX as f64 {
        return Err(EvalError::overflow());
    }
    Ok(d as i64)
}

fn to_int<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    Ok(Value::Int(match &a[0] {
        Value::Int(i) => *i,
        Value::Uint(u) => i64::try_from(*u).map_err(|_| EvalError::overflow())?,
        Value::Double(d) => double_to_int(*d)?,
        Value::String(s) => s
            .as_str()
            .parse::<i64>()
            .map_err(|_| EvalError::conversion("string", "int"))?,
        Value::Timestamp(t) => t.secs,
        Value::Duration(d) => d.0,
        _ => return no_overload("int", a),
    }))
}

fn to_uint<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    Ok(Value::Uint(match &a[0] {
        Value::Uint(u) => *u,
        Value::Int(i) => u64::try_from(*i).map_err(|_| EvalError::uint_overflow())?,
        Value::Double(d) => {
            if d.is_nan() || *d < 0.0 || *d >= 1.844_674_407_370_955_2E19 {
                return Err(EvalError::uint_overflow());
            }
            *d as u64
        }
        Value::String(s) => s
            .as_str()
            .parse::<u64>()
            .map_err(|_| EvalError::conversion("string", "uint"))?,
        _ => return no_overload("uint", a),
    }))
}

fn to_double<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    Ok(Value::Double(match &a[0] {
        Value::Double(d) => *d,
        Value::Int(i) => *i as f64,
        Value::Uint(u) => *u as f64,
        Value::String(s) => {
            parse_go_float(s.as_str()).ok_or_else(|| EvalError::conversion("string", "double"))?
        }
        _ => return no_overload("double", a),
    }))
}

/// Go's strconv.ParseFloat accepts "Inf", "+Inf", "-Inf", "NaN" in any case.
fn parse_go_float(s: &str) -> Option<f64> {
    match s.to_ascii_lowercase().as_str() {
        "inf" | "+inf" | "infinity" | "+infinity" => return Some(f64::INFINITY),
        "-inf" | "-infinity" => return Some(f64::NEG_INFINITY),
        "nan" => return Some(f64::NAN),
        _ => {}
    }
    if s.chars()
        .any(|c| c.is_ascii_alphabetic() && !matches!(c, 'e' | 'E'))
    {
        return None;
    }
    // Go's ParseFloat fails with ErrRange where Rust rounds to infinity.
    s.parse().ok().filter(|d: &f64| d.is_finite())
}

/// Formats a double as Go's `strconv.FormatFloat(d, 'g', -1, 64)`.
pub fn format_double(d: f64) -> String {
    if d.is_nan() {
        return "NaN".into();
    }
    if d.is_infinite() {
        return if d > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        };
    }
    if d == 0.0 {
        return if d.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    // Rust's `{:e}` gives the shortest round-trip digits: "d.ddde±x".
    let e = format!("{:e}", d.abs());
    let (mantissa, exp) = e.split_once('e').unwrap_or((&e, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let sign = if d < 0.0 { "-" } else { "" };
    if !(-4..6).contains(&exp) {
        let (first, rest) = digits.split_at(1);
        let frac = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        let esign = if exp < 0 { '-' } else { '+' };
        return format!("{sign}{first}{frac}e{esign}{:02}", exp.abs());
    }
    let dp = exp + 1;
    if dp <= 0 {
        format!("{sign}0.{}{digits}", "0".repeat((-dp) as usize))
    } else if dp as usize >= digits.len() {
        format!("{sign}{digits}{}", "0".repeat(dp as usize - digits.len()))
    } else {
        let (i, f) = digits.split_at(dp as usize);
        format!("{sign}{i}.{f}")
    }
}

fn to_string<'a>(ctx: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    if let Value::Bytes(b) = &a[0] {
        ctx.charge_traversal(b.len(), 1)?;
        ctx.alloc(b.len())?;
    }
    Ok(match &a[0] {
        Value::String(_) => a[0].clone(),
        Value::Int(i) => Value::string(i.to_string()),
        Value::Uint(u) => Value::string(u.to_string()),
        Value::Double(d) => Value::string(format_double(*d)),
        Value::Bool(b) => Value::string(b.to_string()),
        Value::Bytes(b) => Value::string(
            std::str::from_utf8(b)
                .map_err(|_| EvalError::new("invalid UTF-8 in bytes, cannot convert to string"))?,
        ),
        Value::Timestamp(t) => Value::string(super::time::format_timestamp(*t)),
        Value::Duration(d) => Value::string(super::time::format_duration(*d)),
        // The Kubernetes libraries convert only IPs and CIDRs to strings.
        Value::Opaque(o) if matches!(o.type_name(), "net.IP" | "net.CIDR") => match o.to_json() {
            serde_json::Value::String(s) => Value::string(s),
            other => Value::string(other.to_string()),
        },
        _ => return no_overload("string", a),
    })
}

fn to_bytes<'a>(ctx: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    match &a[0] {
        Value::Bytes(_) => Ok(a[0].clone()),
        Value::String(s) => {
            ctx.charge_traversal(s.as_str().len(), 1)?;
            ctx.alloc(s.as_str().len())?;
            Ok(Value::Bytes(Arc::from(s.as_str().as_bytes())))
        }
        _ => no_overload("bytes", a),
    }
}

fn to_bool<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    match &a[0] {
        Value::Bool(_) => Ok(a[0].clone()),
        Value::String(s) => match s.as_str() {
            "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(Value::Bool(true)),
            "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(Value::Bool(false)),
            _ => Err(EvalError::conversion("string", "bool")),
        },
        _ => no_overload("bool", a),
    }
}

fn dyn_<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    Ok(a[0].clone())
}

fn type_of<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    Ok(Value::Type(a[0].type_of()))
}
