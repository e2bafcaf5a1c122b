use super::*;
use serde_json::json;

fn member(group: &str) -> Json {
    json!({"metadata": {"name": "web", "namespace": "team", "uid": "u-1",
        "labels": {"applyset.kubernetes.io/part-of": "applyset-x-v1"},
        "ownerReferences": [{"apiVersion": "interlock.dev/v1alpha1", "kind": "ResourceGroup",
            "name": group, "uid": "g-1", "controller": true, "blockOwnerDeletion": true}]}})
}

fn plain() -> Json {
    json!({"metadata": {"name": "web", "namespace": "team", "uid": "u-1"}})
}

fn write<'a>(
    op: &'a str,
    user: &'a str,
    new: Option<&'a Json>,
    old: Option<&'a Json>,
) -> Write<'a> {
    Write {
        operation: op,
        kind: "ConfigMap",
        namespace: "team",
        name: "web",
        username: user,
        object: new,
        old_object: old,
        ..Write::default()
    }
}

const ALICE: &str = "alice@example.com";
const GROUP_SA: &str = "system:serviceaccount:team:deployer";

#[test]
fn a_tenant_edit_patch_or_delete_of_a_member_is_refused_naming_the_group() {
    let cfg = Boundary::default();
    let (old, new) = (member("app"), member("app"));
    for op in ["UPDATE", "DELETE"] {
        let obj = (op == "UPDATE").then_some(&new);
        let m = decide(&cfg, &write(op, ALICE, obj, Some(&old))).expect(op);
        assert!(m.contains("ResourceGroup 'app'"), "{m}");
        assert!(
            m.contains("kubectl get resourcegroup app -n team -o yaml"),
            "{m}"
        );
    }
}

#[test]
fn removing_the_owner_reference_to_escape_is_refused() {
    let cfg = Boundary::default();
    let old = member("app");
    let m = decide(&cfg, &write("UPDATE", ALICE, Some(&plain()), Some(&old)));
    assert!(m.is_some_and(|m| m.contains("ownerReference")));
    // Even by the group's ServiceAccount with the controller's manager:
    // the controller never moves a member out of its group.
    let escaped = plain();
    let mut w = write("UPDATE", GROUP_SA, Some(&escaped), Some(&old));
    w.field_manager = Some("interlock");
    assert!(decide(&cfg, &w).is_some());
}

#[test]
fn the_controllers_own_writes_pass() {
    let cfg = Boundary::default();
    let (old, new) = (member("app"), member("app"));
    let mut apply = write("UPDATE", GROUP_SA, Some(&new), Some(&old));
    apply.field_manager = Some("interlock");
    assert_eq!(decide(&cfg, &apply), None);
    let mut create = write("CREATE", GROUP_SA, Some(&new), None);
    create.field_manager = Some("interlock");
    assert_eq!(decide(&cfg, &create), None);
    let mut prune = write("DELETE", GROUP_SA, None, Some(&old));
    prune.precondition_uid = Some("u-1");
    assert_eq!(decide(&cfg, &prune), None);
    // The same ServiceAccount through kubectl (another manager, no
    // precondition) is a person's write.
    let mut by_hand = write("UPDATE", GROUP_SA, Some(&new), Some(&old));
    by_hand.field_manager = Some("kubectl-edit");
    assert!(decide(&cfg, &by_hand).is_some());
    assert!(decide(&cfg, &write("DELETE", GROUP_SA, None, Some(&old))).is_some());
    // A ServiceAccount of another namespace never writes for this group.
    let mut elsewhere = write(
        "UPDATE",
        "system:serviceaccount:other:deployer",
        Some(&new),
        Some(&old),
    );
    elsewhere.field_manager = Some("interlock");
    assert!(decide(&cfg, &elsewhere).is_some());
    // The controller as itself deletes members when the group goes.
    assert_eq!(
        decide(&cfg, &write("DELETE", DEFAULT_CONTROLLER, None, Some(&old))),
        None
    );
}

#[test]
fn the_control_plane_subresources_and_break_glass_pass() {
    let cfg = Boundary {
        exempt: vec!["group:platform-admins".into(), "oncall-*".into()],
        ..Boundary::default()
    };
    let old = member("app");
    let delete = |user| write("DELETE", user, None, Some(&old));
    assert_eq!(
        decide(
            &cfg,
            &delete("system:serviceaccount:kube-system:generic-garbage-collector")
        ),
        None
    );
    assert_eq!(
        decide(&cfg, &delete("system:kube-controller-manager")),
        None
    );
    assert_eq!(decide(&cfg, &delete("oncall-bob")), None);
    let groups = vec!["platform-admins".to_string()];
    let mut admin = delete(ALICE);
    admin.groups = &groups;
    assert_eq!(decide(&cfg, &admin), None);
    let mut scale = write("UPDATE", ALICE, Some(&old), Some(&old));
    scale.subresource = "scale";
    assert_eq!(decide(&cfg, &scale), None);
    // A tenant ServiceAccount is not the control plane.
    assert!(decide(&cfg, &delete("system:serviceaccount:team:ci")).is_some());
}

#[test]
fn a_create_claiming_membership_is_refused_and_plain_objects_are_untouched() {
    let cfg = Boundary::default();
    let claim = member("app");
    let m = decide(&cfg, &write("CREATE", ALICE, Some(&claim), None));
    assert!(m.is_some_and(|m| m.contains("claims to be a member")));
    // Adding the ownerReference to an existing object is a claim too.
    assert!(decide(&cfg, &write("UPDATE", ALICE, Some(&claim), Some(&plain()))).is_some());
    assert_eq!(
        decide(
            &cfg,
            &write("UPDATE", ALICE, Some(&plain()), Some(&plain()))
        ),
        None
    );
    // The label alone (a kubectl ApplySet) is not membership.
    let labelled =
        json!({"metadata": {"labels": {"applyset.kubernetes.io/part-of": "applyset-x-v1"}}});
    assert_eq!(
        decide(&cfg, &write("DELETE", ALICE, None, Some(&labelled))),
        None
    );
}

#[test]
fn off_mode_decides_nothing() {
    let cfg = Boundary {
        mode: Mode::Off,
        ..Boundary::default()
    };
    let old = member("app");
    assert_eq!(
        decide(&cfg, &write("DELETE", ALICE, None, Some(&old))),
        None
    );
}

/// An AdmissionRequest of `op` on ConfigMap team/web as `user`.
fn request(
    op: &str,
    user: &str,
    object: Option<Json>,
    old: Option<Json>,
    options: Json,
) -> AdmissionRequest<DynamicObject> {
    let with_kind = |o: Json| {
        let mut o = o;
        o["apiVersion"] = json!("v1");
        o["kind"] = json!("ConfigMap");
        o
    };
    let review: kube::core::admission::AdmissionReview<DynamicObject> =
        serde_json::from_value(json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u-1", "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
                "resource": {"group": "", "version": "v1", "resource": "configmaps"},
                "name": "web", "namespace": "team", "operation": op,
                "userInfo": {"username": user}, "object": object.map(with_kind),
                "oldObject": old.map(with_kind), "options": options}
        }))
        .unwrap();
    review.try_into().unwrap()
}

fn engine(mode: Mode) -> crate::admission::Engine {
    use crate::server::Reviewer as _;
    let options = crate::admission::EngineOptions {
        boundary: Boundary {
            mode,
            ..Boundary::default()
        },
        ..Default::default()
    };
    let e = crate::admission::Engine::new(
        crate::policy::PolicySet::default(),
        crate::inventory::Inventory::new(),
        options,
    );
    e.set_ready(true);
    assert!(e.ready());
    e
}

#[test]
fn the_webhook_refuses_with_403_or_warns_per_installation() {
    use crate::server::Reviewer as _;
    let delete = request("DELETE", ALICE, None, Some(member("app")), json!({}));
    let resp = engine(Mode::Deny).validate(&delete);
    assert!(!resp.allowed);
    assert_eq!(resp.result.code, 403);
    assert!(
        resp.result.message.contains("ResourceGroup 'app'"),
        "{}",
        resp.result.message
    );
    let resp = engine(Mode::Warn).validate(&delete);
    assert!(resp.allowed);
    let warnings = resp.warnings.unwrap_or_default();
    assert!(
        warnings.iter().any(|w| w.contains("ownership boundary")),
        "{warnings:?}"
    );
    // The controller's apply, as the API server reports it.
    let apply = request(
        "UPDATE",
        GROUP_SA,
        Some(member("app")),
        Some(member("app")),
        json!({"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1", "fieldManager": "interlock"}),
    );
    assert!(engine(Mode::Deny).validate(&apply).allowed);
}
