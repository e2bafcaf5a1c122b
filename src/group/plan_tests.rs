use super::*;
use crate::group::crd::{FindingObject, APPLYSET_ID_LABEL};
use crate::group::member::{BuiltinScopes, Scope};
use chrono::TimeZone;
use serde_json::json;

fn group() -> GroupRef {
    GroupRef {
        namespace: "shop".into(),
        name: "web".into(),
        uid: "g-uid".into(),
        generation: 3,
        deleting: false,
    }
}

fn spec(resources: Vec<Value>) -> ResourceGroupSpec {
    ResourceGroupSpec {
        service_account_name: "deployer".into(),
        resources,
        prune: true,
        suspend: false,
        deletion_policy: DeletionPolicy::Delete,
        ready_when: vec![],
        wait_for_ready: false,
        ready_timeout: "10m".into(),
        drift: DriftPolicy::Revert,
    }
}

fn at(minute: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 1, 12, minute, 0).unwrap()
}

fn cm(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}})
}

fn deploy(name: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": "nginx"}]}}}})
}

fn svc(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
        "spec": {"selector": {"app": name}, "ports": [{"port": 80}]}})
}

fn sa(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}})
}

fn ingress(name: &str) -> Value {
    json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": name},
        "spec": {"rules": [{"host": "shop.example"}]}})
}

struct Case {
    group: GroupRef,
    spec: ResourceGroupSpec,
    previous: Option<ResourceGroupStatus>,
    observed: Vec<Value>,
    findings: Vec<GroupFinding>,
    now: DateTime<Utc>,
}

impl Case {
    fn new(resources: Vec<Value>) -> Case {
        Case {
            group: group(),
            spec: spec(resources),
            previous: None,
            observed: vec![],
            findings: vec![],
            now: at(0),
        }
    }

    fn plan(&self) -> Plan {
        plan(&PlanInput {
            group: &self.group,
            spec: &self.spec,
            previous: self.previous.as_ref(),
            observed: &self.observed,
            findings: &self.findings,
            scopes: &BuiltinScopes,
            now: self.now,
        })
    }

    /// The stored object of `kind`, to edit in place.
    fn observed(&mut self, kind: &str) -> &mut Value {
        self.observed
            .iter_mut()
            .find(|o| o["kind"] == kind)
            .unwrap()
    }

    /// Marks the stored object of `kind` as being deleted.
    fn terminating(&mut self, kind: &str) -> &mut Value {
        let o = self.observed(kind);
        o["metadata"]["deletionTimestamp"] = json!("2026-12-01T12:01:00Z");
        o
    }
}

/// What the API server stores after applying `desired`: server metadata,
/// defaults, and a status that says ready.
fn stored(desired: &Value, uid: &str) -> Value {
    let mut v = desired.clone();
    v["metadata"]["uid"] = json!(uid);
    v["metadata"]["resourceVersion"] = json!("7");
    v["metadata"]["creationTimestamp"] = json!("2026-12-01T11:00:00Z");
    v["metadata"]["managedFields"] = json!([{"manager": "interlock", "operation": "Apply"}]);
    if v["kind"] == "Deployment" {
        v["metadata"]["generation"] = json!(1);
        v["spec"]["strategy"] = json!({"type": "RollingUpdate"});
        v["status"] = json!({"observedGeneration": 1, "replicas": 2, "updatedReplicas": 2,
            "availableReplicas": 2, "conditions": [{"type": "Available", "status": "True"}]});
    }
    if v["kind"] == "Service" {
        v["spec"]["clusterIP"] = json!("10.0.0.9");
        v["spec"]["ports"][0]["protocol"] = json!("TCP");
        v["spec"]["ports"][0]["targetPort"] = json!(80);
    }
    v
}

/// Every planned apply carried out, as the caches would then hold them.
fn converge(case: &mut Case) -> Plan {
    let first = case.plan();
    case.observed = first
        .apply
        .iter()
        .enumerate()
        .map(|(i, d)| stored(&d.object, &format!("uid-{i}")))
        .collect();
    case.previous = Some(first.status.clone());
    first
}

/// The status of the member of `kind`.
fn member<'a>(status: &'a ResourceGroupStatus, kind: &str) -> &'a MemberStatus {
    status.members.iter().find(|m| m.kind == kind).unwrap()
}

fn condition<'a>(status: &'a ResourceGroupStatus, type_: &str) -> &'a Condition {
    status.conditions.iter().find(|c| c.type_ == type_).unwrap()
}

fn reasons(status: &ResourceGroupStatus) -> Vec<(String, ConditionStatus, String)> {
    status
        .conditions
        .iter()
        .map(|c| (c.type_.clone(), c.status, c.reason.clone()))
        .collect()
}

fn expect(status: &ResourceGroupStatus, want: [(&str, ConditionStatus, &str); 3]) {
    let want: Vec<_> = want
        .iter()
        .map(|(t, s, r)| (t.to_string(), *s, r.to_string()))
        .collect();
    assert_eq!(reasons(status), want, "{status:#?}");
}

fn names(objects: &[DesiredObject]) -> Vec<String> {
    objects
        .iter()
        .map(|d| format!("{}/{}", d.target.kind, d.target.name))
        .collect()
}

use ConditionStatus::{False, True};

#[test]
fn a_new_group_applies_every_member_in_dependency_order() {
    let case = Case::new(vec![
        ingress("web"),
        deploy("web"),
        svc("web"),
        cm("web-config"),
        sa("web"),
    ]);
    let p = case.plan();
    assert_eq!(
        names(&p.apply),
        [
            "ServiceAccount/web",
            "ConfigMap/web-config",
            "Service/web",
            "Deployment/web",
            "Ingress/web"
        ]
    );
    assert!(p.prune.is_empty() && p.finalize.is_none());
    expect(
        &p.status,
        [
            ("Valid", True, "Valid"),
            ("Applied", False, "Progressing"),
            ("Ready", False, "Progressing"),
        ],
    );
    assert_eq!(p.status.observed_generation, Some(3));
    assert!(p
        .status
        .conditions
        .iter()
        .all(|c| c.observed_generation == Some(3)));
    assert!(p
        .status
        .members
        .iter()
        .all(|m| m.state == MemberState::Pending));
}

#[test]
fn applied_members_carry_namespace_label_and_controller_owner_reference() {
    let p = Case::new(vec![cm("c")]).plan();
    let o = &p.apply[0].object;
    assert_eq!(o["metadata"]["namespace"], "shop");
    assert_eq!(
        o["metadata"]["labels"][PART_OF_LABEL],
        json!(applyset_id("shop", "web"))
    );
    assert_eq!(
        o["metadata"]["ownerReferences"],
        json!([{"apiVersion": "interlock.dev/v1alpha1", "kind": "ResourceGroup", "name": "web",
            "uid": "g-uid", "controller": true, "blockOwnerDeletion": true}])
    );
    assert_eq!(p.apply[0].target.namespace, "shop");
    assert_eq!(p.apply[0].target.uid, None);
}

#[test]
fn a_converged_group_makes_no_write_and_keeps_its_status() {
    let mut case = Case::new(vec![deploy("web"), svc("web"), cm("c")]);
    converge(&mut case);
    case.now = at(5);
    let p = case.plan();
    assert!(
        p.apply.is_empty() && p.prune.is_empty(),
        "{:?}",
        names(&p.apply)
    );
    expect(
        &p.status,
        [
            ("Valid", True, "Valid"),
            ("Applied", True, "Applied"),
            ("Ready", True, "Ready"),
        ],
    );
    assert!(p
        .status
        .members
        .iter()
        .all(|m| m.state == MemberState::Applied && m.ready == Some(true)));
    assert!(p.status.members.iter().all(|m| m.uid.is_some()));
    // The next pass (or a restarted controller) computes the same status:
    // the executor sees no change and writes nothing.
    case.previous = Some(p.status.clone());
    case.now = at(9);
    assert_eq!(case.plan().status, p.status);
}

#[test]
fn members_just_written_are_judged_from_the_apply_answers_as_the_next_pass_will() {
    let mut case = Case::new(vec![cm("c"), svc("web"), sa("runner"), deploy("web")]);
    let first = case.plan();
    assert_eq!(condition(&first.status, "Ready").reason, "Progressing");
    // The answers of the applies: a Deployment is stored before any Pod
    // runs, so its answer has no status yet.
    let answers: Vec<Value> = first
        .apply
        .iter()
        .enumerate()
        .map(|(i, d)| stored(&d.object, &format!("uid-{i}")))
        .map(|mut v| {
            if v["kind"] == "Deployment" {
                v.as_object_mut().unwrap().remove("status");
            }
            v
        })
        .collect();
    case.observed = after_writes(&case.observed, &answers);
    let written = case.plan();
    assert!(written.apply.is_empty(), "{:?}", names(&written.apply));
    let ready: BTreeMap<&str, Option<bool>> = written
        .status
        .members
        .iter()
        .map(|m| (m.kind.as_str(), m.ready))
        .collect();
    let want = [
        ("ConfigMap", Some(true)),
        ("Deployment", Some(false)),
        ("Service", Some(true)),
        ("ServiceAccount", Some(true)),
    ];
    assert_eq!(ready, BTreeMap::from(want));
    assert_eq!(condition(&written.status, "Ready").status, False);
    // Without the Deployment every member is ready at once: one status.
    case.spec.resources.pop();
    case.observed.retain(|o| o["kind"] != "Deployment");
    let written = case.plan();
    expect(
        &written.status,
        [
            ("Valid", True, "Valid"),
            ("Applied", True, "Applied"),
            ("Ready", True, "Ready"),
        ],
    );
    // The pass the writes' watch events wake sees the same objects in its
    // caches and computes the same status: nothing to write.
    case.previous = Some(written.status.clone());
    case.now = at(1);
    assert_eq!(case.plan().status, written.status);
}

#[test]
fn an_answer_replaces_the_cached_object_of_its_key_and_keeps_the_others() {
    let mut old = stored(&cm("c"), "uid-c");
    old["data"] = json!({"k": "old"});
    let other = stored(&cm("d"), "uid-d");
    let answer = stored(&cm("c"), "uid-c");
    let after = after_writes(&[old, other.clone()], std::slice::from_ref(&answer));
    assert_eq!(after, vec![other, answer]);
}

#[test]
fn last_transition_time_moves_only_when_status_changes() {
    let mut case = Case::new(vec![cm("c")]);
    converge(&mut case);
    let valid_since = condition(case.previous.as_ref().unwrap(), "Valid")
        .last_transition_time
        .clone();
    case.now = at(5);
    let p = case.plan();
    assert_eq!(
        condition(&p.status, "Valid").last_transition_time,
        valid_since
    );
    assert_eq!(
        condition(&p.status, "Applied").last_transition_time,
        "2026-12-01T12:05:00Z"
    );
    assert_eq!(condition(&p.status, "Applied").status, True);
}

#[test]
fn a_hand_edit_is_reverted_and_only_that_member_written() {
    let mut case = Case::new(vec![deploy("web"), cm("c")]);
    converge(&mut case);
    case.observed("Deployment")["spec"]["replicas"] = json!(9);
    let p = case.plan();
    assert_eq!(names(&p.apply), ["Deployment/web"]);
    assert_eq!(
        p.apply[0]
            .target
            .uid
            .as_deref()
            .map(|u| u.starts_with("uid-")),
        Some(true)
    );
    let m = member(&p.status, "Deployment");
    assert_eq!(m.state, MemberState::Pending);
    expect(
        &p.status,
        [
            ("Valid", True, "Valid"),
            ("Applied", False, "Progressing"),
            ("Ready", False, "Progressing"),
        ],
    );
}

#[test]
fn a_member_deleted_by_hand_comes_back() {
    let mut case = Case::new(vec![deploy("web"), cm("c")]);
    converge(&mut case);
    case.observed.retain(|o| o["kind"] != "ConfigMap");
    assert_eq!(names(&case.plan().apply), ["ConfigMap/c"]);
}

fn finding(action: FindingAction, kind: &str, name: &str) -> GroupFinding {
    GroupFinding {
        policy: "no-latest".into(),
        binding: Some("no-latest".into()),
        action,
        object: FindingObject {
            api_version: "apps/v1".into(),
            kind: kind.into(),
            namespace: Some("shop".into()),
            name: name.into(),
        },
        message: "image tag latest".into(),
    }
}

#[test]
fn a_deny_finding_blocks_every_write_and_prune() {
    let mut case = Case::new(vec![deploy("web"), cm("c")]);
    case.observed = vec![stored(
        &with_ownership(
            &json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "old", "namespace": "shop"}}),
            &group(),
            &applyset_id("shop", "web"),
        ),
        "o",
    )];
    case.findings = vec![finding(FindingAction::Deny, "Deployment", "web")];
    let p = case.plan();
    assert!(p.apply.is_empty() && p.prune.is_empty());
    expect(
        &p.status,
        [
            ("Valid", False, "PolicyViolation"),
            ("Applied", False, "PolicyViolation"),
            ("Ready", False, "PolicyViolation"),
        ],
    );
    let valid = condition(&p.status, "Valid");
    assert!(
        valid
            .message
            .contains("Deployment web: no-latest: image tag latest"),
        "{}",
        valid.message
    );
    assert_eq!(p.status.findings, case.findings);
    assert!(p
        .status
        .members
        .iter()
        .any(|m| m.state == MemberState::Blocked));
    let old = p.status.members.iter().find(|m| m.name == "old").unwrap();
    assert_eq!(old.state, MemberState::Pruning);
}

/// A review that got no answer outranks the policies' verdicts: the
/// reason says the group waits for the authorizer (which the controller
/// retries), the message lists both.
#[test]
fn an_unanswered_authorizer_check_blocks_the_group_with_its_own_reason() {
    let mut case = Case::new(vec![cm("c")]);
    let mut unanswered = finding(FindingAction::Deny, "ConfigMap", "c");
    unanswered.policy = crate::group::validate::AUTHORIZER.into();
    unanswered.message = "no answer".into();
    case.findings = vec![finding(FindingAction::Deny, "ConfigMap", "c"), unanswered];
    let p = case.plan();
    assert!(p.apply.is_empty());
    expect(
        &p.status,
        [
            ("Valid", False, "AuthorizerUnavailable"),
            ("Applied", False, "AuthorizerUnavailable"),
            ("Ready", False, "AuthorizerUnavailable"),
        ],
    );
    assert_eq!(
        condition(&p.status, "Valid").message,
        "ConfigMap c: authorizer: no answer; ConfigMap c: no-latest: image tag latest"
    );
}

#[test]
fn warnings_are_reported_but_do_not_block() {
    let mut case = Case::new(vec![cm("c")]);
    case.findings = vec![finding(FindingAction::Warn, "ConfigMap", "c")];
    let p = case.plan();
    assert_eq!(names(&p.apply), ["ConfigMap/c"]);
    assert_eq!(p.status.findings.len(), 1);
    assert_eq!(condition(&p.status, "Valid").status, True);
}

#[test]
fn members_out_of_scope_are_refused_by_name() {
    for (member, needle) in [
        (
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "kube-system"}}),
            "namespace kube-system",
        ),
        (
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "x"}}),
            "cluster-scoped",
        ),
        (
            json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "x"}}),
            "does not serve Widget",
        ),
    ] {
        let p = Case::new(vec![cm("c"), member.clone()]).plan();
        assert!(p.apply.is_empty(), "{member}");
        expect(
            &p.status,
            [
                ("Valid", False, "MemberOutOfScope"),
                ("Applied", False, "MemberOutOfScope"),
                ("Ready", False, "MemberOutOfScope"),
            ],
        );
        let m = &p.status.members[1];
        assert_eq!(m.state, MemberState::OutOfScope);
        assert!(m.message.as_deref().unwrap_or("").contains(needle), "{m:?}");
        assert!(
            condition(&p.status, "Valid").message.contains("member 1 ("),
            "names the member"
        );
    }
}

#[test]
fn a_discovered_kind_is_accepted() {
    let case = Case::new(vec![
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}),
    ]);
    let scopes = |_: &str, kind: &str| (kind == "Widget").then_some(Scope::Namespaced);
    let p = plan(&PlanInput {
        group: &case.group,
        spec: &case.spec,
        previous: None,
        observed: &[],
        findings: &[],
        scopes: &scopes,
        now: at(0),
    });
    assert_eq!(names(&p.apply), ["Widget/w"]);
}

#[test]
fn invalid_and_duplicate_members_block_the_group() {
    let p = Case::new(vec![
        cm("c"),
        json!({"kind": "Secret", "metadata": {"name": "s"}}),
    ])
    .plan();
    assert!(p.apply.is_empty());
    assert_eq!(condition(&p.status, "Valid").reason, "InvalidMember");
    assert!(condition(&p.status, "Valid")
        .message
        .contains("member 1 (Secret s): no apiVersion"));
    assert_eq!(p.status.members[1].state, MemberState::Invalid);

    let p = Case::new(vec![cm("c"), json!(42)]).plan();
    assert!(condition(&p.status, "Valid")
        .message
        .contains("not an object"));

    let itself = json!({"apiVersion": "interlock.dev/v1alpha1", "kind": "ResourceGroup",
        "metadata": {"name": "web"}, "spec": {"serviceAccountName": "x"}});
    let p = Case::new(vec![cm("c"), itself]).plan();
    assert!(p.apply.is_empty());
    assert!(condition(&p.status, "Valid")
        .message
        .contains("a group cannot hold itself"));

    let p = Case::new(vec![cm("c"), cm("c")]).plan();
    assert!(p.apply.is_empty());
    assert_eq!(condition(&p.status, "Valid").reason, "DuplicateMember");
    assert!(condition(&p.status, "Valid")
        .message
        .contains("listed twice"));
}

#[test]
fn the_most_basic_problem_gives_the_reason_and_every_problem_is_listed() {
    let mut case = Case::new(vec![
        cm("c"),
        json!({"kind": "Secret", "metadata": {"name": "s"}}),
    ]);
    case.findings = vec![finding(FindingAction::Deny, "ConfigMap", "c")];
    let p = case.plan();
    let valid = condition(&p.status, "Valid");
    assert_eq!(valid.reason, "InvalidMember");
    assert!(
        valid.message.contains("no apiVersion") && valid.message.contains("no-latest"),
        "{}",
        valid.message
    );
}

fn other_owned(owner: Value, labels: Value) -> Value {
    let mut v = stored(&cm("c"), "x");
    v["metadata"]["namespace"] = json!("shop");
    v["metadata"]["ownerReferences"] = json!([owner]);
    v["metadata"]["labels"] = labels;
    v
}

#[test]
fn objects_of_someone_else_are_conflicts_never_adopted() {
    let cases = [
        other_owned(
            json!({"apiVersion": "interlock.dev/v1alpha1", "kind": "ResourceGroup", "name": "other", "uid": "o"}),
            json!({}),
        ),
        other_owned(
            json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "r", "controller": true}),
            json!({}),
        ),
        other_owned(
            json!({"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "p"}),
            json!({PART_OF_LABEL: "applyset-other-v1"}),
        ),
    ];
    for live in cases {
        let mut case = Case::new(vec![cm("c"), cm("d")]);
        case.observed = vec![live.clone()];
        let p = case.plan();
        assert!(p.apply.is_empty(), "{live}");
        expect(
            &p.status,
            [
                ("Valid", True, "Valid"),
                ("Applied", False, "Conflict"),
                ("Ready", False, "Conflict"),
            ],
        );
        let m = &p.status.members[0];
        assert_eq!(
            (m.state, m.uid.as_deref()),
            (MemberState::Conflict, Some("x"))
        );
        assert!(condition(&p.status, "Applied")
            .message
            .contains("ConfigMap c exists and"));
    }
}

#[test]
fn an_object_nobody_claims_is_taken_over() {
    let mut case = Case::new(vec![cm("c")]);
    let mut live = stored(&cm("c"), "x");
    live["metadata"]["namespace"] = json!("shop");
    case.observed = vec![live];
    let p = case.plan();
    assert_eq!(names(&p.apply), ["ConfigMap/c"]);
    assert_eq!(p.apply[0].target.uid.as_deref(), Some("x"));
}

#[test]
fn owned_objects_no_longer_listed_are_pruned_in_reverse_order() {
    let mut case = Case::new(vec![sa("web"), cm("c"), svc("web"), deploy("web")]);
    converge(&mut case);
    case.spec.resources = vec![sa("web")];
    // Someone else's object with our label only is not ours to delete.
    let mut foreign = stored(&cm("labelled"), "f");
    foreign["metadata"]["namespace"] = json!("shop");
    foreign["metadata"]["labels"] = json!({PART_OF_LABEL: applyset_id("shop", "web")});
    case.observed.push(foreign);
    let p = case.plan();
    assert!(p.apply.is_empty());
    let pruned: Vec<String> = p
        .prune
        .iter()
        .map(|o| format!("{}/{}", o.kind, o.name))
        .collect();
    assert_eq!(pruned, ["Deployment/web", "Service/web", "ConfigMap/c"]);
    assert!(p.prune.iter().all(|o| o.uid.is_some()));
    expect(
        &p.status,
        [
            ("Valid", True, "Valid"),
            ("Applied", False, "Progressing"),
            ("Ready", False, "Progressing"),
        ],
    );
    let states: Vec<MemberState> = p.status.members.iter().map(|m| m.state).collect();
    assert_eq!(
        states,
        [
            MemberState::Applied,
            MemberState::Pruning,
            MemberState::Pruning,
            MemberState::Pruning
        ]
    );

    // A pruned object that is terminating is not deleted again, and the
    // group stays Progressing until it is gone.
    case.terminating("Deployment");
    let p = case.plan();
    assert_eq!(refs(&p.prune), ["Service/web", "ConfigMap/c"]);
    assert_eq!(condition(&p.status, "Applied").reason, "Progressing");
    case.observed.retain(|o| o["kind"] != "Deployment");

    case.spec.prune = false;
    let p = case.plan();
    assert!(p.prune.is_empty());
    assert!(p
        .status
        .members
        .iter()
        .skip(1)
        .all(|m| m.state == MemberState::Unlisted));
    expect(
        &p.status,
        [
            ("Valid", True, "Valid"),
            ("Applied", True, "Applied"),
            ("Ready", True, "Ready"),
        ],
    );
}

#[test]
fn a_suspended_group_writes_nothing_and_reports() {
    let mut case = Case::new(vec![cm("c")]);
    case.spec.suspend = true;
    let p = case.plan();
    assert!(p.apply.is_empty() && p.prune.is_empty());
    expect(
        &p.status,
        [
            ("Valid", True, "Valid"),
            ("Applied", False, "Suspended"),
            ("Ready", False, "Suspended"),
        ],
    );
    assert_eq!(p.status.members[0].state, MemberState::Blocked);

    case.spec.suspend = false;
    converge(&mut case);
    case.spec.suspend = true;
    case.spec.resources = vec![];
    let p = case.plan();
    assert!(p.prune.is_empty(), "no prune while suspended");
    assert_eq!(condition(&p.status, "Applied").reason, "Suspended");
}

#[test]
fn a_suspended_converged_group_is_applied_and_ready() {
    let mut case = Case::new(vec![cm("c")]);
    converge(&mut case);
    case.spec.suspend = true;
    let p = case.plan();
    expect(
        &p.status,
        [
            ("Valid", True, "Valid"),
            ("Applied", True, "Suspended"),
            ("Ready", True, "Ready"),
        ],
    );
}

#[test]
fn ready_waits_for_every_member() {
    let mut case = Case::new(vec![deploy("web"), cm("c")]);
    converge(&mut case);
    case.observed("Deployment")["status"]["availableReplicas"] = json!(1);
    let p = case.plan();
    assert!(p.apply.is_empty(), "status is not ours to write");
    expect(
        &p.status,
        [
            ("Valid", True, "Valid"),
            ("Applied", True, "Applied"),
            ("Ready", False, "Progressing"),
        ],
    );
    let ready = condition(&p.status, "Ready");
    assert!(
        ready
            .message
            .contains("Deployment web: 1 of 2 replicas available"),
        "{}",
        ready.message
    );
}

#[test]
fn a_terminating_object_is_waited_for_not_written() {
    let mut case = Case::new(vec![cm("c"), cm("d")]);
    let mut live = stored(&cm("c"), "x");
    live["metadata"]["namespace"] = json!("shop");
    live["metadata"]["deletionTimestamp"] = json!("2026-12-01T11:59:00Z");
    case.observed = vec![live];
    let p = case.plan();
    assert_eq!(names(&p.apply), ["ConfigMap/d"]);
    assert_eq!(p.status.members[0].state, MemberState::Pending);
    assert_eq!(condition(&p.status, "Applied").status, False);
}

#[test]
fn owner_references_of_the_manifest_are_kept() {
    let mut c = cm("c");
    c["metadata"]["ownerReferences"] =
        json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": "o-uid"}]);
    let p = Case::new(vec![c]).plan();
    let refs = p.apply[0].object["metadata"]["ownerReferences"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(refs.len(), 2);
    assert_eq!(refs[0]["uid"], "o-uid");
    assert_eq!(refs[1]["uid"], "g-uid");
}

fn refs(list: &[ObjectRef]) -> Vec<String> {
    list.iter()
        .map(|o| format!("{}/{}", o.kind, o.name))
        .collect()
}

#[test]
fn a_refused_write_is_recorded_on_the_member_and_conditions() {
    let case = Case::new(vec![cm("c"), deploy("web")]);
    let mut p = case.plan();
    let target = p.apply[1].target.clone();
    p.record_failure(
        None,
        &target,
        "Forbidden",
        "deployer cannot create deployments",
        at(1),
    );
    let m = member(&p.status, "Deployment");
    assert_eq!(m.state, MemberState::Failed);
    expect(
        &p.status,
        [
            ("Valid", True, "Valid"),
            ("Applied", False, "Forbidden"),
            ("Ready", False, "Forbidden"),
        ],
    );
    assert!(condition(&p.status, "Applied")
        .message
        .contains("Deployment web: deployer cannot"));
}

#[test]
fn the_group_is_marked_as_an_applyset_parent() {
    let mut case = Case::new(vec![deploy("web"), cm("c"), sa("s")]);
    converge(&mut case);
    case.spec.resources.pop();
    let p = case.plan();
    let meta = p.applyset_parent_metadata(&case.group);
    assert_eq!(
        meta,
        json!({"metadata": {
            "labels": {APPLYSET_ID_LABEL: applyset_id("shop", "web")},
            "annotations": {
                "applyset.kubernetes.io/tooling": concat!("interlock/v", env!("CARGO_PKG_VERSION")),
                // The pruned ServiceAccount is still a member until it is gone.
                "applyset.kubernetes.io/contains-group-kinds": "ConfigMap,Deployment.apps,ServiceAccount",
            }
        }})
    );
}

#[test]
fn the_group_ref_comes_from_the_stored_group() {
    let mut rg = ResourceGroup::new("web", spec(vec![]));
    assert_eq!(GroupRef::of(&rg), Err(GroupRefError("namespace")));
    rg.metadata.namespace = Some("shop".into());
    rg.metadata.uid = Some("g-uid".into());
    rg.metadata.generation = Some(3);
    assert_eq!(GroupRef::of(&rg), Ok(group()));
}

#[test]
fn the_status_serialises_in_the_contracted_shape() {
    let mut case = Case::new(vec![cm("c")]);
    converge(&mut case);
    let status = serde_json::to_value(case.plan().status).unwrap();
    assert_eq!(status["observedGeneration"], 3);
    assert_eq!(
        status["conditions"][0],
        json!({"type": "Valid", "status": "True", "reason": "Valid",
            "message": "1 members pass every policy (0 warnings or audit findings)",
            "observedGeneration": 3, "lastTransitionTime": "2026-12-01T12:00:00Z"})
    );
    assert_eq!(
        status["members"][0],
        json!({"apiVersion": "v1", "kind": "ConfigMap", "namespace": "shop", "name": "c",
            "uid": "uid-0", "state": "Applied", "ready": true})
    );
    assert_eq!(status["findings"], json!([]));
    let back: ResourceGroupStatus = serde_json::from_value(status).unwrap();
    assert_eq!(back, case.plan().status);
}

#[path = "plan/deletion_tests.rs"]
mod deletion;
#[path = "plan/wait_tests.rs"]
mod wait;
