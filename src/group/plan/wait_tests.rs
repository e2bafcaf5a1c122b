//! Readiness, waits between ranks, drift reports and deletion order.

use super::*;

fn widget(phase: &str) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
        "spec": {"size": 1}, "status": {"phase": phase}})
}

/// A plan where Widgets are a namespaced kind the cluster serves.
fn plan_with_widgets(case: &Case) -> Plan {
    let scopes = |v: &str, k: &str| match k {
        "Widget" => Some(Scope::Namespaced),
        _ => BuiltinScopes.scope(v, k),
    };
    plan(&PlanInput {
        group: &case.group,
        spec: &case.spec,
        previous: case.previous.as_ref(),
        observed: &case.observed,
        findings: &case.findings,
        scopes: &scopes,
        now: case.now,
    })
}

#[test]
fn ready_when_decides_a_custom_members_readiness() {
    let mut case = Case::new(vec![widget("")]);
    case.spec.ready_when = serde_json::from_value(json!([
        {"kind": "Widget", "expression": "object.status.phase == 'Running'"}
    ]))
    .expect("rules");
    let desired = plan_with_widgets(&case).apply[0].object.clone();
    let mut live = stored(&desired, "w-uid");
    live["status"] = json!({"phase": "Pending"});
    case.observed = vec![live.clone()];
    let p = plan_with_widgets(&case);
    assert!(p.apply.is_empty(), "{:?}", p.apply);
    let m = &p.status.members[0];
    assert_eq!(m.ready, Some(false));
    assert_eq!(
        m.message.as_deref(),
        Some("spec.readyWhen[0] is false: object.status.phase == 'Running'")
    );
    let ready = p
        .status
        .conditions
        .iter()
        .find(|c| c.type_ == READY)
        .unwrap();
    assert_eq!(ready.status, ConditionStatus::False);
    live["status"] = json!({"phase": "Running"});
    case.observed = vec![live];
    let p = plan_with_widgets(&case);
    assert_eq!(p.status.members[0].ready, Some(true));
    let ready = p
        .status
        .conditions
        .iter()
        .find(|c| c.type_ == READY)
        .unwrap();
    assert_eq!(ready.status, ConditionStatus::True);
}

#[test]
fn a_ready_when_that_does_not_compile_makes_the_group_invalid() {
    let mut case = Case::new(vec![cm("a")]);
    case.spec.ready_when = serde_json::from_value(json!([
        {"kind": "ConfigMap", "expression": "object.data.k =="}
    ]))
    .expect("rules");
    let p = case.plan();
    assert!(p.apply.is_empty(), "nothing written");
    let valid = p
        .status
        .conditions
        .iter()
        .find(|c| c.type_ == VALID)
        .unwrap();
    assert_eq!(valid.status, ConditionStatus::False);
    assert_eq!(valid.reason, reason::INVALID_READY_WHEN);
    assert!(
        valid
            .message
            .starts_with("spec.readyWhen[0].expression: ERROR: <input>:1:"),
        "{}",
        valid.message
    );
}

fn job(name: &str) -> Value {
    json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "migrate", "image": "migrate:1"}]}}}})
}

/// Carries out the plan's applies and prunes, as the caches then hold them.
fn carry_out(case: &mut Case, p: &Plan) {
    for (i, d) in p.apply.iter().enumerate() {
        let uid = format!("uid-{}-{i}", d.target.name);
        case.observed.retain(|o| {
            !(o["kind"] == d.target.kind.as_str()
                && o["metadata"]["name"] == d.target.name.as_str())
        });
        case.observed.push(stored(&d.object, &uid));
    }
    case.previous = Some(p.status.clone());
}

fn waiting_case() -> Case {
    let mut case = Case::new(vec![deploy("web"), job("migrate"), cm("c")]);
    case.spec.wait_for_ready = true;
    case.spec.ready_timeout = "10m".into();
    case
}

#[test]
fn a_rank_ready_at_once_leaves_the_pass_that_wrote_it_its_first_status() {
    let mut case = waiting_case();
    let first = case.plan();
    assert_eq!(names(&first.apply), ["ConfigMap/c"]);
    let answers: Vec<Value> = first
        .apply
        .iter()
        .map(|d| stored(&d.object, "uid-c"))
        .collect();
    case.observed = after_writes(&case.observed, &answers);
    // The ConfigMap is ready as stored: planned again, the Job's rank is
    // due, which this pass did not write.
    let again = case.plan();
    assert_eq!(names(&again.apply), ["Job/migrate"]);
    assert!(again.settled_status().is_none());
    // Nothing left to write: the status stands.
    let mut case = Case::new(vec![cm("c")]);
    let first = case.plan();
    case.observed = after_writes(&[], &[stored(&first.apply[0].object, "uid-c")]);
    let again = case.plan();
    let status = again.clone().settled_status().expect("settled");
    assert_eq!(status, again.status);
    assert_eq!(condition(&status, "Ready").status, True);
}

#[test]
fn wait_for_ready_applies_a_rank_once_the_previous_one_is_ready() {
    let mut case = waiting_case();
    // First pass: only the first rank, the ConfigMap; the others wait for
    // it (a ConfigMap is ready once it exists).
    let p = case.plan();
    assert_eq!(names(&p.apply), ["ConfigMap/c"]);
    let waiting = p.status.waiting_for.as_ref().expect("waiting");
    assert_eq!(
        (waiting.kind.as_str(), waiting.name.as_str()),
        ("ConfigMap", "c")
    );
    carry_out(&mut case, &p);
    case.now = at(1);
    // The ConfigMap exists: the Job's rank goes, and the wait at it starts.
    let p = case.plan();
    assert_eq!(names(&p.apply), ["Job/migrate"]);
    carry_out(&mut case, &p);
    case.now = at(2);
    // The Job runs: the Deployment waits for it, and the status says so.
    case.observed("Job")["status"] = json!({"active": 1});
    let p = case.plan();
    assert!(p.apply.is_empty(), "{:?}", names(&p.apply));
    let w = p.status.waiting_for.as_ref().expect("waiting");
    assert_eq!((w.kind.as_str(), w.name.as_str()), ("Job", "migrate"));
    assert_eq!(w.since, "2026-12-01T12:01:00Z");
    let d = member(&p.status, "Deployment");
    assert_eq!(d.state, MemberState::Waiting);
    assert!(
        d.message.as_deref().unwrap().contains("Job migrate"),
        "{d:?}"
    );
    expect(
        &p.status,
        [
            ("Valid", True, "Valid"),
            ("Applied", False, "Waiting"),
            ("Ready", False, "Waiting"),
        ],
    );
    assert!(condition(&p.status, "Ready")
        .message
        .contains("Job migrate"));
    assert_eq!(p.recheck_at, Some(at(11)));
    carry_out(&mut case, &p);
    // Later passes keep the start of the wait.
    case.now = at(5);
    let p = case.plan();
    assert_eq!(
        p.status.waiting_for.as_ref().unwrap().since,
        "2026-12-01T12:01:00Z"
    );
    carry_out(&mut case, &p);
    // The Job completes: the Deployment is applied, nothing waits.
    case.observed("Job")["status"] =
        json!({"conditions": [{"type": "Complete", "status": "True"}]});
    case.now = at(6);
    let p = case.plan();
    assert_eq!(names(&p.apply), ["Deployment/web"]);
    assert_eq!(p.status.waiting_for, None);
    assert_eq!(p.recheck_at, None);
    carry_out(&mut case, &p);
    let p = case.plan();
    assert!(p.apply.is_empty());
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
fn a_wait_past_the_timeout_is_reported_and_nothing_is_undone() {
    let mut case = waiting_case();
    case.spec.ready_timeout = "3m".into();
    for minute in 0..2 {
        case.now = at(minute);
        let p = case.plan();
        carry_out(&mut case, &p);
    }
    case.observed("Job")["status"] = json!({"active": 1});
    case.now = at(2);
    let p = case.plan();
    carry_out(&mut case, &p);
    case.now = at(5);
    let p = case.plan();
    assert!(p.apply.is_empty() && p.prune.is_empty());
    expect(
        &p.status,
        [
            ("Valid", True, "Valid"),
            ("Applied", False, "Waiting"),
            ("Ready", False, "Timeout"),
        ],
    );
    let ready = condition(&p.status, "Ready");
    assert!(
        ready.message.contains("Job migrate not ready within 3m"),
        "{}",
        ready.message
    );
    assert_eq!(p.recheck_at, None);
    // Nothing applied is removed, and a Job that completes late still
    // lets the Deployment through.
    assert_eq!(case.observed.len(), 2);
    carry_out(&mut case, &p);
    case.observed("Job")["status"] =
        json!({"conditions": [{"type": "Complete", "status": "True"}]});
    case.now = at(9);
    assert_eq!(names(&case.plan().apply), ["Deployment/web"]);
}

#[test]
fn the_wait_restarts_with_a_new_generation_and_prunes_wait_for_it() {
    let mut case = waiting_case();
    for minute in 0..2 {
        case.now = at(minute);
        let p = case.plan();
        carry_out(&mut case, &p);
    }
    // An owned ConfigMap that is no longer listed stays while a member waits.
    let mut old = stored(&cm("old"), "uid-old");
    old["metadata"]["ownerReferences"] = json!([owner_reference(&case.group)]);
    case.observed.push(old);
    case.now = at(3);
    let p = case.plan();
    assert!(p.prune.is_empty());
    assert_eq!(
        p.status.waiting_for.as_ref().unwrap().since,
        "2026-12-01T12:01:00Z"
    );
    carry_out(&mut case, &p);
    case.group.generation += 1;
    case.now = at(4);
    let p = case.plan();
    assert_eq!(
        p.status.waiting_for.as_ref().unwrap().since,
        "2026-12-01T12:04:00Z"
    );
}

#[test]
fn a_claim_lets_the_next_rank_through_unbound() {
    let claim = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}}}});
    let mut case = Case::new(vec![deploy("web"), claim]);
    case.spec.wait_for_ready = true;
    let p = case.plan();
    assert_eq!(names(&p.apply), ["PersistentVolumeClaim/data"]);
    carry_out(&mut case, &p);
    case.observed("PersistentVolumeClaim")["status"] = json!({"phase": "Pending"});
    assert_eq!(names(&case.plan().apply), ["Deployment/web"]);
}

#[test]
fn without_wait_for_ready_every_rank_goes_in_one_pass_jobs_first() {
    let case = Case::new(vec![deploy("web"), job("migrate"), cm("c")]);
    let p = case.plan();
    assert_eq!(
        names(&p.apply),
        ["ConfigMap/c", "Job/migrate", "Deployment/web"]
    );
    assert_eq!(p.status.waiting_for, None);
}

#[test]
fn a_ready_timeout_that_is_not_a_duration_makes_the_group_invalid() {
    let mut case = waiting_case();
    case.spec.ready_timeout = "ten minutes".into();
    let p = case.plan();
    assert!(p.apply.is_empty());
    let valid = condition(&p.status, "Valid");
    assert_eq!(valid.reason, "InvalidReadyTimeout");
    assert!(
        valid.message.contains("spec.readyTimeout"),
        "{}",
        valid.message
    );
}

fn reporting(resources: Vec<Value>) -> Case {
    let mut case = Case::new(resources);
    case.spec.drift = DriftPolicy::Report;
    case
}

#[test]
fn drift_report_lists_a_hand_edit_and_writes_nothing() {
    let mut case = reporting(vec![cm("c"), deploy("web")]);
    let p = converge(&mut case);
    // What is applied carries the hash of its manifest.
    assert!(p
        .apply
        .iter()
        .all(|d| drift::applied_hash(&d.object).is_some()));
    let p = case.plan();
    assert!(p.apply.is_empty());
    assert_eq!(
        reasons(&p.status).last().cloned(),
        Some(("Drifted".into(), False, "NoDrift".into()))
    );
    case.observed("ConfigMap")["data"]["k"] = json!("by hand");
    let p = case.plan();
    assert!(p.apply.is_empty(), "{:?}", names(&p.apply));
    let m = member(&p.status, "ConfigMap");
    assert_eq!(m.state, MemberState::Applied);
    assert_eq!(m.drift, ["data.k"]);
    assert_eq!(
        reasons(&p.status)[1..],
        [
            ("Applied".into(), True, "Applied".into()),
            ("Ready".into(), True, "Ready".into()),
            ("Drifted".into(), True, "Drifted".into()),
        ]
    );
    assert!(condition(&p.status, "Drifted")
        .message
        .contains("ConfigMap c: data.k"));
    // Its manifest changes: it is applied (which puts the field back).
    case.spec.resources[0]["data"]["other"] = json!("x");
    assert_eq!(names(&case.plan().apply), ["ConfigMap/c"]);
    // Revert reverts the edit.
    case.spec.resources[0] = cm("c");
    case.spec.drift = DriftPolicy::Revert;
    let p = case.plan();
    assert_eq!(names(&p.apply), ["ConfigMap/c"]);
    assert!(p.status.members.iter().all(|m| m.drift.is_empty()));
    assert_eq!(p.status.conditions.len(), 3);
}

#[test]
fn drift_report_takes_over_an_existing_object_only_when_it_matches() {
    let mut case = reporting(vec![cm("c")]);
    let mut live = cm("c");
    live["metadata"]["namespace"] = json!("shop");
    live["metadata"]["uid"] = json!("hand-made");
    live["data"]["k"] = json!("live value");
    case.observed = vec![live];
    let p = case.plan();
    assert!(p.apply.is_empty());
    let m = &p.status.members[0];
    assert_eq!(m.state, MemberState::Blocked);
    assert_eq!(m.drift, ["data.k"]);
    assert_eq!(condition(&p.status, "Applied").reason, "NotTakenOver");
    case.observed[0]["data"]["k"] = json!("v");
    assert_eq!(names(&case.plan().apply), ["ConfigMap/c"]);
}

#[test]
fn deletion_removes_the_workloads_before_the_job_they_waited_for() {
    let mut case = waiting_case();
    case.spec.wait_for_ready = false;
    converge(&mut case);
    case.group.deleting = true;
    let delete = |case: &Case| match case.plan().finalize {
        Some(Finalize::Delete(list)) => refs(&list),
        other => panic!("{other:?}"),
    };
    assert_eq!(delete(&case), ["Deployment/web"]);
    case.observed.retain(|o| o["kind"] != "Deployment");
    assert_eq!(delete(&case), ["Job/migrate"]);
    case.observed.retain(|o| o["kind"] != "Job");
    assert_eq!(delete(&case), ["ConfigMap/c"]);
}

#[test]
fn a_member_lists_at_most_twenty_drifted_fields_and_counts_them_all() {
    let mut big = cm("c");
    for i in 0..25 {
        big["data"][format!("k{i:02}")] = json!("v");
    }
    let mut case = reporting(vec![big]);
    converge(&mut case);
    case.observed("ConfigMap")["data"] = json!({});
    let p = case.plan();
    let m = &p.status.members[0];
    assert_eq!(m.drift.len(), drift::MAX_FIELDS);
    assert_eq!(m.drift[0], "data.k");
    assert_eq!(
        m.message.as_deref(),
        Some("26 fields differ from the spec; reported, not reverted (spec.drift: Report)")
    );
}
