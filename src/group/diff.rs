//! Does a member need a write? Zero-write convergence rests on this answer:
//! a converged group must make no write on its next pass, nor after a
//! restart (which has no memory of earlier passes), so the question is
//! answered from the stored object alone.
//!
//! The stored object "holds" the desired one when every field the group
//! sets is there with the same value. Fields the server adds (defaults,
//! status, uid, managedFields, other owners' fields) are ignored; a field
//! the group sets that someone changed or removed by hand is not.

use serde_json::{Map, Value};

/// Whether `live` lacks or contradicts some field of `desired`, so that a
/// server-side apply of `desired` would change the stored object.
///
/// `desired` is the object as it will be applied (ownerReference and labels
/// included). Rules: maps match recursively (extra live keys are fine);
/// lists match element by element with the same length, except lists of
/// named objects (`containers`, `env`, `volumes`, ...), matched by `name`,
/// and `metadata.ownerReferences`, matched by `uid`, where live may hold
/// extra elements (server-side apply merges those lists by key and keeps
/// other managers' elements, so re-applying would not remove them anyway);
/// scalars are equal when equal as JSON, as numbers (`1 == 1.0`), or, under
/// `resources`-like maps, as Kubernetes quantities (`500m == 0.5`), since
/// the server stores quantities in canonical form. A desired zero value
/// (`null`, `false`, `0`, `""`, `{}`, `[]`) is matched by an absent field,
/// and a Secret's `stringData` is compared as the `data` it is stored as.
pub fn needs_apply(desired: &Value, live: &Value) -> bool {
    let mut walk = Walk::first();
    compare(desired, live, &mut walk);
    !walk.found.is_empty()
}

/// The fields of `desired` that `live` lacks or contradicts, by the rules
/// of [`needs_apply`] (empty exactly when it is false), as paths in the
/// manifest: `data.mode`, `metadata.labels["app.kubernetes.io/name"]`,
/// `spec.template.spec.containers[0].image` (list positions are the
/// manifest's). A list that differs in length, or a named element that is
/// missing, is named as a whole.
pub fn differing_fields(desired: &Value, live: &Value) -> Vec<String> {
    let mut walk = Walk {
        path: Vec::new(),
        found: Vec::new(),
        all: true,
    };
    compare(desired, live, &mut walk);
    walk.found
}

fn compare<'a>(desired: &'a Value, live: &'a Value, walk: &mut Walk<'a>) {
    match secret_string_data(desired) {
        Some(stored_form) => {
            // The stored form is owned here: compare it without paths into it.
            let mut inner = Walk {
                path: Vec::new(),
                found: Vec::new(),
                all: walk.all,
            };
            holds(live, &stored_form, Context::Root, &mut inner);
            walk.found.extend(inner.found);
        }
        None => holds(live, desired, Context::Root, walk),
    }
}

/// A Secret's `stringData` as the server stores it: merged into `data`,
/// base64-encoded (the stored object never has `stringData`, so comparing
/// it as written would make the Secret look changed on every pass).
fn secret_string_data(desired: &Value) -> Option<Value> {
    use base64::Engine as _;
    let string_data = desired.get("stringData")?.as_object()?;
    if desired.get("kind").and_then(Value::as_str) != Some("Secret")
        || desired.get("apiVersion").and_then(Value::as_str) != Some("v1")
    {
        return None;
    }
    let mut stored = desired.clone();
    let object = stored.as_object_mut()?;
    object.remove("stringData");
    let data = object
        .entry("data")
        .or_insert_with(|| Value::Object(Map::new()));
    let data = data.as_object_mut()?;
    for (key, value) in string_data {
        let text = value.as_str().unwrap_or_default();
        let encoded = base64::engine::general_purpose::STANDARD.encode(text);
        data.insert(key.clone(), Value::String(encoded));
    }
    Some(stored)
}

/// One step of a path into an object.
#[derive(Clone, Copy)]
enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

/// A comparison under way: where it is, and the paths that differ so far.
/// Without `all` it stops at the first difference (the cost of
/// [`needs_apply`], which every pass pays for every member, stays that of
/// a plain comparison: paths are rendered only for differences).
struct Walk<'a> {
    path: Vec<Step<'a>>,
    found: Vec<String>,
    all: bool,
}

impl<'a> Walk<'a> {
    fn first() -> Walk<'a> {
        Walk {
            path: Vec::new(),
            found: Vec::new(),
            all: false,
        }
    }

    fn done(&self) -> bool {
        !self.all && !self.found.is_empty()
    }

    fn differs(&mut self) {
        let mut text = String::new();
        for step in &self.path {
            match step {
                Step::Key(k) => {
                    let plain = !k.is_empty()
                        && k.chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
                    match (text.is_empty(), plain) {
                        (true, true) => text.push_str(k),
                        (false, true) => {
                            text.push('.');
                            text.push_str(k);
                        }
                        (_, false) => {
                            text.push_str(&format!("[{}]", Value::String(k.to_string())));
                        }
                    }
                }
                Step::Index(i) => text.push_str(&format!("[{i}]")),
            }
        }
        self.found.push(text);
    }

    fn at(&mut self, step: Step<'a>, f: impl FnOnce(&mut Walk<'a>)) {
        self.path.push(step);
        f(self);
        self.path.pop();
    }
}

/// Where in the object a comparison is, for the few places with rules of
/// their own.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Context {
    Root,
    Metadata,
    Field,
    /// Values of a map such as `resources.limits`: quantities.
    Quantities,
}

fn holds<'a>(live: &'a Value, desired: &'a Value, ctx: Context, walk: &mut Walk<'a>) {
    let same = match (desired, live) {
        (Value::Object(d), Value::Object(l)) => return map_holds(l, d, ctx, walk),
        (Value::Array(d), Value::Array(l)) => return list_holds(l, d, walk),
        (Value::Number(d), Value::Number(l)) => numbers_equal(d, l),
        (d, l) if ctx == Context::Quantities => d == l || quantities_equal(d, l),
        (d, l) => d == l,
    };
    if !same {
        walk.differs();
    }
}

fn map_holds<'a>(
    live: &'a Map<String, Value>,
    desired: &'a Map<String, Value>,
    ctx: Context,
    walk: &mut Walk<'a>,
) {
    for (key, d) in desired {
        if walk.done() {
            return;
        }
        let child = child_context(ctx, key);
        walk.at(Step::Key(key), |walk| match live.get(key) {
            Some(l) if ctx == Context::Metadata && key == "ownerReferences" => {
                keyed_list_holds(l, d, "uid", walk)
            }
            Some(l) => holds(l, d, child, walk),
            None if is_empty(d) => {}
            None => walk.differs(),
        });
    }
}

fn child_context(ctx: Context, key: &str) -> Context {
    match (ctx, key) {
        (Context::Quantities, _) => Context::Quantities,
        (Context::Root, "metadata") => Context::Metadata,
        // Quantity maps: container resources, ResourceQuota `hard`, PVC
        // `capacity` and LimitRange's per-type maps.
        (
            _,
            "limits"
            | "requests"
            | "hard"
            | "capacity"
            | "max"
            | "min"
            | "default"
            | "defaultRequest"
            | "maxLimitRequestRatio",
        ) => Context::Quantities,
        _ => Context::Field,
    }
}

fn list_holds<'a>(live: &'a [Value], desired: &'a [Value], walk: &mut Walk<'a>) {
    if let Some(key) = merge_key(desired) {
        return elements_hold(live, desired, key, walk);
    }
    if live.len() != desired.len() {
        return walk.differs();
    }
    for (i, (d, l)) in desired.iter().zip(live).enumerate() {
        if walk.done() {
            return;
        }
        walk.at(Step::Index(i), |walk| holds(l, d, Context::Field, walk));
    }
}

/// Each desired element against the live element with the same `key`.
fn elements_hold<'a>(live: &'a [Value], desired: &'a [Value], key: &str, walk: &mut Walk<'a>) {
    for (i, d) in desired.iter().enumerate() {
        if walk.done() {
            return;
        }
        let id = d.get(key);
        let found = live
            .iter()
            .find(|l| l.get(key).is_some() && l.get(key) == id);
        walk.at(Step::Index(i), |walk| match found {
            Some(l) => holds(l, d, Context::Field, walk),
            None => walk.differs(),
        });
    }
}

fn keyed_list_holds<'a>(live: &'a Value, desired: &'a Value, key: &str, walk: &mut Walk<'a>) {
    match (desired.as_array(), live.as_array()) {
        (Some(d), Some(l)) => elements_hold(l, d, key, walk),
        _ => holds(live, desired, Context::Field, walk),
    }
}

/// `name` when every desired element is an object with a distinct string
/// `name` (containers, env, volumes, ports, ...): the lists server-side
/// apply merges by key.
fn merge_key(desired: &[Value]) -> Option<&'static str> {
    let mut names: Vec<&str> = Vec::with_capacity(desired.len());
    for d in desired {
        names.push(d.get("name")?.as_str()?);
    }
    names.sort_unstable();
    let distinct = names.windows(2).all(|w| w[0] != w[1]);
    (!desired.is_empty() && distinct).then_some("name")
}

/// Values an absent field matches: the API server drops zero values of
/// `omitempty` fields (`hostNetwork: false`, `workingDir: ""`), and a
/// field it does not drop is defaulted, so a hand edit that removes a
/// field shows as a different value, not as an absence.
fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
    }
}

fn numbers_equal(a: &serde_json::Number, b: &serde_json::Number) -> bool {
    if let (Some(x), Some(y)) = (a.as_i64(), b.as_i64()) {
        return x == y;
    }
    if let (Some(x), Some(y)) = (a.as_u64(), b.as_u64()) {
        return x == y;
    }
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => x == y,
        _ => false,
    }
}

/// `"500m"` and `0.5`, or `"1Gi"` and `"1024Mi"`: equal amounts.
fn quantities_equal(a: &Value, b: &Value) -> bool {
    use crate::cel::k8s::quantity::Quantity;
    let parse = |v: &Value| match v {
        Value::String(s) => Quantity::parse(s).ok(),
        Value::Number(n) => Quantity::parse(&n.to_string()).ok(),
        _ => None,
    };
    match (parse(a), parse(b)) {
        (Some(x), Some(y)) => x.compare(&y) == std::cmp::Ordering::Equal,
        _ => false,
    }
}

#[cfg(test)]
#[path = "diff_tests.rs"]
mod tests;
