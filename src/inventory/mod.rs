//! The indexed, read-only snapshot of cluster state every evaluation reads.
//!
//! Objects are held by (group, kind, namespace, name); lists by kind and
//! namespace come from a per-(kind, namespace) index, and policy-declared
//! indexes map keys to objects. All of it is updated incrementally per
//! object, never rebuilt.

pub mod overlay;
pub mod projection;
pub mod view;

pub use overlay::Overlay;
pub use view::Lookup;

use crate::cel::value::SeededAHash;
use crate::cel::{Activation, Env, Program, Value};
use crate::k8s::kind::{GroupKind, NamespacedName};
use crate::k8s::kinds::group_of;
use projection::Projection;
use serde_json::Value as Json;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// The inventory's hash tables: looked up on every request, keyed by
/// tenants' names (see [`SeededAHash`]). hashbrown's, for lookups by a
/// borrowed key ([`ObjectKeyRef`]).
type Table<K, V> = hashbrown::HashMap<K, V, SeededAHash>;

/// Where an object came from (a manifest file and line), when known.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Source {
    pub file: String,
    pub line: usize,
}

/// The identity of an object: group and kind (any version), namespace
/// (empty for cluster-scoped), name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectKey {
    pub gk: GroupKind,
    pub namespace: Arc<str>,
    pub name: Arc<str>,
}

/// Drops what no policy should depend on, even from whole objects: the
/// managed fields and kubectl's copy of the last applied object (both
/// large, and neither is the object's state).
fn drop_bookkeeping(object: &mut Json) {
    let Some(meta) = object.get_mut("metadata").and_then(Json::as_object_mut) else {
        return;
    };
    meta.remove("managedFields");
    if let Some(ann) = meta.get_mut("annotations").and_then(Json::as_object_mut) {
        ann.remove("kubectl.kubernetes.io/last-applied-configuration");
    }
}

impl Source {
    /// Where a loaded document starts.
    pub fn of(d: &crate::manifest::Document) -> Source {
        Source {
            file: d.source.to_string(),
            line: d.line,
        }
    }
}

/// An [`ObjectKey`] of borrowed names, to look an object up without
/// allocating the key. Hashes as the `ObjectKey` of the same names.
#[derive(Debug, Clone, Copy, Hash)]
pub struct ObjectKeyRef<'k> {
    pub group: &'k str,
    pub kind: &'k str,
    pub namespace: &'k str,
    pub name: &'k str,
}

impl hashbrown::Equivalent<ObjectKey> for ObjectKeyRef<'_> {
    fn equivalent(&self, key: &ObjectKey) -> bool {
        self.name == &*key.name
            && self.namespace == &*key.namespace
            && self.kind == &*key.gk.kind
            && self.group == &*key.gk.group
    }
}

impl ObjectKey {
    /// The key of a Kubernetes object, if it has apiVersion, kind and name.
    pub fn of(object: &Json) -> Option<ObjectKey> {
        let api_version = object.get("apiVersion")?.as_str()?;
        let kind = object.get("kind")?.as_str()?;
        let meta = object.get("metadata")?;
        let name = meta.get("name")?.as_str()?;
        let namespace = meta.get("namespace").and_then(Json::as_str).unwrap_or("");
        Some(ObjectKey::new(
            GroupKind::new(group_of(api_version), kind),
            namespace,
            name,
        ))
    }

    pub fn new(
        gk: GroupKind,
        namespace: impl Into<Arc<str>>,
        name: impl Into<Arc<str>>,
    ) -> ObjectKey {
        ObjectKey {
            gk,
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// Its namespace (empty for cluster-scoped) and name.
    pub fn namespaced_name(&self) -> NamespacedName {
        NamespacedName {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
        }
    }
}

impl std::fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.namespace.is_empty() {
            write!(f, "{} {}", self.gk.kind, self.name)
        } else {
            write!(f, "{} {}/{}", self.gk.kind, self.namespace, self.name)
        }
    }
}

#[derive(Debug, Clone)]
pub struct Entry {
    /// Unique among the entries of every inventory in the process (tells
    /// apart the versions of an object in the lookup cache).
    seq: u64,
    pub key: ObjectKey,
    pub uid: Option<Arc<str>>,
    pub object: Stored,
    pub source: Option<Source>,
}

/// An object as the inventory holds it.
#[derive(Debug, Clone)]
pub enum Stored {
    /// Kept whole, as a tree the engine reads directly (Namespaces, params,
    /// and everything when no policy set has configured a projection).
    Tree(Arc<Json>),
    /// The projected fields as compact JSON: a fraction of a tree's memory
    /// (a tree costs about ten times its JSON text), parsed when a lookup
    /// returns the object.
    Compact(Box<[u8]>),
}

impl Stored {
    fn new(object: Json, whole: bool) -> Stored {
        if whole {
            return Stored::Tree(Arc::new(object));
        }
        // Serialising a `serde_json::Value` cannot fail (string keys only).
        Stored::Compact(serde_json::to_vec(&object).unwrap_or_default().into())
    }

    /// The object as JSON (parsed when compact).
    pub fn json(&self) -> std::borrow::Cow<'_, Json> {
        match self {
            Stored::Tree(t) => std::borrow::Cow::Borrowed(t),
            // The bytes were written by serde_json from a Value.
            Stored::Compact(b) => {
                std::borrow::Cow::Owned(serde_json::from_slice(b).unwrap_or(Json::Null))
            }
        }
    }
}

impl Entry {
    /// Bytes [`Entry::value`] builds: the compact text it parses (an
    /// owned value is at least that large), nothing for a tree it views.
    /// Counted whether or not the per-thread cache holds the value, so
    /// that a decision never depends on the thread that made it.
    pub fn built_bytes(&self) -> usize {
        match &self.object {
            Stored::Tree(_) => 0,
            Stored::Compact(text) => text.len(),
        }
    }

    /// The object as a CEL value: a view of a tree, or compact JSON parsed
    /// into an owned value. Parsed values are cached per thread: policies
    /// look up the same objects again and again (every PDB of a namespace
    /// lists its Deployments), and `check` works namespace by namespace.
    pub fn value(&self) -> Value<'_> {
        match &self.object {
            Stored::Tree(t) => Value::from_json(t),
            Stored::Compact(text) => LOOKUP_CACHE.with(|cache| {
                let mut cache = cache.borrow_mut();
                let slot = &mut cache[(self.seq % LOOKUP_CACHE_SLOTS as u64) as usize];
                match slot {
                    Some((seq, v)) if *seq == self.seq => v.clone(),
                    _ => {
                        // Written by serde_json from a Value: it parses.
                        let v = Value::from_json_slice(text).unwrap_or(Value::Null);
                        *slot = Some((self.seq, v.clone()));
                        v
                    }
                }
            }),
        }
    }
}

const LOOKUP_CACHE_SLOTS: usize = 1024;

thread_local! {
    static LOOKUP_CACHE: std::cell::RefCell<Vec<Option<(u64, Value<'static>)>>> =
        std::cell::RefCell::new(vec![None; LOOKUP_CACHE_SLOTS]);
}

/// Numbers entries across all inventories (see [`Entry`]).
static NEXT_SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// An object made ready for [`Inventory::insert`] (projected, its index
/// keys computed) without changing the inventory: `check` prepares objects
/// on every core.
pub struct Prepared {
    key: ObjectKey,
    uid: Option<Arc<str>>,
    object: Stored,
    index_keys: Vec<Result<Vec<String>, IndexError>>,
}

impl Prepared {
    pub fn key(&self) -> &ObjectKey {
        &self.key
    }
}

/// A declared index: objects of one kind, keyed by the strings a CEL
/// expression yields for each.
struct IndexState {
    gk: GroupKind,
    source: String,
    program: Program,
    env: Env,
    keys: Table<String, BTreeSet<ObjectKey>>,
    per_object: Table<ObjectKey, Vec<String>>,
}

pub type IndexId = usize;

/// An index as policies declare it: objects of a kind, keyed by the
/// strings the CEL expression `keys` yields for each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexDecl {
    pub gk: GroupKind,
    pub keys: String,
}

type NamesByNamespace = BTreeMap<Arc<str>, BTreeSet<Arc<str>>>;

#[derive(Default)]
pub struct Inventory {
    /// Shared, so that a reader can keep an entry after the lock that
    /// guards the inventory is released (see `cluster::live`).
    objects: Table<ObjectKey, Arc<Entry>>,
    /// (group, kind) → namespace → names.
    by_kind: Table<GroupKind, NamesByNamespace>,
    indexes: Vec<IndexState>,
    /// What is kept of each object (everything until a policy set says).
    projection: Arc<Projection>,
    changes: Changes,
}

/// When each kind last changed, counted in changes to this inventory: an
/// evaluation made before some writes still holds after them when none of
/// the writes touched a kind it reads (see [`Inventory::changed_since`]).
#[derive(Default)]
struct Changes {
    /// Counts every change.
    version: u64,
    /// The last change that concerns every kind (an index declared).
    all: u64,
    /// (kind, last change): a handful of kinds, searched in order.
    by_kind: Vec<(GroupKind, u64)>,
}

impl Changes {
    fn kind(&mut self, gk: &GroupKind) {
        self.version += 1;
        let at = self.version;
        match self.by_kind.iter_mut().find(|(g, _)| g == gk) {
            Some((_, last)) => *last = at,
            None => self.by_kind.push((gk.clone(), at)),
        }
    }

    fn every_kind(&mut self) {
        self.version += 1;
        self.all = self.version;
    }
}

/// Errors while maintaining an index (a key expression that fails on an
/// object): reported, never fatal.
#[derive(Debug, Clone, thiserror::Error)]
#[error("index {index} on {object}: {message}")]
pub struct IndexError {
    pub index: String,
    pub object: String,
    pub message: String,
}

/// An object the inventory cannot hold: without the identity every key is
/// built from.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("object has no apiVersion, kind or metadata.name")]
pub struct NoIdentity;

impl Inventory {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.objects.len()
    }

    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    /// Declares an index (or returns the existing identical one).
    pub fn declare_index(
        &mut self,
        api_version: &str,
        kind: &str,
        keys: &str,
    ) -> Result<IndexId, crate::cel::CompileError> {
        let decl = IndexDecl {
            gk: GroupKind::new(group_of(api_version), kind),
            keys: keys.to_string(),
        };
        if let Some(i) = self.indexes.iter().position(|x| x.declares(&decl)) {
            return Ok(i);
        }
        let state = self.build_index(&decl)?;
        self.changes.every_kind();
        self.indexes.push(state);
        Ok(self.indexes.len() - 1)
    }

    /// The declared indexes, in [`IndexId`] order.
    pub fn index_decls(&self) -> Vec<IndexDecl> {
        self.indexes
            .iter()
            .map(|i| IndexDecl {
                gk: i.gk.clone(),
                keys: i.source.clone(),
            })
            .collect()
    }

    /// Makes the declared indexes exactly `decls`, in that order, so that an
    /// [`IndexId`] compiled against another inventory with these
    /// declarations means the same index here. An index declared before
    /// keeps its keys; a new one is built over the stored objects; one no
    /// longer declared is dropped (a reload that removes a policy stops
    /// maintaining its index).
    pub fn set_indexes(&mut self, decls: &[IndexDecl]) -> Result<(), crate::cel::CompileError> {
        if self.index_decls() == decls {
            return Ok(());
        }
        let mut old: Vec<Option<IndexState>> = std::mem::take(&mut self.indexes)
            .into_iter()
            .map(Some)
            .collect();
        let mut next = Vec::with_capacity(decls.len());
        for d in decls {
            let kept = old
                .iter_mut()
                .find(|o| o.as_ref().is_some_and(|o| o.declares(d)))
                .and_then(Option::take);
            match kept {
                Some(state) => next.push(state),
                None => match self.build_index(d) {
                    Ok(state) => next.push(state),
                    Err(e) => {
                        // Leave the inventory as it was: the caller keeps
                        // serving the policies that match it.
                        next.extend(old.into_iter().flatten());
                        self.indexes = next;
                        return Err(e);
                    }
                },
            }
        }
        self.indexes = next;
        self.changes.every_kind();
        Ok(())
    }

    /// An empty inventory with this one's projection and index
    /// declarations: compile policies or prepare objects against it without
    /// touching (or locking) this one.
    pub fn shell(&self) -> Inventory {
        let mut out = Inventory {
            projection: self.projection.clone(),
            ..Inventory::default()
        };
        out.indexes = self
            .indexes
            .iter()
            .map(|i| IndexState {
                gk: i.gk.clone(),
                source: i.source.clone(),
                program: i.program.clone(),
                env: i.env.clone(),
                keys: Table::default(),
                per_object: Table::default(),
            })
            .collect();
        out
    }

    /// A new index of `decl` over the stored objects.
    fn build_index(&self, decl: &IndexDecl) -> Result<IndexState, crate::cel::CompileError> {
        let env = Env::interlock().with_variables(&["object"]);
        let program = env.compile(&decl.keys)?;
        let mut state = IndexState {
            gk: decl.gk.clone(),
            source: decl.keys.clone(),
            program,
            env,
            keys: Table::default(),
            per_object: Table::default(),
        };
        let mut errors = Vec::new();
        for e in self.objects.values() {
            match state.keys_of(&e.key, &e.object.json()) {
                Ok(keys) => state.insert(&e.key, keys),
                Err(err) => errors.push(err),
            }
        }
        for e in errors {
            tracing::warn!(error = %e, "index key expression failed");
        }
        Ok(state)
    }

    /// What this inventory keeps of each object.
    pub fn projection(&self) -> Arc<Projection> {
        self.projection.clone()
    }

    /// Sets what is kept of objects stored from now on (objects already
    /// stored keep what they have: re-list them if the projection grew).
    pub fn set_projection(&mut self, projection: Projection) {
        self.projection = Arc::new(projection);
    }

    /// The kind an index is declared on.
    pub fn index_kind(&self, id: IndexId) -> Option<&GroupKind> {
        self.indexes.get(id).map(|i| &i.gk)
    }

    /// Every declared index: kind, key program and the slot of `object`
    /// in it.
    pub fn index_definitions(&self) -> impl Iterator<Item = (&GroupKind, &Program, usize)> {
        self.indexes.iter().map(|i| {
            (
                &i.gk,
                &i.program,
                i.env.variable_slot("object").unwrap_or(0),
            )
        })
    }

    /// Adds or replaces an object, keeping the projected part of it;
    /// returns index errors (the object is stored regardless).
    pub fn upsert(
        &mut self,
        object: &Json,
        source: Option<Source>,
    ) -> Result<Vec<IndexError>, NoIdentity> {
        let prepared = self.prepare(object)?;
        Ok(self.insert(prepared, source))
    }

    /// Projects `object` and computes its index keys.
    pub fn prepare(&self, object: &Json) -> Result<Prepared, NoIdentity> {
        let key = ObjectKey::of(object).ok_or(NoIdentity)?;
        let fields = self.projection.for_kind(&key.gk.group, &key.gk.kind);
        let mut projected = if fields.is_whole() {
            object.clone()
        } else {
            fields.apply(object)
        };
        drop_bookkeeping(&mut projected);
        let uid = projected
            .get("metadata")
            .and_then(|m| m.get("uid"))
            .and_then(Json::as_str)
            .map(Arc::from);
        let index_keys = self
            .indexes
            .iter()
            .map(|idx| idx.keys_of(&key, &projected))
            .collect();
        Ok(Prepared {
            object: Stored::new(projected, fields.is_whole()),
            key,
            uid,
            index_keys,
        })
    }

    /// Adds or replaces a prepared object; returns its index errors.
    pub fn insert(&mut self, prepared: Prepared, source: Option<Source>) -> Vec<IndexError> {
        let Prepared {
            key,
            uid,
            object,
            index_keys,
        } = prepared;
        self.remove(&key);
        let mut errors = Vec::new();
        for (idx, keys) in self.indexes.iter_mut().zip(index_keys) {
            match keys {
                Ok(keys) => idx.insert(&key, keys),
                Err(e) => errors.push(e),
            }
        }
        self.by_kind
            .entry(key.gk.clone())
            .or_default()
            .entry(key.namespace.clone())
            .or_default()
            .insert(key.name.clone());
        let entry = Entry {
            seq: NEXT_SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            key: key.clone(),
            uid,
            object,
            source,
        };
        self.changes.kind(&key.gk);
        self.objects.insert(key, Arc::new(entry));
        errors
    }

    /// Puts back an entry taken out of this inventory (its index keys are
    /// computed again).
    pub fn restore(&mut self, entry: Arc<Entry>) -> Vec<IndexError> {
        let entry = Arc::unwrap_or_clone(entry);
        let json = entry.object.json();
        let index_keys = self
            .indexes
            .iter()
            .map(|idx| idx.keys_of(&entry.key, &json))
            .collect();
        drop(json);
        let prepared = Prepared {
            key: entry.key,
            uid: entry.uid,
            object: entry.object,
            index_keys,
        };
        self.insert(prepared, entry.source)
    }

    pub fn remove(&mut self, key: &ObjectKey) -> Option<Arc<Entry>> {
        let entry = self.objects.remove(key)?;
        self.changes.kind(&key.gk);
        for idx in &mut self.indexes {
            idx.remove(key);
        }
        if let Some(ns) = self.by_kind.get_mut(&key.gk) {
            if let Some(names) = ns.get_mut(&key.namespace) {
                names.remove(&key.name);
            }
        }
        Some(entry)
    }

    pub fn get(&self, key: &ObjectKey) -> Option<&Arc<Entry>> {
        self.objects.get(key)
    }

    /// [`Inventory::get`] by borrowed names.
    pub fn find(&self, key: ObjectKeyRef) -> Option<&Entry> {
        self.find_shared(key).map(|e| &**e)
    }

    /// [`Inventory::find`], as the entry itself: it outlives a change to
    /// the inventory.
    pub fn find_shared(&self, key: ObjectKeyRef) -> Option<&Arc<Entry>> {
        self.objects.get(&key)
    }

    /// Counts the changes made to this inventory: compare two readings with
    /// [`Inventory::changed_since`].
    pub fn version(&self) -> u64 {
        self.changes.version
    }

    /// Whether, since `version` was read, an object of one of `kinds`
    /// ((group, kind) pairs; `None`: any kind) was added, replaced or
    /// removed, or an index was declared.
    pub fn changed_since(
        &self,
        version: u64,
        kinds: Option<impl IntoIterator<Item = impl std::borrow::Borrow<GroupKind>>>,
    ) -> bool {
        let c = &self.changes;
        if c.version == version {
            return false;
        }
        let Some(kinds) = kinds else {
            return true;
        };
        c.all > version
            || kinds.into_iter().any(|gk| {
                c.by_kind.iter().any(|(g, last)| {
                    *last > version && g == std::borrow::Borrow::<GroupKind>::borrow(&gk)
                })
            })
    }

    /// The (group, kind) pairs changed since `version` was read; `None`
    /// when a change concerned every kind (an index declared). The
    /// continuous audit re-evaluates only what reads one of them.
    pub fn kinds_changed_since(&self, version: u64) -> Option<Vec<GroupKind>> {
        let c = &self.changes;
        if c.all > version {
            return None;
        }
        Some(
            c.by_kind
                .iter()
                .filter(|(_, last)| *last > version)
                .map(|(gk, _)| gk.clone())
                .collect(),
        )
    }

    pub fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.objects.values().map(|e| &**e)
    }

    /// Objects of a kind in a namespace (`None`: every namespace), in name order.
    pub fn list<'s>(&'s self, group: &str, kind: &str, namespace: Option<&str>) -> Vec<&'s Entry> {
        self.list_map(group, kind, namespace, |e| &**e)
    }

    /// [`Inventory::list`], as the entries themselves.
    pub fn list_shared(&self, group: &str, kind: &str, namespace: Option<&str>) -> Vec<Arc<Entry>> {
        self.list_map(group, kind, namespace, Arc::clone)
    }

    fn list_map<'s, T>(
        &'s self,
        group: &str,
        kind: &str,
        namespace: Option<&str>,
        f: impl Fn(&'s Arc<Entry>) -> T,
    ) -> Vec<T> {
        let Some(by_ns) = self.by_kind.get(&GroupKind::new(group, kind)) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let mut push = |ns: &Arc<str>, names: &BTreeSet<Arc<str>>| {
            for n in names {
                let key = ObjectKeyRef {
                    group,
                    kind,
                    namespace: ns,
                    name: n,
                };
                if let Some(e) = self.find_shared(key) {
                    out.push(f(e));
                }
            }
        };
        match namespace {
            Some(ns) => {
                if let Some((k, names)) = by_ns.get_key_value(ns) {
                    push(k, names);
                }
            }
            None => by_ns.iter().for_each(|(k, v)| push(k, v)),
        }
        out
    }

    /// The keys index `id` yields for `object` (none when it is of another
    /// kind or its keys do not evaluate).
    pub fn index_keys(&self, id: IndexId, object: &Json) -> Vec<String> {
        match (self.indexes.get(id), ObjectKey::of(object)) {
            (Some(i), Some(key)) => i.keys_of(&key, object).unwrap_or_default(),
            _ => Vec::new(),
        }
    }

    /// Objects whose index `id` yields `key`.
    pub fn lookup_index<'s>(&'s self, id: IndexId, key: &str) -> Vec<&'s Entry> {
        self.lookup_index_map(id, key, |e| &**e)
    }

    /// [`Inventory::lookup_index`], as the entries themselves.
    pub fn lookup_index_shared(&self, id: IndexId, key: &str) -> Vec<Arc<Entry>> {
        self.lookup_index_map(id, key, Arc::clone)
    }

    fn lookup_index_map<'s, T>(
        &'s self,
        id: IndexId,
        key: &str,
        f: impl Fn(&'s Arc<Entry>) -> T,
    ) -> Vec<T> {
        self.indexes
            .get(id)
            .and_then(|i| i.keys.get(key))
            .map(|set| {
                set.iter()
                    .filter_map(|k| self.objects.get(k))
                    .map(f)
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl IndexState {
    fn declares(&self, d: &IndexDecl) -> bool {
        self.gk == d.gk && self.source == d.keys
    }

    /// The keys this index yields for an object (none for other kinds).
    fn keys_of(&self, key: &ObjectKey, object: &Json) -> Result<Vec<String>, IndexError> {
        if key.gk.kind != self.gk.kind || key.gk.group != self.gk.group {
            return Ok(Vec::new());
        }
        let err = |message: String| IndexError {
            index: self.source.clone(),
            object: key.to_string(),
            message,
        };
        let mut act = Activation::new(&self.env);
        act.set(0, Value::from_json(object));
        match self.program.eval(&act) {
            Ok(Value::List(l)) => l
                .iter()
                .map(|k| match k {
                    Value::String(s) => Ok(s.as_str().to_string()),
                    other => Err(format!(
                        "index keys must be strings, got {}",
                        other.type_name()
                    )),
                })
                .collect::<Result<_, _>>()
                .map_err(err),
            Ok(Value::String(s)) => Ok(vec![s.as_str().to_string()]),
            Ok(other) => Err(err(format!(
                "index keys must be a list of strings, got {}",
                other.type_name()
            ))),
            Err(e) => Err(err(e.to_string())),
        }
    }

    fn insert(&mut self, key: &ObjectKey, keys: Vec<String>) {
        if keys.is_empty() {
            return;
        }
        for k in &keys {
            self.keys.entry(k.clone()).or_default().insert(key.clone());
        }
        self.per_object.insert(key.clone(), keys);
    }

    fn remove(&mut self, key: &ObjectKey) {
        if let Some(keys) = self.per_object.remove(key) {
            for k in keys {
                if let Some(set) = self.keys.get_mut(&k) {
                    set.remove(key);
                    if set.is_empty() {
                        self.keys.remove(&k);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
