//! Optional values: `optional.of`, `hasValue`, `orValue`...

use super::{no_overload, FnDecl, Lib};
use crate::cel::error::{EvalError, EvalResult};
use crate::cel::program::Ctx;
use crate::cel::value::Value;

pub const DECLS: &[FnDecl] = &[
    FnDecl::global("optional.of", 1, Lib::Optional, of),
    FnDecl::global("optional.ofNonZeroValue", 1, Lib::Optional, of_non_zero),
    FnDecl::global("optional.none", 0, Lib::Optional, none),
    FnDecl::member("hasValue", 1, Lib::Optional, has_value),
    FnDecl::member("value", 1, Lib::Optional, value),
    FnDecl::member("or", 2, Lib::Optional, or),
    FnDecl::member("orValue", 2, Lib::Optional, or_value),
    FnDecl::global("optional.unwrap", 1, Lib::Optional, unwrap),
    FnDecl::member("unwrapOpt", 1, Lib::Optional, unwrap),
];

/// `optional.unwrap(l)` / `l.unwrapOpt()` (optional types version 2): the
/// values of the present optionals of `l`.
fn unwrap<'a>(ctx: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    let Value::List(l) = &a[0] else {
        return no_overload("optional.unwrap", a);
    };
    ctx.alloc_values(l.len())?;
    let mut out = Vec::with_capacity(l.len());
    for v in l.iter() {
        match v {
            Value::Optional(Some(x)) => out.push((*x).clone()),
            Value::Optional(None) => {}
            other => {
                let shown = match &other {
                    Value::String(s) => s.as_str().to_string(),
                    v => v.to_json().to_string(),
                };
                return Err(EvalError::new(format!("value {shown} is not optional")));
            }
        }
    }
    Ok(Value::list(out))
}

fn of<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    Ok(Value::optional(Some(a[0].clone())))
}

pub fn is_zero(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Int(i) => *i == 0,
        Value::Uint(u) => *u == 0,
        Value::Double(d) => *d == 0.0,
        Value::String(s) => s.as_str().is_empty(),
        Value::Bytes(b) => b.is_empty(),
        Value::List(l) => l.is_empty(),
        Value::Map(m) => m.is_empty(),
        Value::Duration(d) => d.0 == 0,
        // Go's zero time, 0001-01-01T00:00:00Z, not the Unix epoch.
        Value::Timestamp(t) => t.secs == crate::cel::value::MIN_TIMESTAMP_SECS && t.nanos == 0,
        Value::Optional(o) => o.is_none(),
        Value::Type(_) | Value::Opaque(_) => false,
    }
}

fn of_non_zero<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    Ok(Value::optional((!is_zero(&a[0])).then(|| a[0].clone())))
}

fn none<'a>(_: &mut Ctx<'a, '_>, _: &[Value<'a>]) -> EvalResult<Value<'a>> {
    Ok(Value::Optional(None))
}

fn has_value<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    match &a[0] {
        Value::Optional(o) => Ok(Value::Bool(o.is_some())),
        _ => no_overload("hasValue", a),
    }
}

fn value<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    match &a[0] {
        Value::Optional(Some(v)) => Ok((**v).clone()),
        Value::Optional(None) => Err(EvalError::new("optional.none() dereference")),
        _ => no_overload("value", a),
    }
}

/// cel-go evaluates `or` and `orValue` itself, without a type guard: a
/// receiver that is not an optional is the answer as it is, and so is the
/// alternative of an empty optional.
fn or<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    match &a[0] {
        Value::Optional(None) => Ok(a[1].clone()),
        _ => Ok(a[0].clone()),
    }
}

fn or_value<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    match &a[0] {
        Value::Optional(Some(v)) => Ok((**v).clone()),
        Value::Optional(None) => Ok(a[1].clone()),
        _ => Ok(a[0].clone()),
    }
}
