//! Deletion: ranks in reverse order, suspend ignored, orphaning.

use super::*;

fn deleting(policy: DeletionPolicy) -> Case {
    let mut case = Case::new(vec![sa("web"), cm("c"), deploy("web")]);
    converge(&mut case);
    case.group.deleting = true;
    case.spec.deletion_policy = policy;
    case
}

#[test]
fn deletion_goes_one_rank_at_a_time_in_reverse_order() {
    let mut case = deleting(DeletionPolicy::Delete);
    let p = case.plan();
    assert!(p.apply.is_empty() && p.prune.is_empty());
    match &p.finalize {
        Some(Finalize::Delete(list)) => assert_eq!(refs(list), ["Deployment/web"]),
        other => panic!("{other:?}"),
    }
    expect(
        &p.status,
        [
            ("Valid", True, "Valid"),
            ("Applied", False, "Deleting"),
            ("Ready", False, "Deleting"),
        ],
    );
    // While the Deployment terminates, nothing else is deleted.
    case.terminating("Deployment")["metadata"]["finalizers"] = json!(["foregroundDeletion"]);
    let p = case.plan();
    assert!(matches!(&p.finalize, Some(Finalize::Wait(list)) if refs(list) == ["Deployment/web"]));
    let m = member(&p.status, "Deployment");
    assert!(m
        .message
        .as_deref()
        .unwrap_or("")
        .contains("foregroundDeletion"));
    case.observed.retain(|o| o["kind"] != "Deployment");
    assert!(
        matches!(case.plan().finalize, Some(Finalize::Delete(list)) if refs(&list) == ["ConfigMap/c"])
    );
    case.observed.retain(|o| o["kind"] == "ServiceAccount");
    assert!(
        matches!(case.plan().finalize, Some(Finalize::Delete(list)) if refs(&list) == ["ServiceAccount/web"])
    );
    case.observed.clear();
    assert_eq!(case.plan().finalize, Some(Finalize::RemoveFinalizer));
}

#[test]
fn deletion_ignores_suspend_so_the_finalizer_never_strands_the_group() {
    let mut case = deleting(DeletionPolicy::Delete);
    case.spec.suspend = true;
    assert!(matches!(case.plan().finalize, Some(Finalize::Delete(_))));
}

#[test]
fn orphan_releases_members_with_guarded_patches() {
    let mut case = deleting(DeletionPolicy::Orphan);
    // Another owner before ours: the patch must remove the right entry.
    let c = case.observed("ConfigMap");
    let refs_ = c["metadata"]["ownerReferences"].as_array_mut().unwrap();
    refs_.insert(
        0,
        json!({"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "p-uid"}),
    );
    c["metadata"]["labels"]["keep"] = json!("me");
    let p = case.plan();
    let Some(Finalize::Release(list)) = &p.finalize else {
        panic!("{:?}", p.finalize)
    };
    assert_eq!(list.len(), 3);
    assert!(p
        .status
        .members
        .iter()
        .all(|m| m.state == MemberState::Orphaned));
    for r in list {
        let mut object = case
            .observed
            .iter()
            .find(|o| {
                o["metadata"]["name"] == r.target.name.as_str()
                    && o["kind"] == r.target.kind.as_str()
            })
            .unwrap()
            .clone();
        let patch: json_patch::Patch = serde_json::from_value(r.patch.clone()).unwrap();
        json_patch::patch(&mut object, &patch).unwrap();
        assert!(!owned_by(&object, "g-uid"), "{object}");
        assert_eq!(part_of(&object), None);
        if r.target.kind == "ConfigMap" {
            assert_eq!(object["metadata"]["ownerReferences"][0]["uid"], "p-uid");
            assert_eq!(object["metadata"]["labels"]["keep"], "me");
        }
        // Applied to an object that changed since, it fails instead of
        // removing someone else's reference.
        let mut moved = object.clone();
        moved["metadata"]["ownerReferences"] = json!([{"uid": "z"}, {"uid": "y"}, {"uid": "x"}]);
        moved["metadata"]["labels"] = json!({PART_OF_LABEL: applyset_id("shop", "web")});
        assert!(json_patch::patch(&mut moved, &patch).is_err());
    }
    case.observed.iter_mut().for_each(|o| {
        let patch = release(o, "g-uid", &applyset_id("shop", "web")).patch;
        let patch: json_patch::Patch = serde_json::from_value(patch).unwrap();
        json_patch::patch(o, &patch).unwrap();
    });
    assert_eq!(case.plan().finalize, Some(Finalize::RemoveFinalizer));
}
