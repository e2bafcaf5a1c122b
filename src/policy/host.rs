//! The inventory functions policies call (`inventory.get/list/index`,
//! `labelSelector.matches`), answered from an [`Inventory`].

use crate::cel::{Ctx, Env, EvalError, EvalResult, Host, Map, Value};
use crate::inventory::{Entry, IndexId, Lookup, ObjectKey, ObjectKeyRef};
use crate::k8s::kinds::group_of;
use crate::policy::model::LabelSelector;
use serde_json::Value as Json;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

pub const GET: usize = 0;
pub const LIST: usize = 1;
pub const INDEX: usize = 2;
pub const SELECTOR_MATCHES: usize = 3;

/// Declares the functions in an environment, in the order of the ids above.
pub fn declare(env: &mut Env, with_inventory: bool) {
    if with_inventory {
        env.add_host_function("inventory.get", &[4]);
        env.add_host_function("inventory.list", &[3, 4]);
        env.add_host_function("inventory.index", &[2]);
        env.add_host_function("labelSelector.matches", &[2]);
    }
}

/// Who is being reviewed, so that lookups never return it.
#[derive(Debug, Clone, Default)]
pub struct SelfIdentity {
    pub uid: Option<Arc<str>>,
    pub key: Option<ObjectKey>,
}

impl SelfIdentity {
    pub fn of(req: &super::Request) -> SelfIdentity {
        let reviewed = req.reviewed();
        SelfIdentity {
            uid: reviewed
                .and_then(|o| o.pointer("/metadata/uid"))
                .and_then(Json::as_str)
                .map(Arc::from),
            key: reviewed.and_then(ObjectKey::of),
        }
    }

    fn is(&self, e: &Entry) -> bool {
        match (&self.uid, &e.uid) {
            (Some(a), Some(b)) if a == b => true,
            _ => self.key.as_ref() == Some(&e.key),
        }
    }
}

thread_local! {
    /// Keys of the objects lookups returned on this thread, while
    /// [`recording_lookups`] runs.
    static RECORDED: RefCell<Option<Vec<ObjectKey>>> = const { RefCell::new(None) };
}

/// Runs `f` and returns, with its result, the key of every object that an
/// inventory lookup returned on this thread meanwhile (for `interlock
/// check` to say which copy of an object given twice a lookup read).
pub fn recording_lookups<R>(f: impl FnOnce() -> R) -> (R, Vec<ObjectKey>) {
    let outer = RECORDED.with(|r| r.borrow_mut().replace(Vec::new()));
    let out = f();
    let keys = RECORDED.with(|r| std::mem::replace(&mut *r.borrow_mut(), outer));
    (out, keys.unwrap_or_default())
}

/// Notes a returned entry when recording (one thread-local read otherwise).
fn record(e: &Entry) {
    RECORDED.with(|r| {
        if let Some(keys) = r.borrow_mut().as_mut() {
            keys.push(e.key.clone());
        }
    });
}

pub struct InventoryHost<'a> {
    pub inventory: &'a dyn Lookup,
    /// A tenant policy's namespace: its lookups of any other are errors.
    pub confined: Option<&'a str>,
    pub indexes: &'a HashMap<String, IndexId>,
    pub me: SelfIdentity,
    /// Objects returned by index lookups: the related objects of a finding
    /// (an index is how a policy finds conflicting objects; `get` and `list`
    /// mostly confirm that something exists, which is not a conflict).
    pub related: RefCell<Vec<ObjectKey>>,
}

fn str_arg<'v>(f: &str, a: &'v [Value], i: usize) -> EvalResult<&'v str> {
    a.get(i)
        .and_then(Value::as_str)
        .ok_or_else(|| EvalError::new(format!("{f}: argument {} must be a string", i + 1)))
}

/// Accounts for a returned entry before its value is built.
fn built(ctx: &mut Ctx, e: &Entry) -> EvalResult<()> {
    ctx.alloc(e.built_bytes())
}

impl<'a> InventoryHost<'a> {
    /// Refuses a lookup in `namespace` by a policy confined elsewhere
    /// (one whose namespace is a constant was refused when it was written).
    fn reach(&self, f: &str, namespace: &str) -> EvalResult<()> {
        match self.confined {
            Some(own) if own != namespace => Err(EvalError::new(format!(
                "{f}: an InterlockNamespacePolicy of namespace {own:?} reads only its own namespace, not {namespace:?}"
            ))),
            _ => Ok(()),
        }
    }

    fn get(&self, ctx: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
        let f = "inventory.get";
        let key = ObjectKeyRef {
            group: group_of(str_arg(f, a, 0)?),
            kind: str_arg(f, a, 1)?,
            namespace: str_arg(f, a, 2)?,
            name: str_arg(f, a, 3)?,
        };
        self.reach(f, key.namespace)?;
        match self.inventory.find(key).filter(|e| !self.me.is(e)) {
            Some(e) => {
                built(ctx, e)?;
                record(e);
                Ok(Value::optional(Some(e.value())))
            }
            None => Ok(Value::Optional(None)),
        }
    }

    fn list(&self, ctx: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
        let f = "inventory.list";
        let group = group_of(str_arg(f, a, 0)?);
        let kind = str_arg(f, a, 1)?;
        let ns = str_arg(f, a, 2)?;
        self.reach(f, ns)?;
        let labels = match a.get(3) {
            None => None,
            Some(Value::Map(m)) => Some(string_map(m)?),
            Some(other) => {
                return Err(EvalError::new(format!(
                    "{f}: labels must be a map(string, string), got {}",
                    other.type_name()
                )))
            }
        };
        let entries = self
            .inventory
            .list(group, kind, if ns.is_empty() { None } else { Some(ns) });
        let kept: Vec<&Entry> = entries
            .into_iter()
            .filter(|e| !self.me.is(e))
            .filter(|e| {
                labels
                    .as_ref()
                    .is_none_or(|want| has_labels(&e.object.json(), want))
            })
            .collect();
        values(ctx, &kept, record)
    }

    fn index(&self, ctx: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
        let name = str_arg("inventory.index", a, 0)?;
        let key = str_arg("inventory.index", a, 1)?;
        let id = *self.indexes.get(name).ok_or_else(|| {
            EvalError::new(format!(
                "inventory.index: this policy declares no index named {name:?}"
            ))
        })?;
        let mut related = self.related.borrow_mut();
        let kept: Vec<&Entry> = self
            .inventory
            .lookup_index(id, key)
            .into_iter()
            .filter(|e| !self.me.is(e))
            .collect();
        values(ctx, &kept, |e| {
            record(e);
            related.push(e.key.clone());
        })
    }
}

/// The list of `entries`' values, accounted for before any is built (a
/// lookup over a large inventory, repeated in a loop, would otherwise
/// build gigabytes at one cost unit a call).
fn values<'a>(
    ctx: &mut Ctx<'a, '_>,
    entries: &[&'a Entry],
    mut seen: impl FnMut(&Entry),
) -> EvalResult<Value<'a>> {
    ctx.alloc_values(entries.len())?;
    ctx.alloc(entries.iter().map(|e| e.built_bytes()).sum())?;
    let out = entries
        .iter()
        .map(|e| {
            seen(e);
            e.value()
        })
        .collect();
    Ok(Value::list(out))
}

fn string_map(m: &Map) -> EvalResult<Vec<(String, String)>> {
    m.entries()
        .into_iter()
        .map(|(k, v)| match (k.as_str(), v.as_str()) {
            (Some(k), Some(v)) => Ok((k.to_string(), v.to_string())),
            _ => Err(EvalError::new("labels must be a map(string, string)")),
        })
        .collect()
}

fn has_labels(object: &serde_json::Value, want: &[(String, String)]) -> bool {
    let labels = crate::policy::selector::labels(object);
    want.iter().all(|(k, v)| {
        labels
            .and_then(|l| l.get(k))
            .and_then(|x| x.as_str())
            .is_some_and(|x| x == v)
    })
}

/// `labelSelector.matches(selector, labels)`.
pub fn selector_matches<'a>(a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    let (sel, labels) = (&a[0], &a[1]);
    let selector: LabelSelector = serde_json::from_value(sel.to_json())
        .map_err(|e| EvalError::new(format!("labelSelector.matches: not a LabelSelector: {e}")))?;
    let labels = labels.to_json();
    let labels = match &labels {
        serde_json::Value::Object(m) => Some(m),
        serde_json::Value::Null => None,
        _ => {
            return Err(EvalError::new(
                "labelSelector.matches: labels must be a map",
            ))
        }
    };
    selector
        .matches(labels)
        .map(Value::Bool)
        .map_err(|e| EvalError::new(e.to_string()))
}

impl<'a> Host<'a> for InventoryHost<'a> {
    fn call(&self, ctx: &mut Ctx<'a, '_>, id: usize, args: &[Value<'a>]) -> EvalResult<Value<'a>> {
        match id {
            GET => self.get(ctx, args),
            LIST => self.list(ctx, args),
            INDEX => self.index(ctx, args),
            SELECTOR_MATCHES => selector_matches(args),
            _ => Err(EvalError::new("unknown inventory function")),
        }
    }
}
