//! Reading the members: the group's spec against the live objects, each
//! member keyed by (API group, kind, namespace, name), with ownership and
//! conflicts.

use super::*;

/// (API group, kind, namespace, name): one object whatever its version.
pub(super) type Key = (String, String, String, String);

pub(super) fn key_of(v: &Value) -> Option<Key> {
    let s = |p: &str| v.pointer(p).and_then(Value::as_str);
    Some((
        group_of(s("/apiVersion")?).to_string(),
        s("/kind")?.to_string(),
        s("/metadata/namespace").unwrap_or("").to_string(),
        s("/metadata/name")?.to_string(),
    ))
}

pub(super) fn member_key(m: &Member) -> Key {
    (
        m.api_group().to_string(),
        m.kind.clone(),
        m.namespace.clone(),
        m.name.clone(),
    )
}

/// Observed objects by key, in a stable order.
pub(super) fn index(observed: &[Value]) -> BTreeMap<Key, &Value> {
    observed
        .iter()
        .filter_map(|v| Some((key_of(v)?, v)))
        .collect()
}

/// One entry of `spec.resources`, decided.
pub(super) enum Entry<'a> {
    /// Cannot be applied: invalid, out of scope, listed twice, or in
    /// conflict with someone else's object.
    Refused {
        status: MemberStatus,
        key: Option<Key>,
        reason: &'static str,
        message: String,
    },
    Usable {
        member: Member,
        desired: Value,
        live: Option<&'a Value>,
        /// The stored object does not hold the desired one, and is to be
        /// written (under `drift: Report`, only when its manifest changed).
        stale: bool,
        /// `drift: Report`: the fields the stored object differs in, left
        /// as they are.
        drift: Vec<String>,
        /// `drift: Report`: an object that is not the group's differs from
        /// the manifest; not taken over.
        not_taken_over: bool,
    },
}

impl Entry<'_> {
    pub(super) fn key(&self) -> Option<Key> {
        match self {
            Entry::Refused { key, .. } => key.clone(),
            Entry::Usable { member, .. } => Some(member_key(member)),
        }
    }

    /// Stale and not waiting for an older object to finish deleting.
    pub(super) fn needs_write(&self) -> bool {
        matches!(self, Entry::Usable { stale: true, live, .. } if !live.is_some_and(terminating))
    }

    /// Stored as the spec says and ready, for `waitForReady`.
    pub(super) fn settled(&self, rules: &ReadyRules) -> bool {
        let Entry::Usable {
            member,
            live: Some(l),
            stale: false,
            not_taken_over: false,
            ..
        } = self
        else {
            return false;
        };
        let ready = rules.readiness(l).is_ready();
        wait::settles(&member.api_version, &member.kind, !terminating(l), ready)
    }

    pub(super) fn sort_key(&self) -> (u8, &str, &str) {
        match self {
            Entry::Usable { member, .. } => {
                order::sort_key(member.api_group(), &member.kind, &member.name)
            }
            Entry::Refused { .. } => (u8::MAX, "", ""),
        }
    }

    pub(super) fn desired(&self) -> Option<DesiredObject> {
        let Entry::Usable {
            member,
            desired,
            live,
            ..
        } = self
        else {
            return None;
        };
        Some(DesiredObject {
            target: ObjectRef {
                api_version: member.api_version.clone(),
                kind: member.kind.clone(),
                namespace: member.namespace.clone(),
                name: member.name.clone(),
                uid: live
                    .and_then(|l| l.pointer("/metadata/uid"))
                    .and_then(Value::as_str)
                    .map(str::to_string),
            },
            object: desired.clone(),
        })
    }
}

pub(super) fn read_members<'a>(
    input: &PlanInput<'_>,
    live: &BTreeMap<Key, &'a Value>,
    id: &str,
) -> Vec<Entry<'a>> {
    let mut first: HashMap<Key, usize> = HashMap::new();
    let resources = input.spec.resources.iter().enumerate();
    resources
        .map(|(i, raw)| read_member(input, live, id, &mut first, i, raw))
        .collect()
}

/// Entry `i` of `spec.resources`; `first` maps the keys seen so far to
/// their entries (the first of two entries with one key is kept).
pub(super) fn read_member<'a>(
    input: &PlanInput<'_>,
    live: &BTreeMap<Key, &'a Value>,
    id: &str,
    first: &mut HashMap<Key, usize>,
    i: usize,
    raw: &Value,
) -> Entry<'a> {
    let g = input.group;
    let member = match parse_member(i, raw, &g.namespace, input.scopes, false) {
        Ok(m) => m,
        Err(e) => return refused_member(raw, &g.namespace, &e),
    };
    let key = member_key(&member);
    let what = format!("member {i} ({})", member.display());
    if is_the_group(&key, g) {
        let message = format!("{what}: a group cannot hold itself");
        return refused(
            &member,
            None,
            reason::INVALID_MEMBER,
            message,
            MemberState::Invalid,
        );
    }
    if let Some(j) = first.get(&key) {
        let message = format!("{what}: listed twice (also member {j})");
        return refused(
            &member,
            None,
            reason::DUPLICATE_MEMBER,
            message,
            MemberState::Invalid,
        );
    }
    first.insert(key.clone(), i);
    let stored = live.get(&key).copied();
    if let Some(why) = stored.and_then(|l| conflict(l, g, id)) {
        let message = format!("{} exists and {why}; it is never adopted", member.display());
        return refused(
            &member,
            stored,
            reason::CONFLICT,
            message,
            MemberState::Conflict,
        );
    }
    let desired = with_ownership(&member.object, g, id);
    let desired = match input.spec.drift {
        DriftPolicy::Revert => desired,
        DriftPolicy::Report => drift::with_hash(desired, &member.object),
    };
    let owned = stored.is_some_and(|l| owned_by(l, &g.uid));
    let decision = drift::decide(input.spec.drift, &desired, &member.object, stored, owned);
    let (stale, drift, not_taken_over) = match decision {
        Decision::Converged => (false, vec![], false),
        Decision::Write => (true, vec![], false),
        Decision::Drifted(fields) => (false, fields, false),
        Decision::NotTakenOver(fields) => (false, fields, true),
    };
    Entry::Usable {
        member,
        desired,
        live: stored,
        stale,
        drift,
        not_taken_over,
    }
}

/// Applying the group onto itself would overwrite its own spec.
pub(super) fn is_the_group(key: &Key, g: &GroupRef) -> bool {
    let (group, kind, namespace, name) = key;
    group == crate::group::crd::GROUP
        && kind == KIND
        && *namespace == g.namespace
        && *name == g.name
}

pub(super) fn refused_member<'a>(raw: &Value, namespace: &str, e: &MemberError) -> Entry<'a> {
    let s = |p: &str| {
        raw.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let (state, reason) = match e {
        MemberError::Invalid { .. } => (MemberState::Invalid, reason::INVALID_MEMBER),
        MemberError::OutOfScope { .. } => (MemberState::OutOfScope, reason::MEMBER_OUT_OF_SCOPE),
    };
    let ns = raw
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or(namespace);
    Entry::Refused {
        status: MemberStatus {
            api_version: s("/apiVersion"),
            kind: s("/kind"),
            namespace: ns.to_string(),
            name: s("/metadata/name"),
            uid: None,
            state,
            ready: None,
            message: Some(e.to_string()),
            drift: vec![],
        },
        key: None,
        reason,
        message: e.to_string(),
    }
}

pub(super) fn refused<'a>(
    m: &Member,
    live: Option<&Value>,
    reason: &'static str,
    message: String,
    state: MemberState,
) -> Entry<'a> {
    Entry::Refused {
        status: MemberStatus {
            api_version: m.api_version.clone(),
            kind: m.kind.clone(),
            namespace: m.namespace.clone(),
            name: m.name.clone(),
            uid: live.and_then(uid_of),
            state,
            ready: None,
            message: Some(message.clone()),
            drift: vec![],
        },
        key: Some(member_key(m)),
        reason,
        message,
    }
}

pub(super) fn uid_of(v: &Value) -> Option<String> {
    v.pointer("/metadata/uid")
        .and_then(Value::as_str)
        .map(str::to_string)
}

pub(super) fn terminating(v: &Value) -> bool {
    v.pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null())
}

pub(super) fn owner_refs(v: &Value) -> &[Value] {
    v.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// Whether `v` names the object of `uid` among its ownerReferences.
pub fn owned_by(v: &Value, uid: &str) -> bool {
    owner_refs(v)
        .iter()
        .any(|r| r.get("uid").and_then(Value::as_str) == Some(uid))
}

pub(super) fn part_of(v: &Value) -> Option<&str> {
    v.pointer("/metadata/labels")?.get(PART_OF_LABEL)?.as_str()
}

/// Why a stored object at a member's key belongs to someone else, if it
/// does: another controller, another group (even as a plain owner), or
/// another ApplySet. An object nobody claims is taken over by the apply.
pub(super) fn conflict(live: &Value, g: &GroupRef, id: &str) -> Option<String> {
    for r in owner_refs(live) {
        let uid = r.get("uid").and_then(Value::as_str).unwrap_or("");
        if uid == g.uid {
            continue;
        }
        let kind = r.get("kind").and_then(Value::as_str).unwrap_or("?");
        let name = r.get("name").and_then(Value::as_str).unwrap_or("?");
        let api = r.get("apiVersion").and_then(Value::as_str).unwrap_or("");
        if group_of(api) == crate::group::crd::GROUP && kind == KIND {
            return Some(format!("belongs to ResourceGroup {name} (uid {uid})"));
        }
        if r.get("controller").and_then(Value::as_bool) == Some(true) {
            return Some(format!("is controlled by {kind} {name}"));
        }
    }
    match part_of(live) {
        Some(other) if other != id => Some(format!("is part of another ApplySet ({other})")),
        _ => None,
    }
}

/// The manifest as applied: the part-of label and the group's controller
/// ownerReference added (by UID, so a new group of the same name never
/// inherits the members of a deleted one).
pub(super) fn with_ownership(object: &Value, g: &GroupRef, id: &str) -> Value {
    let mut o = object.clone();
    let Some(meta) = o.get_mut("metadata").and_then(Value::as_object_mut) else {
        return o;
    };
    let labels = meta.entry("labels").or_insert_with(|| json!({}));
    if let Some(labels) = labels.as_object_mut() {
        labels.insert(PART_OF_LABEL.into(), id.into());
    }
    let mut refs: Vec<Value> = meta
        .get("ownerReferences")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter(|r| r.get("uid").and_then(Value::as_str) != Some(&g.uid))
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    refs.push(owner_reference(g));
    meta.insert("ownerReferences".into(), Value::Array(refs));
    o
}

/// The ownerReference every member carries.
pub fn owner_reference(g: &GroupRef) -> Value {
    json!({
        "apiVersion": API_VERSION,
        "kind": KIND,
        "name": g.name,
        "uid": g.uid,
        "controller": true,
        "blockOwnerDeletion": true,
    })
}

/// Objects the group owns (ownerReference by UID) that are not listed.
/// The label alone is not ownership: anyone may write a label, and only
/// what the group owns may be deleted in its name.
pub(super) fn owned_unlisted<'a>(
    live: &BTreeMap<Key, &'a Value>,
    listed: &[Key],
    uid: &str,
) -> Vec<&'a Value> {
    live.iter()
        .filter(|(k, v)| owned_by(v, uid) && !listed.contains(k))
        .map(|(_, v)| *v)
        .collect()
}
