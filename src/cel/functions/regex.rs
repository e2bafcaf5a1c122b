//! `matches` (standard library) and the Kubernetes regex library
//! (`find`, `findAll`). Constant patterns are compiled once, at compile time.

use super::{int_arg, no_overload, no_trait_overload, str_arg, Arity, FnDecl, Lib, Style};
use crate::cel::error::{EvalError, EvalResult};
use crate::cel::k8s::regex::RegexError;
use crate::cel::program::Ctx;
use crate::cel::value::Value;
use regex::Regex;
use std::any::Any;
use std::sync::Arc;

pub const DECLS: &[FnDecl] = &[
    FnDecl::both("matches", 2, Lib::Core, matches).prepared(prepare, matches_prepared),
    FnDecl::member("find", 2, Lib::Regex, find).prepared(prepare, find_prepared),
    FnDecl::new(
        "findAll",
        Style::Member,
        Arity::Range(2, 3),
        Lib::Regex,
        find_all,
    )
    .prepared(prepare, find_all_prepared),
];

/// Compiles an RE2 pattern with Go's syntax, semantics and messages
/// (`error parsing regexp: missing closing ): `a(b``), as `matches` reports
/// them.
pub fn compile(pattern: &str) -> Result<Regex, RegexError> {
    crate::cel::k8s::regex::compile(pattern)
}

/// A constant pattern, compiled with the program. kube-apiserver's program
/// planning fails on a bad one in Go's words, without `find`'s prefix.
fn prepare(pattern: &str) -> Result<Option<Arc<dyn Any + Send + Sync>>, RegexError> {
    Ok(Some(Arc::new(compile(pattern)?)))
}

fn regex_arg(prepared: &(dyn Any + Send + Sync)) -> EvalResult<&Regex> {
    prepared
        .downcast_ref::<Regex>()
        .ok_or_else(|| EvalError::new("internal: prepared value is not a regex"))
}

fn runtime_regex(name: &str, a: &[Value]) -> EvalResult<Regex> {
    let pattern = str_arg(name, a, 1)?;
    // The Kubernetes regex library says `Illegal regex: <Go's message>`.
    compile(pattern).map_err(|e| match name {
        "matches" => EvalError::new(e.to_string()),
        _ => EvalError::new(e.illegal_regex()),
    })
}

/// The string `matches` applies to. cel-go binds `matches` as one
/// implementation guarded by the matcher trait (strings only); a string
/// refuses a pattern of another type in the plain words.
fn matches_operands<'v>(a: &'v [Value]) -> EvalResult<&'v str> {
    match (&a[0], &a[1]) {
        (Value::String(s), Value::String(_)) => Ok(s.as_str()),
        (first, _) => no_trait_overload("matches", first, false),
    }
}

fn do_matches<'a>(ctx: &mut Ctx<'a, '_>, a: &[Value<'a>], re: &Regex) -> EvalResult<Value<'a>> {
    let s = matches_operands(a)?;
    ctx.charge((s.len() / 10) as u64)?;
    Ok(Value::Bool(re.is_match(s)))
}

fn matches<'a>(ctx: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    matches_operands(a)?;
    let re = runtime_regex("matches", a)?;
    do_matches(ctx, a, &re)
}

fn matches_prepared<'a>(
    ctx: &mut Ctx<'a, '_>,
    a: &[Value<'a>],
    p: &(dyn Any + Send + Sync),
) -> EvalResult<Value<'a>> {
    do_matches(ctx, a, regex_arg(p)?)
}

fn do_find<'a>(a: &[Value<'a>], re: &Regex) -> EvalResult<Value<'a>> {
    let s = str_arg("find", a, 0)?;
    Ok(Value::string(re.find(s).map(|m| m.as_str()).unwrap_or("")))
}

fn find<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    let re = runtime_regex("find", a)?;
    do_find(a, &re)
}

/// kube-apiserver plans `find` and `findAll` with a constant pattern as
/// calls of their own, without cel-go's type guard: other operands are
/// refused in the plain words.
fn prepared_operands(a: &[Value], name: &str) -> EvalResult<()> {
    let limit_ok = a.get(2).is_none_or(|n| matches!(n, Value::Int(_)));
    match &a[0] {
        Value::String(_) if limit_ok => Ok(()),
        _ => Err(EvalError::no_overload(name)),
    }
}

fn find_prepared<'a>(
    _: &mut Ctx<'a, '_>,
    a: &[Value<'a>],
    p: &(dyn Any + Send + Sync),
) -> EvalResult<Value<'a>> {
    prepared_operands(a, "find")?;
    do_find(a, regex_arg(p)?)
}

fn do_find_all<'a>(ctx: &mut Ctx<'a, '_>, a: &[Value<'a>], re: &Regex) -> EvalResult<Value<'a>> {
    let s = str_arg("findAll", a, 0)?;
    let limit = if a.len() == 3 {
        int_arg("findAll", a, 2)?
    } else {
        -1
    };
    ctx.charge((s.len() / 10) as u64)?;
    if limit == 0 {
        return Ok(Value::list(vec![]));
    }
    let take = if limit < 0 {
        usize::MAX
    } else {
        limit as usize
    };
    Ok(Value::list(
        re.find_iter(s)
            .take(take)
            .map(|m| Value::string(m.as_str()))
            .collect(),
    ))
}

fn find_all<'a>(ctx: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    if a.len() < 2 {
        return no_overload("findAll", a);
    }
    let re = runtime_regex("findAll", a)?;
    do_find_all(ctx, a, &re)
}

fn find_all_prepared<'a>(
    ctx: &mut Ctx<'a, '_>,
    a: &[Value<'a>],
    p: &(dyn Any + Send + Sync),
) -> EvalResult<Value<'a>> {
    prepared_operands(a, "findAll")?;
    do_find_all(ctx, a, regex_arg(p)?)
}
