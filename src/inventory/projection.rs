//! Projection: the inventory keeps, per kind, only the fields that the
//! loaded policies can read (docs/architecture.md), so a policy about Secret names
//! never puts Secret data in memory and a cluster's worth of objects fits
//! in a fraction of its size. The field sets come from
//! `crate::policy::projection`, which analyses the policies' expressions.

use crate::k8s::kind::GroupKind;
use serde_json::{Map, Value as Json};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

/// The fields kept of one value: all of it (`whole`, less the fields in
/// `except` unless `fields` says what to keep of them), or the listed
/// fields. A list keeps its length; the set applies to each element.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSet {
    whole: bool,
    /// Iterated by a comprehension: kept whole when it is a map (its keys
    /// are read), element by element when it is a list.
    ranged: bool,
    except: BTreeSet<Arc<str>>,
    fields: BTreeMap<Arc<str>, FieldSet>,
}

impl FieldSet {
    /// Keeps everything.
    pub fn whole() -> FieldSet {
        FieldSet {
            whole: true,
            ..FieldSet::default()
        }
    }

    /// Keeps everything but the given top-level fields.
    pub fn whole_except(fields: &[&str]) -> FieldSet {
        FieldSet {
            whole: true,
            except: fields.iter().map(|f| Arc::from(*f)).collect(),
            ..FieldSet::default()
        }
    }

    /// What every inventory object keeps: its identity and labels (the
    /// inventory answers label-selector lists and self-exclusion with them).
    pub fn identity() -> FieldSet {
        let mut set = FieldSet::default();
        for path in [
            "apiVersion",
            "kind",
            "metadata.name",
            "metadata.namespace",
            "metadata.uid",
            "metadata.resourceVersion",
            "metadata.labels",
        ] {
            let path: Vec<Arc<str>> = path.split('.').map(Arc::from).collect();
            set.add(&path, true);
        }
        set
    }

    pub fn is_whole(&self) -> bool {
        self.whole && self.except.is_empty()
    }

    /// Keeps the field at `path`: whole, or as far as other paths go.
    pub fn add(&mut self, path: &[Arc<str>], whole: bool) {
        match path.split_first() {
            None => {
                if whole {
                    self.whole = true;
                    self.except.clear();
                }
            }
            Some((first, rest)) => {
                if self.is_whole() {
                    return;
                }
                self.fields
                    .entry(first.clone())
                    .or_default()
                    .add(rest, whole);
            }
        }
    }

    /// Marks the field at `path` as iterated (see [`FieldSet`]).
    pub fn add_ranged(&mut self, path: &[Arc<str>]) {
        if self.is_whole() {
            return;
        }
        match path.split_first() {
            None => self.ranged = true,
            Some((first, rest)) => self
                .fields
                .entry(first.clone())
                .or_default()
                .add_ranged(rest),
        }
    }

    /// A field that is selected but nothing below it is named is read for
    /// its presence or value: keep all of it. Call once on a root.
    pub fn close(&mut self) {
        for sub in self.fields.values_mut() {
            sub.close_below();
        }
    }

    fn close_below(&mut self) {
        if self.fields.is_empty() && !self.whole {
            self.whole = true;
        }
        for sub in self.fields.values_mut() {
            sub.close_below();
        }
    }

    pub fn merge(&mut self, other: &FieldSet) {
        self.except = match (self.whole, other.whole) {
            (true, true) => self.except.intersection(&other.except).cloned().collect(),
            (true, false) => std::mem::take(&mut self.except),
            (false, true) => other.except.clone(),
            (false, false) => BTreeSet::new(),
        };
        self.whole |= other.whole;
        self.ranged |= other.ranged;
        if self.is_whole() {
            self.fields.clear();
            return;
        }
        for (k, v) in &other.fields {
            self.fields.entry(k.clone()).or_default().merge(v);
        }
    }

    /// Removes a top-level field unless the set keeps it by name.
    pub fn without(mut self, field: &str) -> FieldSet {
        if self.whole && !self.fields.contains_key(field) {
            self.except.insert(field.into());
        }
        self
    }

    /// The kept part of `value`.
    pub fn apply(&self, value: &Json) -> Json {
        self.apply_at(value, false)
    }

    /// `element`: `value` is an element of the list this set describes, to
    /// which `ranged` (about the list itself) does not apply.
    fn apply_at(&self, value: &Json, element: bool) -> Json {
        if self.is_whole() || (self.ranged && !element && value.is_object()) {
            return value.clone();
        }
        match value {
            Json::Object(m) => {
                let mut out = Map::with_capacity(m.len());
                for (k, v) in m {
                    let kept = if self.whole && !self.except.contains(k.as_str()) {
                        Some(v.clone())
                    } else {
                        self.fields.get(k.as_str()).map(|sub| sub.apply(v))
                    };
                    if let Some(kept) = kept {
                        out.insert(k.clone(), kept);
                    }
                }
                Json::Object(out)
            }
            Json::Array(items) => {
                Json::Array(items.iter().map(|v| self.apply_at(v, true)).collect())
            }
            scalar => scalar.clone(),
        }
    }
}

/// Field sets per (group, kind); kinds not named keep `other`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Projection {
    kinds: HashMap<GroupKind, FieldSet>,
    other: FieldSet,
}

impl Default for Projection {
    /// Keeps everything: an inventory that no policy set has configured.
    fn default() -> Self {
        Projection {
            kinds: HashMap::new(),
            other: FieldSet::whole(),
        }
    }
}

impl Projection {
    pub fn new(kinds: HashMap<GroupKind, FieldSet>, other: FieldSet) -> Projection {
        Projection { kinds, other }
    }

    pub fn for_kind(&self, group: &str, kind: &str) -> &FieldSet {
        self.kinds
            .get(&GroupKind::new(group, kind))
            .unwrap_or(&self.other)
    }

    /// Does `self` keep at least what `before` kept, for this kind?
    pub fn keeps_all_of(&self, before: &Projection, group: &str, kind: &str) -> bool {
        let mut merged = self.for_kind(group, kind).clone();
        merged.merge(before.for_kind(group, kind));
        &merged == self.for_kind(group, kind)
    }

    pub fn apply(&self, value: &Json) -> Json {
        let (group, kind) = crate::k8s::kinds::group_kind(value);
        self.for_kind(group, kind).apply(value)
    }
}

#[cfg(test)]
#[path = "projection_tests.rs"]
mod tests;
