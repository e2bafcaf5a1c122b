//! cel-go's sets extension over lists.

use super::{no_overload, FnDecl, Lib};
use crate::cel::error::EvalResult;
use crate::cel::program::Ctx;
use crate::cel::value::{List, Value};

pub const DECLS: &[FnDecl] = &[
    FnDecl::global("sets.contains", 2, Lib::Sets, contains),
    FnDecl::global("sets.equivalent", 2, Lib::Sets, equivalent),
    FnDecl::global("sets.intersects", 2, Lib::Sets, intersects),
];

fn lists<'v, 'a>(
    name: &str,
    ctx: &mut Ctx<'a, '_>,
    a: &'v [Value<'a>],
) -> EvalResult<(&'v List<'a>, &'v List<'a>)> {
    match (&a[0], &a[1]) {
        (Value::List(x), Value::List(y)) => {
            ctx.charge((x.len() * y.len()) as u64 / 4)?;
            Ok((x, y))
        }
        _ => no_overload(name, a),
    }
}

fn all_in(sub: &List, set: &List) -> bool {
    sub.iter().all(|x| set.iter().any(|y| x.equals(&y)))
}

fn contains<'a>(ctx: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    let (x, y) = lists("sets.contains", ctx, a)?;
    Ok(Value::Bool(all_in(y, x)))
}

fn equivalent<'a>(ctx: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    let (x, y) = lists("sets.equivalent", ctx, a)?;
    Ok(Value::Bool(all_in(x, y) && all_in(y, x)))
}

fn intersects<'a>(ctx: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    let (x, y) = lists("sets.intersects", ctx, a)?;
    Ok(Value::Bool(
        x.iter().any(|v| y.iter().any(|w| v.equals(&w))),
    ))
}
