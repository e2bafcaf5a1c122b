//! The plan of a group being deleted: what its deletionPolicy removes or
//! orphans, in reverse order.

use super::*;

pub(super) fn plan_deletion(input: &PlanInput<'_>, live: &BTreeMap<Key, &Value>, id: &str) -> Plan {
    let g = input.group;
    let orphan = input.spec.deletion_policy == DeletionPolicy::Orphan;
    // Orphan also takes our label off objects that only carry the label;
    // Delete deletes only what the group owns.
    let mine: Vec<&Value> = live
        .values()
        .filter(|v| owned_by(v, &g.uid) || (orphan && part_of(v) == Some(id)))
        .copied()
        .collect();
    let finalize = if mine.is_empty() {
        Finalize::RemoveFinalizer
    } else if orphan {
        Finalize::Release(mine.iter().map(|v| release(v, &g.uid, id)).collect())
    } else {
        deletion_step(&mine)
    };
    let members = mine.iter().map(|v| deletion_status(v, orphan)).collect();
    let message = match &finalize {
        Finalize::RemoveFinalizer => "every member is gone or released".to_string(),
        _ if orphan => format!("{} members left to release", mine.len()),
        _ => format!("{} members left to delete", mine.len()),
    };
    let conditions = deletion_conditions(input, &message);
    let status = ResourceGroupStatus {
        observed_generation: Some(g.generation),
        conditions,
        members,
        findings: vec![],
        waiting_for: None,
    };
    Plan {
        apply: vec![],
        prune: vec![],
        status,
        finalize: Some(finalize),
        recheck_at: None,
    }
}

/// `Valid` as last computed (a deleted group is not validated again);
/// `Applied` and `Ready` False with reason `Deleting`.
pub(super) fn deletion_conditions(input: &PlanInput<'_>, message: &str) -> Vec<Condition> {
    let stamp = Stamp {
        generation: input.group.generation,
        previous: input.previous,
        now: input.now,
    };
    let mut conditions: Vec<Condition> = input
        .previous
        .and_then(|p| p.conditions.iter().find(|c| c.type_ == VALID).cloned())
        .into_iter()
        .collect();
    for type_ in [APPLIED, READY] {
        let c = stamp.condition(type_, ConditionStatus::False, reason::DELETING, message);
        conditions.push(c);
    }
    conditions
}

/// The members of the last rank still present: delete those not yet
/// terminating; if all are terminating, wait for them.
pub(super) fn deletion_step(mine: &[&Value]) -> Finalize {
    let rank = |v: &Value| {
        let o = ObjectRef::of(v);
        order::rank(o.api_group(), &o.kind)
    };
    let last = mine.iter().map(|v| rank(v)).max().unwrap_or(0);
    let (gone, now): (Vec<&Value>, Vec<&Value>) = mine
        .iter()
        .copied()
        .filter(|v| rank(v) == last)
        .partition(|v| terminating(v));
    if now.is_empty() {
        Finalize::Wait(gone.iter().map(|v| ObjectRef::of(v)).collect())
    } else {
        Finalize::Delete(now.iter().map(|v| ObjectRef::of(v)).collect())
    }
}

pub(super) fn deletion_status(v: &Value, orphan: bool) -> MemberStatus {
    let o = ObjectRef::of(v);
    let finalizers = v
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .filter(|f| !f.is_empty());
    let message = match (orphan, terminating(v), finalizers) {
        (true, _, _) => "released: ownerReference and label removed, the object stays".to_string(),
        (false, true, Some(f)) => format!(
            "terminating; waiting for finalizers {}",
            Value::Array(f.clone())
        ),
        (false, true, None) => "terminating".to_string(),
        (false, false, _) => "deleted in reverse apply order".to_string(),
    };
    MemberStatus {
        api_version: o.api_version,
        kind: o.kind,
        namespace: o.namespace,
        name: o.name,
        uid: o.uid,
        state: if orphan {
            MemberState::Orphaned
        } else {
            MemberState::Deleting
        },
        ready: None,
        message: Some(message),
        drift: vec![],
    }
}

/// The JSON patch that takes the group's ownerReference and part-of label
/// off `v`.
pub(super) fn release(v: &Value, uid: &str, id: &str) -> Release {
    let mut ops = Vec::new();
    if let Some(i) = owner_refs(v)
        .iter()
        .position(|r| r.get("uid").and_then(Value::as_str) == Some(uid))
    {
        let path = format!("/metadata/ownerReferences/{i}");
        ops.push(json!({"op": "test", "path": format!("{path}/uid"), "value": uid}));
        ops.push(json!({"op": "remove", "path": path}));
    }
    if part_of(v) == Some(id) {
        let path = format!(
            "/metadata/labels/{}",
            PART_OF_LABEL.replace('~', "~0").replace('/', "~1")
        );
        ops.push(json!({"op": "test", "path": path, "value": id}));
        ops.push(json!({"op": "remove", "path": path}));
    }
    Release {
        target: ObjectRef::of(v),
        patch: Value::Array(ops),
    }
}
