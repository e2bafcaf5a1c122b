//! cel-go's lists extension (v3) and the Kubernetes lists library.

use super::{int_arg, no_overload, no_trait_overload, Arity, FnDecl, Lib, Style};
use crate::cel::error::{EvalError, EvalResult};
use crate::cel::program::Ctx;
use crate::cel::value::{List, Value};
use std::cmp::Ordering;

pub const DECLS: &[FnDecl] = &[
    FnDecl::global("lists.range", 1, Lib::ListsExt, range),
    FnDecl::member("slice", 3, Lib::ListsExt, slice),
    FnDecl::new(
        "flatten",
        Style::Member,
        Arity::Range(1, 2),
        Lib::ListsExt,
        flatten,
    ),
    FnDecl::member("distinct", 1, Lib::ListsExt, distinct),
    FnDecl::member("sort", 1, Lib::ListsExt, sort),
    FnDecl::member("first", 1, Lib::ListsExt, first),
    FnDecl::member("last", 1, Lib::ListsExt, last),
    FnDecl::member("isSorted", 1, Lib::KubeLists, is_sorted),
    FnDecl::member("sum", 1, Lib::KubeLists, sum),
    FnDecl::member("min", 1, Lib::KubeLists, min),
    FnDecl::member("max", 1, Lib::KubeLists, max),
];

/// `distinct`, `sort` and `sortBy`'s `@sortByAssociatedKeys` as
/// kube-apiserver plans them when the checker resolved the call to one
/// overload: with a cost tracker that asserts their list argument is a
/// list (`distinct` has only the one overload).
pub static DISTINCT_TRACKED: FnDecl =
    FnDecl::member("distinct", 1, Lib::ListsExt, distinct).tracking(0);
pub static SORT_TRACKED: FnDecl = FnDecl::member("sort", 1, Lib::ListsExt, sort).tracking(0);
pub static SORT_BY_TRACKED: FnDecl =
    FnDecl::global("@sortByAssociatedKeys", 2, Lib::ListsExt, sort_by_keys).tracking(1);

fn list<'v, 'a>(name: &str, a: &'v [Value<'a>]) -> EvalResult<&'v List<'a>> {
    match &a[0] {
        Value::List(l) => Ok(l),
        _ => no_overload(name, a),
    }
}

fn range<'a>(ctx: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    let n = int_arg("lists.range", a, 0)?;
    ctx.charge(n.max(0) as u64)?;
    ctx.alloc_values(usize::try_from(n.max(0)).unwrap_or(usize::MAX))?;
    Ok(Value::list((0..n.max(0)).map(Value::Int).collect()))
}

fn slice<'a>(ctx: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    let l = list("slice", a)?;
    let start = int_arg("slice", a, 1)?;
    let end = int_arg("slice", a, 2)?;
    if start < 0 || end < 0 {
        return Err(EvalError::new(format!(
            "cannot slice({start}, {end}), negative indexes not supported"
        )));
    }
    if start > end {
        return Err(EvalError::new(format!(
            "cannot slice({start}, {end}), start index must be less than or equal to end index"
        )));
    }
    if end as usize > l.len() {
        return Err(EvalError::new(format!(
            "cannot slice({start}, {end}), list is length {}",
            l.len()
        )));
    }
    ctx.charge((end - start) as u64)?;
    ctx.alloc_values((end - start) as usize)?;
    Ok(Value::list(
        l.iter()
            .skip(start as usize)
            .take((end - start) as usize)
            .collect(),
    ))
}

/// How many elements `flatten_into` would push, counted without copying.
fn flattened_len(l: &List, depth: i64) -> usize {
    l.iter()
        .map(|v| match (&v, depth) {
            (Value::List(inner), d) if d > 0 => flattened_len(inner, d - 1),
            _ => 1,
        })
        .fold(0, usize::saturating_add)
}

fn flatten_into<'a>(out: &mut Vec<Value<'a>>, l: &List<'a>, depth: i64) {
    for v in l.iter() {
        match (&v, depth) {
            (Value::List(inner), d) if d > 0 => flatten_into(out, inner, d - 1),
            _ => out.push(v),
        }
    }
}

fn flatten<'a>(ctx: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    // cel-go declares `flatten` without type guards and refuses other
    // values itself, in its own words.
    let refused = || {
        let types: Vec<String> = a[1..].iter().map(Value::type_name).collect();
        EvalError::new(format!(
            "no such overload: {}.flatten({})",
            a[0].type_name(),
            types.join(", ")
        ))
    };
    let Value::List(l) = &a[0] else {
        return Err(refused());
    };
    let depth = match a.get(1) {
        None => 1,
        Some(Value::Int(d)) => *d,
        Some(_) => return Err(refused()),
    };
    if depth < 0 {
        return Err(EvalError::new("level must be non-negative"));
    }
    // Counted first: the same large list nested many times over flattens
    // into many times its size.
    let n = flattened_len(l, depth);
    ctx.charge(n as u64)?;
    ctx.alloc_values(n)?;
    let mut out = Vec::with_capacity(n);
    flatten_into(&mut out, l, depth);
    Ok(Value::list(out))
}

fn distinct<'a>(ctx: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    let l = list("distinct", a)?;
    ctx.charge((l.len() * l.len()) as u64 / 8)?;
    // Lists of strings (names, the common case) are deduplicated through a
    // set, so that the time, unlike the cost charged, stays linear.
    let items = l.to_vec();
    if items.iter().all(|v| matches!(v, Value::String(_))) {
        let mut seen = std::collections::HashSet::with_capacity(items.len());
        let out = items
            .into_iter()
            .filter(|v| seen.insert(v.as_str().unwrap_or_default().to_owned()))
            .collect();
        return Ok(Value::list(out));
    }
    let mut out: Vec<Value<'a>> = Vec::new();
    for v in items {
        if !out.iter().any(|w| w.equals(&v)) {
            out.push(v);
        }
    }
    Ok(Value::list(out))
}

/// Orders list elements; they must all be of one comparable type.
fn sorted<'a>(l: &List<'a>) -> EvalResult<Vec<Value<'a>>> {
    let mut items = l.to_vec();
    check_sort_keys(&items)?;
    let mut err = None;
    items.sort_by(|x, y| {
        x.compare(y).unwrap_or_else(|e| {
            err.get_or_insert(e);
            Ordering::Equal
        })
    });
    match err {
        Some(e) => Err(e),
        None => Ok(items),
    }
}

/// The keys `sort` and `sortBy` order by, in cel-go's words: the first
/// must be comparable, the others of its type.
fn check_sort_keys(keys: &[Value]) -> EvalResult<()> {
    let Some(first) = keys.first() else {
        return Ok(());
    };
    let comparable = matches!(
        first,
        Value::Int(_)
            | Value::Uint(_)
            | Value::Double(_)
            | Value::String(_)
            | Value::Bool(_)
            | Value::Bytes(_)
            | Value::Duration(_)
            | Value::Timestamp(_)
    );
    if !comparable {
        return Err(EvalError::new("list elements must be comparable"));
    }
    let t = first.type_of();
    if keys.iter().any(|v| v.type_of() != t) {
        return Err(EvalError::new("list elements must have the same type"));
    }
    Ok(())
}

fn sort<'a>(ctx: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    // One implementation for every element type, guarded by the list trait.
    let Value::List(l) = &a[0] else {
        return no_trait_overload("sort", &a[0], false);
    };
    ctx.charge(l.len() as u64 * 2)?;
    ctx.alloc_values(l.len())?;
    Ok(Value::list(sorted(l)?))
}

/// The expansion of `l.sortBy(e, key)`: sorts `l` by the parallel list of keys.
pub fn sort_by_keys<'a>(ctx: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    let (Value::List(items), Value::List(keys)) = (&a[0], &a[1]) else {
        return no_trait_overload("@sortByAssociatedKeys", &a[0], false);
    };
    ctx.charge(items.len() as u64 * 2)?;
    ctx.alloc_values(items.len().saturating_mul(2))?;
    let keys = keys.to_vec();
    check_sort_keys(&keys)?;
    let mut pairs: Vec<(Value<'a>, Value<'a>)> = keys.into_iter().zip(items.iter()).collect();
    let mut err = None;
    pairs.sort_by(|x, y| {
        x.0.compare(&y.0).unwrap_or_else(|e| {
            err.get_or_insert(e);
            Ordering::Equal
        })
    });
    match err {
        Some(e) => Err(e),
        None => Ok(Value::list(pairs.into_iter().map(|p| p.1).collect())),
    }
}

fn first<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    let l = list("first", a)?;
    Ok(Value::optional(l.get(0)))
}

fn last<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    let l = list("last", a)?;
    Ok(Value::optional(
        l.len().checked_sub(1).and_then(|i| l.get(i)),
    ))
}

/// `l.reverse()`; strings have their own, dispatched here by receiver type.
pub fn reverse<'a>(ctx: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    let l = list("reverse", a)?;
    ctx.alloc_values(l.len())?;
    let mut v = l.to_vec();
    v.reverse();
    Ok(Value::list(v))
}

/// `l.indexOf(x)` / `l.lastIndexOf(x)` of the Kubernetes lists library.
pub fn index_of<'a>(ctx: &mut Ctx<'a, '_>, a: &[Value<'a>], last: bool) -> EvalResult<Value<'a>> {
    let name = if last { "lastIndexOf" } else { "indexOf" };
    let l = list(name, a)?;
    if a.len() != 2 {
        return no_overload(name, a);
    }
    ctx.charge(l.len() as u64)?;
    let mut found = -1;
    for (i, v) in l.iter().enumerate() {
        if v.equals(&a[1]) {
            found = i as i64;
            if !last {
                break;
            }
        }
    }
    Ok(Value::Int(found))
}

/// Values with cel-go's comparer trait: the element types the Kubernetes
/// lists library declares `isSorted`, `min` and `max` for.
fn comparer(v: &Value) -> bool {
    matches!(
        v,
        Value::Int(_)
            | Value::Uint(_)
            | Value::Double(_)
            | Value::Bool(_)
            | Value::String(_)
            | Value::Bytes(_)
            | Value::Duration(_)
            | Value::Timestamp(_)
    )
}

/// The receiver of `isSorted`, `min` or `max`, whose overloads (one per
/// element type) cel-go's type guard matches by the first element.
fn comparable_list<'v, 'a>(name: &str, a: &'v [Value<'a>]) -> EvalResult<&'v List<'a>> {
    match &a[0] {
        Value::List(l) if l.get(0).is_none_or(|v| comparer(&v)) => Ok(l),
        _ => no_overload(name, a),
    }
}

/// The library compares neighbours as cel-go's values do, and ignores a
/// comparison that fails (other types, NaN); an element that cannot be
/// compared at all is `no such overload`.
fn is_sorted<'a>(ctx: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    let l = comparable_list("isSorted", a)?;
    ctx.charge(l.len() as u64)?;
    let mut prev: Option<Value<'a>> = None;
    for next in l.iter() {
        if !comparer(&next) {
            return Err(EvalError::no_overload("isSorted"));
        }
        if prev
            .as_ref()
            .is_some_and(|p| p.compare(&next).ok() == Some(Ordering::Greater))
        {
            return Ok(Value::Bool(false));
        }
        prev = Some(next);
    }
    Ok(Value::Bool(true))
}

fn sum<'a>(ctx: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    let l = list("sum", a)?;
    ctx.charge(l.len() as u64)?;
    let mut acc: Option<Value<'a>> = None;
    for v in l.iter() {
        acc = Some(match acc {
            None => v,
            Some(x) => super::core::DECLS
                .iter()
                .find(|d| d.name == "_+_")
                .map(|d| (d.imp)(ctx, &[x, v]))
                .unwrap_or_else(|| Err(EvalError::new("internal: no addition")))?,
        });
    }
    Ok(acc.unwrap_or(Value::Int(0)))
}

/// `min` or `max`: the first element, replaced by each later one it
/// compares `replace_when` to (comparisons that fail are ignored).
fn extreme<'a>(
    ctx: &mut Ctx<'a, '_>,
    name: &str,
    a: &[Value<'a>],
    replace_when: Ordering,
) -> EvalResult<Value<'a>> {
    let l = comparable_list(name, a)?;
    ctx.charge(l.len() as u64)?;
    let mut best: Option<Value<'a>> = None;
    for v in l.iter() {
        if !comparer(&v) {
            return Err(EvalError::no_overload(name));
        }
        best = Some(match best {
            Some(b) if b.compare(&v).ok() != Some(replace_when) => b,
            _ => v,
        });
    }
    best.ok_or_else(|| EvalError::new(format!("{name} called on empty list")))
}

fn min<'a>(ctx: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    extreme(ctx, "min", a, Ordering::Greater)
}

fn max<'a>(ctx: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    extreme(ctx, "max", a, Ordering::Less)
}
