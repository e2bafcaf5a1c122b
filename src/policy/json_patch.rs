//! RFC 6902 JSON patches as kube-apiserver applies a
//! MutatingAdmissionPolicy's `JSONPatch` mutation, with its messages: a
//! failed `test` leaves the object as it was (the whole patch is dropped),
//! any other failure is an error.

use serde_json::Value as Json;

/// Why a patch does not apply.
enum Failure {
    TestFailed,
    Error(String),
}

/// An operation that does not apply, in the words of kube-apiserver's
/// JSON patch library (they reach the client unchanged).
#[derive(Debug, thiserror::Error)]
#[error("JSON Patch: {0}")]
pub(super) struct PatchError(String);

/// `object` with `ops` applied in order.
pub(super) fn apply(object: &Json, ops: &[Json]) -> Result<Json, PatchError> {
    let mut doc = object.clone();
    for op in ops {
        match apply_one(&mut doc, op) {
            Ok(()) => {}
            Err(Failure::TestFailed) => return Ok(object.clone()),
            Err(Failure::Error(e)) => return Err(PatchError(e)),
        }
    }
    Ok(doc)
}

fn field<'a>(op: &'a Json, name: &str) -> &'a str {
    op.get(name).and_then(Json::as_str).unwrap_or("")
}

fn apply_one(doc: &mut Json, op: &Json) -> Result<(), Failure> {
    let path = field(op, "path");
    let value = || op.get("value").cloned().unwrap_or(Json::Null);
    let err = |m: String| Failure::Error(m);
    match field(op, "op") {
        "add" => add(doc, path, value()).map_err(|_| {
            err(format!(
                "add operation does not apply: doc is missing path: \"{path}\": missing value"
            ))
        }),
        "remove" => remove(doc, path).map(drop),
        "replace" => {
            let (parent, key) = parent_of(doc, path).ok_or_else(|| {
                err(format!(
                    "replace operation does not apply: doc is missing path: {path}: missing value"
                ))
            })?;
            // kube's library replaces a missing member of an object as if
            // it were there; only a missing array item is an error.
            if let Json::Object(m) = parent {
                m.insert(key, value());
                return Ok(());
            }
            let slot = child_mut(parent, &key).ok_or_else(|| {
                err(format!(
                    "replace operation does not apply: doc is missing key: {path}: missing value"
                ))
            })?;
            *slot = value();
            Ok(())
        }
        "move" => {
            let from = field(op, "from");
            let moved = remove(doc, from)?;
            add(doc, path, moved).map_err(|_| {
                err(format!(
                    "move operation does not apply: doc is missing destination path: {path}: missing value"
                ))
            })
        }
        "copy" => {
            let from = field(op, "from");
            let copied = get(doc, from).cloned().ok_or_else(|| {
                err(format!(
                    "copy operation does not apply: doc is missing from path: {from}: missing value"
                ))
            })?;
            add(doc, path, copied).map_err(|_| {
                err(format!(
                    "copy operation does not apply: doc is missing destination path: {path}: missing value"
                ))
            })
        }
        "test" => match get(doc, path) {
            Some(v) if *v == value() => Ok(()),
            None if value().is_null() => Ok(()),
            _ => Err(Failure::TestFailed),
        },
        other => Err(err(format!("Unexpected kind: {other}"))),
    }
}

/// The tokens of a JSON pointer, unescaped.
fn tokens(path: &str) -> Vec<String> {
    path.split('/')
        .skip(1)
        .map(|t| t.replace("~1", "/").replace("~0", "~"))
        .collect()
}

fn get<'a>(doc: &'a Json, path: &str) -> Option<&'a Json> {
    if path.is_empty() {
        return Some(doc);
    }
    tokens(path).iter().try_fold(doc, |v, t| match v {
        Json::Object(m) => m.get(t),
        Json::Array(items) => items.get(t.parse::<usize>().ok()?),
        _ => None,
    })
}

/// The container of `path`'s last token, and that token.
fn parent_of<'a>(doc: &'a mut Json, path: &str) -> Option<(&'a mut Json, String)> {
    let mut toks = tokens(path);
    let last = toks.pop()?;
    let parent = toks.iter().try_fold(doc, |v, t| child_mut(v, t))?;
    matches!(parent, Json::Object(_) | Json::Array(_)).then_some((parent, last))
}

fn child_mut<'a>(v: &'a mut Json, t: &str) -> Option<&'a mut Json> {
    match v {
        Json::Object(m) => m.get_mut(t),
        Json::Array(items) => {
            let i = index(t, items.len())?;
            items.get_mut(i)
        }
        _ => None,
    }
}

/// An array index; negative ones count from the end, as kube's JSON patch
/// library allows.
fn index(t: &str, len: usize) -> Option<usize> {
    let i: i64 = t.parse().ok()?;
    let i = if i < 0 { i + len as i64 } else { i };
    usize::try_from(i).ok()
}

fn add(doc: &mut Json, path: &str, value: Json) -> Result<(), ()> {
    if path.is_empty() {
        *doc = value;
        return Ok(());
    }
    let (parent, key) = parent_of(doc, path).ok_or(())?;
    match parent {
        Json::Object(m) => {
            m.insert(key, value);
            Ok(())
        }
        Json::Array(items) if key == "-" => {
            items.push(value);
            Ok(())
        }
        Json::Array(items) => {
            let i = index(&key, items.len())
                .filter(|i| *i <= items.len())
                .ok_or(())?;
            items.insert(i, value);
            Ok(())
        }
        _ => Err(()),
    }
}

fn remove(doc: &mut Json, path: &str) -> Result<Json, Failure> {
    let (parent, key) = parent_of(doc, path).ok_or_else(|| {
        Failure::Error(format!(
            "remove operation does not apply: doc is missing path: \"{path}\": missing value"
        ))
    })?;
    let removed = match parent {
        Json::Object(m) => m
            .remove(&key)
            .ok_or_else(|| format!("Unable to remove nonexistent key: {key}: missing value")),
        Json::Array(items) => index(&key, items.len())
            .filter(|i| *i < items.len())
            .map(|i| items.remove(i))
            .ok_or_else(|| {
                format!("Unable to remove invalid index: {key}: invalid index referenced")
            }),
        _ => Err(format!(
            "Unable to remove nonexistent key: {key}: missing value"
        )),
    };
    removed.map_err(|e| Failure::Error(format!("error in remove for path: '{path}': {e}")))
}

#[cfg(test)]
#[path = "json_patch_tests.rs"]
mod tests;
