//! Parsed documents to Kubernetes objects: checks the fields every object
//! needs and unpacks lists.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use super::error::{LoadError, LoadErrorKind, Source};
use super::positions::{child_index, child_key, PositionIndex, ROOT};
use super::yaml::RawDoc;
use super::{Document, Positions};

/// A short name for the type of a JSON value, for messages.
pub(crate) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

/// Like [`type_name`], with a hint for booleans where a string was meant.
fn found_name(v: &Value) -> &'static str {
    match v {
        Value::Bool(_) => {
            "a boolean (unquoted y, n, yes, no, on and off are booleans in YAML; quote the value)"
        }
        Value::String(s) if s.is_empty() => "an empty string",
        other => type_name(other),
    }
}

/// True for `kind: List` and for `FooList` kinds that carry `items`.
pub(crate) fn is_list(v: &Value) -> bool {
    let Some(kind) = v.get("kind").and_then(Value::as_str) else {
        return false;
    };
    kind == "List" || (kind.ends_with("List") && v.get("items").is_some_and(Value::is_array))
}

/// Checks one parsed document and adds its objects (one, or the items of a
/// list) to `docs`, or the reason it is not an object to `errors`.
pub(crate) fn unpack(
    source: &Source,
    raw: RawDoc,
    docs: &mut Vec<Document>,
    errors: &mut Vec<LoadError>,
) {
    if raw.empty {
        return;
    }
    let index = Arc::new(raw.index);
    // (value, path hash, line), in document order.
    let mut work = vec![(raw.value, ROOT, raw.line)];
    while let Some((value, base, line)) = work.pop() {
        let line_of = |hash: u64| index.get(hash).map_or(line, |l| l as usize);
        if let Err((kind, at)) = check_type(&value, base, &index) {
            errors.push(LoadError::new(
                source.clone(),
                Some(at.unwrap_or(line)),
                kind,
            ));
            continue;
        }
        if is_list(&value) {
            let items_hash = child_key(base, "items");
            let Value::Object(mut map) = value else {
                continue;
            };
            match map.remove("items") {
                None | Some(Value::Null) => {}
                Some(Value::Array(items)) => {
                    let items_line = line_of(items_hash);
                    let mut pending: Vec<_> = items
                        .into_iter()
                        .enumerate()
                        .map(|(i, item)| {
                            let h = child_index(items_hash, i);
                            let l = index.get(h).map_or(items_line, |l| l as usize);
                            (item, h, l)
                        })
                        .collect();
                    // `work` is a stack: push in reverse to keep file order.
                    pending.reverse();
                    work.extend(pending);
                }
                Some(other) => errors.push(LoadError::new(
                    source.clone(),
                    Some(line_of(items_hash)),
                    LoadErrorKind::BadField {
                        field: "items",
                        expected: "a list of objects",
                        found: type_name(&other),
                    },
                )),
            }
            continue;
        }
        if let Err((kind, at)) = check_name(&value, base, &index) {
            errors.push(LoadError::new(
                source.clone(),
                Some(at.unwrap_or(line)),
                kind,
            ));
            continue;
        }
        docs.push(Document {
            source: source.clone(),
            line,
            value,
            positions: Positions {
                index: Arc::clone(&index),
                base,
            },
            rendered_by: None,
        });
    }
}

type Check = Result<(), (LoadErrorKind, Option<usize>)>;

fn field_line(index: &PositionIndex, hash: u64) -> Option<usize> {
    index.get(hash).map(|l| l as usize)
}

/// `apiVersion` and `kind`.
fn check_type(v: &Value, base: u64, index: &PositionIndex) -> Check {
    let Value::Object(map) = v else {
        return Err((
            LoadErrorKind::NotAMapping {
                found: type_name(v),
            },
            None,
        ));
    };
    for field in ["apiVersion", "kind"] {
        match map.get(field) {
            None | Some(Value::Null) => {
                return Err((LoadErrorKind::MissingTypeField { field }, None));
            }
            Some(Value::String(s)) if !s.is_empty() => {}
            Some(other) => {
                return Err((
                    LoadErrorKind::BadField {
                        field,
                        expected: "a non-empty string",
                        found: found_name(other),
                    },
                    field_line(index, child_key(base, field)),
                ));
            }
        }
    }
    Ok(())
}

/// `metadata.name` (or `metadata.generateName`) and `metadata.namespace`.
fn check_name(v: &Value, base: u64, index: &PositionIndex) -> Check {
    let meta_hash = child_key(base, "metadata");
    let meta = match v.get("metadata") {
        None | Some(Value::Null) => return Err((LoadErrorKind::MissingName, None)),
        Some(Value::Object(m)) => m,
        Some(other) => {
            return Err((
                LoadErrorKind::BadField {
                    field: "metadata",
                    expected: "a mapping",
                    found: type_name(other),
                },
                field_line(index, meta_hash),
            ))
        }
    };
    let bad = |field: &'static str, key: &str, found: &Value| {
        (
            LoadErrorKind::BadField {
                field,
                expected: "a non-empty string",
                found: found_name(found),
            },
            field_line(index, child_key(meta_hash, key)).or(field_line(index, meta_hash)),
        )
    };
    match meta.get("name") {
        Some(Value::String(s)) if !s.is_empty() => {}
        None | Some(Value::Null) => match meta.get("generateName") {
            Some(Value::String(s)) if !s.is_empty() => {}
            None | Some(Value::Null) => {
                return Err((LoadErrorKind::MissingName, field_line(index, meta_hash)))
            }
            Some(other) => return Err(bad("metadata.generateName", "generateName", other)),
        },
        Some(other) => return Err(bad("metadata.name", "name", other)),
    }
    match meta.get("namespace") {
        None | Some(Value::Null) | Some(Value::String(_)) => {}
        Some(other) => {
            return Err((
                LoadErrorKind::BadField {
                    field: "metadata.namespace",
                    expected: "a string",
                    found: found_name(other),
                },
                field_line(index, child_key(meta_hash, "namespace")),
            ))
        }
    }
    Ok(())
}

/// Finds objects given twice (same API group, kind, namespace and name) and
/// returns the indexes of the later copies with an error for each.
pub(crate) fn duplicates(docs: &[Document]) -> Vec<(usize, LoadError)> {
    let mut seen: HashMap<(&str, &str, &str, &str), usize> = HashMap::new();
    let mut out = Vec::new();
    for (i, d) in docs.iter().enumerate() {
        let Some(name) = d.name() else { continue };
        let group = d.api_version().rsplit_once('/').map_or("", |(g, _)| g);
        let key = (group, d.kind(), d.namespace().unwrap_or(""), name);
        match seen.get(&key) {
            None => {
                seen.insert(key, i);
            }
            Some(&first) => {
                let f = &docs[first];
                out.push((
                    i,
                    LoadError::new(
                        d.source.clone(),
                        Some(d.line),
                        LoadErrorKind::DuplicateObject {
                            object: d.display_name(),
                            first: format!("{}:{}", f.source, f.line),
                        },
                    ),
                ));
            }
        }
    }
    out
}
