//! cel-go's math extension.

use super::{no_overload, Arity, FnDecl, Lib, Style};
use crate::cel::error::{EvalError, EvalResult};
use crate::cel::program::Ctx;
use crate::cel::value::{numeric_cmp, Value};
use std::cmp::Ordering;

pub const DECLS: &[FnDecl] = &[
    FnDecl::new(
        "math.greatest",
        Style::Global,
        Arity::AtLeast(1),
        Lib::Math,
        greatest,
    ),
    FnDecl::new(
        "math.least",
        Style::Global,
        Arity::AtLeast(1),
        Lib::Math,
        least,
    ),
    FnDecl::global("math.ceil", 1, Lib::Math, ceil),
    FnDecl::global("math.floor", 1, Lib::Math, floor),
    FnDecl::global("math.round", 1, Lib::Math, round),
    FnDecl::global("math.trunc", 1, Lib::Math, trunc),
    FnDecl::global("math.sqrt", 1, Lib::Math, sqrt),
    FnDecl::global("math.abs", 1, Lib::Math, abs),
    FnDecl::global("math.sign", 1, Lib::Math, sign),
    FnDecl::global("math.isNaN", 1, Lib::Math, is_nan),
    FnDecl::global("math.isInf", 1, Lib::Math, is_inf),
    FnDecl::global("math.isFinite", 1, Lib::Math, is_finite),
    FnDecl::global("math.bitAnd", 2, Lib::Math, bit_and),
    FnDecl::global("math.bitOr", 2, Lib::Math, bit_or),
    FnDecl::global("math.bitXor", 2, Lib::Math, bit_xor),
    FnDecl::global("math.bitNot", 1, Lib::Math, bit_not),
    FnDecl::global("math.bitShiftLeft", 2, Lib::Math, shift_left),
    FnDecl::global("math.bitShiftRight", 2, Lib::Math, shift_right),
];

fn extreme<'a>(name: &str, a: &[Value<'a>], want: Ordering) -> EvalResult<Value<'a>> {
    let items: Vec<Value<'a>> = match a {
        [Value::List(l)] => l.to_vec(),
        _ => a.to_vec(),
    };
    let mut best: Option<Value<'a>> = None;
    for v in items {
        if !matches!(v, Value::Int(_) | Value::Uint(_) | Value::Double(_)) {
            return no_overload(name, a);
        }
        best = Some(match best {
            None => v,
            Some(b) => {
                if numeric_cmp(&v, &b) == Some(want) {
                    v
                } else {
                    b
                }
            }
        });
    }
    best.ok_or_else(|| EvalError::new(format!("{name}(list) argument must not be empty")))
}

fn greatest<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    extreme("math.greatest", a, Ordering::Greater)
}
fn least<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    extreme("math.least", a, Ordering::Less)
}

fn on_double<'a>(name: &str, a: &[Value<'a>], f: fn(f64) -> f64) -> EvalResult<Value<'a>> {
    match &a[0] {
        Value::Double(d) => Ok(Value::Double(f(*d))),
        _ => no_overload(name, a),
    }
}

fn ceil<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    on_double("math.ceil", a, f64::ceil)
}
fn floor<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    on_double("math.floor", a, f64::floor)
}
fn round<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    on_double("math.round", a, f64::round)
}
fn trunc<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    on_double("math.trunc", a, f64::trunc)
}

fn sqrt<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    match &a[0] {
        Value::Double(d) => Ok(Value::Double(d.sqrt())),
        Value::Int(i) => Ok(Value::Double((*i as f64).sqrt())),
        Value::Uint(u) => Ok(Value::Double((*u as f64).sqrt())),
        _ => no_overload("math.sqrt", a),
    }
}

fn abs<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    match &a[0] {
        Value::Int(i) => Ok(Value::Int(i.checked_abs().ok_or_else(EvalError::overflow)?)),
        Value::Uint(_) => Ok(a[0].clone()),
        Value::Double(d) => Ok(Value::Double(d.abs())),
        _ => no_overload("math.abs", a),
    }
}

fn sign<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    match &a[0] {
        Value::Int(i) => Ok(Value::Int(i.signum())),
        Value::Uint(u) => Ok(Value::Uint((*u > 0) as u64)),
        Value::Double(d) if d.is_nan() => Ok(Value::Double(f64::NAN)),
        Value::Double(d) if *d == 0.0 => Ok(Value::Double(0.0)),
        Value::Double(d) => Ok(Value::Double(d.signum())),
        _ => no_overload("math.sign", a),
    }
}

fn double_pred<'a>(name: &str, a: &[Value<'a>], f: fn(f64) -> bool) -> EvalResult<Value<'a>> {
    match &a[0] {
        Value::Double(d) => Ok(Value::Bool(f(*d))),
        _ => no_overload(name, a),
    }
}

fn is_nan<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    double_pred("math.isNaN", a, f64::is_nan)
}
fn is_inf<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    double_pred("math.isInf", a, f64::is_infinite)
}
fn is_finite<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    double_pred("math.isFinite", a, f64::is_finite)
}

fn bits<'a>(
    name: &str,
    a: &[Value<'a>],
    fi: fn(i64, i64) -> i64,
    fu: fn(u64, u64) -> u64,
) -> EvalResult<Value<'a>> {
    match (&a[0], &a[1]) {
        (Value::Int(x), Value::Int(y)) => Ok(Value::Int(fi(*x, *y))),
        (Value::Uint(x), Value::Uint(y)) => Ok(Value::Uint(fu(*x, *y))),
        _ => no_overload(name, a),
    }
}

fn bit_and<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    bits("math.bitAnd", a, |x, y| x & y, |x, y| x & y)
}
fn bit_or<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    bits("math.bitOr", a, |x, y| x | y, |x, y| x | y)
}
fn bit_xor<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    bits("math.bitXor", a, |x, y| x ^ y, |x, y| x ^ y)
}

fn bit_not<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    match &a[0] {
        Value::Int(x) => Ok(Value::Int(!x)),
        Value::Uint(x) => Ok(Value::Uint(!x)),
        _ => no_overload("math.bitNot", a),
    }
}

fn shift<'a>(name: &str, a: &[Value<'a>], left: bool) -> EvalResult<Value<'a>> {
    let n = match &a[1] {
        Value::Int(n) => *n,
        _ => return no_overload(name, a),
    };
    if n < 0 {
        return Err(EvalError::new(format!("{name}() negative offset: {n}")));
    }
    let n = n as u32;
    match &a[0] {
        Value::Int(x) => Ok(Value::Int(if n >= 64 {
            0
        } else if left {
            x << n
        } else {
            ((*x as u64) >> n) as i64
        })),
        Value::Uint(x) => Ok(Value::Uint(if n >= 64 {
            0
        } else if left {
            x << n
        } else {
            x >> n
        })),
        _ => no_overload(name, a),
    }
}

fn shift_left<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    shift("math.bitShiftLeft", a, true)
}
fn shift_right<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    shift("math.bitShiftRight", a, false)
}
