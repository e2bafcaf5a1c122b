//! Server-side apply's structured merge of an apply configuration over an
//! object, as a MutatingAdmissionPolicy's `ApplyConfiguration` mutation
//! makes it: structs and maps merged field by field, lists by their list
//! type (atomic: replaced; set: union; map: items merged by their keys),
//! scalars replaced. The schema says which is which; without one (a kind
//! this build has no schema for) objects merge as maps and lists are
//! replaced.

use crate::cel::schema::{Definitions, Schema};
use serde_json::{Map, Value as Json};

/// Why an apply configuration does not merge (kube-apiserver's words).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ApplyError {
    /// A field the schema does not declare.
    #[error("failed to convert patch object to typed object: {0}: field not declared in schema")]
    Undeclared(String),
    /// Lists, maps or structs that are atomic: applying one would drop
    /// what it does not repeat.
    #[error("invalid ApplyConfiguration: may not mutate atomic arrays, maps or structs: {}", .0.join(", "))]
    Atomic(Vec<String>),
    #[error("failed to merge patch: {0}")]
    Merge(String),
}

/// How a list merges.
#[derive(Debug, Clone, PartialEq)]
enum ListKind {
    Atomic,
    Set,
    Map(Vec<String>),
}

/// Merges `patch` over `live`; `root` is the object's schema.
pub fn apply(
    defs: &dyn Definitions,
    root: Option<&Schema>,
    live: &Json,
    patch: &Json,
) -> Result<Json, ApplyError> {
    if let Some(root) = root {
        let mut atomics = Vec::new();
        check_patch(defs, root, patch, &mut String::new(), &mut atomics)?;
        if !atomics.is_empty() {
            return Err(ApplyError::Atomic(atomics));
        }
    }
    let merger = Merger { defs };
    Ok(merger
        .merge(root, Some(live), Some(patch))?
        .unwrap_or(Json::Null))
}

/// `s` with its `$ref` followed.
fn resolve<'s>(defs: &'s dyn Definitions, s: &'s Schema) -> &'s Schema {
    let mut s = s;
    // A definition may name another; kube's are never cyclic at the root.
    for _ in 0..8 {
        match s.reference.as_deref().and_then(|r| defs.definition(r)) {
            Some(d) => s = d,
            None => break,
        }
    }
    s
}

fn is_list(s: &Schema) -> bool {
    s.ty.as_deref() == Some("array") || s.items.is_some()
}

fn is_map(s: &Schema) -> bool {
    s.ty.as_deref() == Some("object")
        || !s.properties.is_empty()
        || s.additional_properties.is_some()
}

/// The list's merge: its list type, else its patch strategy (merge with a
/// key: a map list; merge without: a set), else atomic.
fn list_kind(s: &Schema) -> ListKind {
    match s.list_type.as_deref() {
        Some("set") => ListKind::Set,
        Some("map") => ListKind::Map(s.list_map_keys.clone()),
        Some(_) => ListKind::Atomic,
        None => {
            let merge = s
                .patch_strategy
                .as_deref()
                .is_some_and(|p| p.split(',').any(|x| x == "merge"));
            match (&s.patch_merge_key, merge) {
                (Some(k), true) => ListKind::Map(vec![k.clone()]),
                (None, true) => ListKind::Set,
                _ => ListKind::Atomic,
            }
        }
    }
}

fn atomic_map(s: &Schema, resolved: &Schema) -> bool {
    s.map_type.as_deref() == Some("atomic") || resolved.map_type.as_deref() == Some("atomic")
}

/// The schema of field `key` of a struct or map.
fn field<'s>(s: &'s Schema, key: &str) -> Option<&'s Schema> {
    s.properties.get(key).or(s.additional_properties.as_deref())
}

/// Finds what the patch may not set: undeclared fields (an error at once)
/// and atomic lists, maps and structs (collected, by path, as
/// structured-merge-diff spells it: `.spec.containers[0].args`).
fn check_patch(
    defs: &dyn Definitions,
    s: &Schema,
    v: &Json,
    path: &mut String,
    atomics: &mut Vec<String>,
) -> Result<(), ApplyError> {
    let r = resolve(defs, s);
    match v {
        Json::Object(m) if is_map(r) => {
            if atomic_map(s, r) {
                atomics.push(path.clone());
            }
            for (k, child) in m {
                let at = path.len();
                path.push('.');
                path.push_str(k);
                match r.properties.get(k) {
                    Some(f) => check_patch(defs, f, child, path, atomics)?,
                    None if r.properties.is_empty()
                        || r.additional_properties.is_some()
                        || r.preserve_unknown_fields => {}
                    None => return Err(ApplyError::Undeclared(path.clone())),
                }
                path.truncate(at);
            }
        }
        Json::Array(items) if is_list(r) => {
            if list_kind(r) == ListKind::Atomic {
                atomics.push(path.clone());
            }
            if let Some(item) = r.items.as_deref() {
                for (i, child) in items.iter().enumerate() {
                    let at = path.len();
                    path.push_str(&format!("[{i}]"));
                    check_patch(defs, item, child, path, atomics)?;
                    path.truncate(at);
                }
            }
        }
        _ => {}
    }
    Ok(())
}

struct Merger<'d> {
    defs: &'d dyn Definitions,
}

impl Merger<'_> {
    /// The merge of `rhs` over `lhs` (either may be absent); `None`: the
    /// field is left out.
    fn merge(
        &self,
        s: Option<&Schema>,
        lhs: Option<&Json>,
        rhs: Option<&Json>,
    ) -> Result<Option<Json>, ApplyError> {
        let r = s.map(|s| resolve(self.defs, s));
        let is_map_here = r.map_or_else(
            || as_map(rhs).is_some() && lhs.is_none_or(Json::is_object),
            is_map,
        );
        let is_list_here = r.is_some_and(is_list);
        if is_map_here && (as_map(lhs).is_some() || as_map(rhs).is_some()) {
            let atomic = match (s, r) {
                (Some(s), Some(r)) => atomic_map(s, r),
                _ => false,
            };
            let (l, rr) = (as_map(lhs), as_map(rhs));
            if atomic || (l.is_none_or(Map::is_empty) && rr.is_none_or(Map::is_empty)) {
                return Ok(leaf(lhs, rhs));
            }
            return self.merge_maps(r, l, rr);
        }
        if is_list_here && (as_list(lhs).is_some() || as_list(rhs).is_some()) {
            let r = r.expect("a list has a schema");
            let kind = list_kind(r);
            let (l, rr) = (as_list(lhs), as_list(rhs));
            if kind == ListKind::Atomic
                || (l.is_none_or(Vec::is_empty) && rr.is_none_or(Vec::is_empty))
            {
                return Ok(leaf(lhs, rhs));
            }
            return self.merge_lists(r, &kind, l, rr);
        }
        Ok(leaf(lhs, rhs))
    }

    fn merge_maps(
        &self,
        s: Option<&Schema>,
        lhs: Option<&Map<String, Json>>,
        rhs: Option<&Map<String, Json>>,
    ) -> Result<Option<Json>, ApplyError> {
        let mut out = Map::new();
        let child = |k: &str| s.and_then(|s| field(s, k));
        for (k, l) in lhs.into_iter().flatten() {
            let r = rhs.and_then(|m| m.get(k));
            if let Some(v) = self.merge(child(k), Some(l), r)? {
                out.insert(k.clone(), v);
            }
        }
        for (k, r) in rhs.into_iter().flatten() {
            if lhs.is_some_and(|m| m.contains_key(k)) {
                continue;
            }
            if let Some(v) = self.merge(child(k), None, Some(r))? {
                out.insert(k.clone(), v);
            }
        }
        Ok((!out.is_empty()).then_some(Json::Object(out)))
    }

    /// The order structured-merge-diff gives: the patch's items in its
    /// order, each merged with the object's item of the same key; the
    /// object's other items where they were, relative to the shared ones.
    fn merge_lists(
        &self,
        s: &Schema,
        kind: &ListKind,
        lhs: Option<&Vec<Json>>,
        rhs: Option<&Vec<Json>>,
    ) -> Result<Option<Json>, ApplyError> {
        let item = s.items.as_deref();
        let rhs = keyed(kind, "rhs", rhs)?;
        let lhs = keyed(kind, "lhs", lhs)?;
        let in_rhs = |k: &Json| rhs.iter().find(|(r, _)| r == k).map(|(_, v)| *v);
        let in_lhs = |k: &Json| lhs.iter().find(|(l, _)| l == k).map(|(_, v)| *v);
        let mut shared = rhs.iter().map(|(k, _)| k).filter(|k| in_lhs(k).is_some());
        let mut next_shared = shared.next();
        let mut merged: Vec<&Json> = Vec::new();
        let mut out = Vec::new();
        let (mut li, mut ri) = (0, 0);
        while li < lhs.len() || ri < rhs.len() {
            if li < lhs.len() && ri < rhs.len() {
                let (lk, lv) = &lhs[li];
                if *lk == rhs[ri].0 {
                    merged.push(lk);
                    out.extend(self.merge(item, Some(lv), Some(rhs[ri].1))?);
                    li += 1;
                    ri += 1;
                    next_shared = shared.next();
                    continue;
                }
                if in_rhs(lk).is_some() && next_shared.is_some_and(|n| n != lk) {
                    li += 1;
                    continue;
                }
            }
            if li < lhs.len() {
                let (lk, lv) = &lhs[li];
                if in_rhs(lk).is_none() {
                    out.extend(self.merge(item, Some(lv), None)?);
                    li += 1;
                    continue;
                }
                if merged.contains(&lk) {
                    li += 1;
                    continue;
                }
            }
            if ri < rhs.len() {
                let (rk, rv) = &rhs[ri];
                merged.push(rk);
                out.extend(self.merge(item, in_lhs(rk), Some(rv))?);
                ri += 1;
                if next_shared == Some(rk) {
                    next_shared = shared.next();
                }
            }
        }
        Ok((!out.is_empty()).then_some(Json::Array(out)))
    }
}

fn as_map(v: Option<&Json>) -> Option<&Map<String, Json>> {
    v.and_then(Json::as_object)
}

fn as_list(v: Option<&Json>) -> Option<&Vec<Json>> {
    v.and_then(Json::as_array)
}

/// A list's items with their keys; duplicates are an error.
fn keyed<'j>(
    kind: &ListKind,
    side: &str,
    list: Option<&'j Vec<Json>>,
) -> Result<Vec<(Json, &'j Json)>, ApplyError> {
    let mut out: Vec<(Json, &Json)> = Vec::new();
    for (i, item) in list.into_iter().flatten().enumerate() {
        let key = item_key(kind, item)
            .map_err(|e| ApplyError::Merge(format!("{side}: element {i}: {e}")))?;
        if out.iter().any(|(k, _)| *k == key) {
            return Err(ApplyError::Merge(format!(
                "{side}: duplicate entries for key {}",
                key_string(kind, &key)
            )));
        }
        out.push((key, item));
    }
    Ok(out)
}

/// The value that stands: rhs's when given (null too), else lhs's.
fn leaf(lhs: Option<&Json>, rhs: Option<&Json>) -> Option<Json> {
    rhs.or(lhs).cloned()
}

/// An associative list's item that is not a map (structured-merge-diff's
/// words).
#[derive(Debug, thiserror::Error)]
#[error("expected an object for an associative list item")]
struct NotAnObject;

/// What identifies a list item: itself in a set, its keys' values in a
/// map list.
fn item_key(kind: &ListKind, item: &Json) -> Result<Json, NotAnObject> {
    match kind {
        ListKind::Map(keys) if !keys.is_empty() => {
            let obj = item.as_object().ok_or(NotAnObject)?;
            Ok(Json::Array(
                keys.iter()
                    .map(|k| obj.get(k).cloned().unwrap_or(Json::Null))
                    .collect(),
            ))
        }
        _ => Ok(item.clone()),
    }
}

fn key_string(kind: &ListKind, key: &Json) -> String {
    match (kind, key) {
        (ListKind::Map(names), Json::Array(values)) => format!(
            "[{}]",
            names
                .iter()
                .zip(values)
                .map(|(n, v)| format!("{n}={v}"))
                .collect::<Vec<_>>()
                .join(",")
        ),
        (_, v) => format!("[={v}]"),
    }
}

#[cfg(test)]
#[path = "apply_tests.rs"]
mod tests;
