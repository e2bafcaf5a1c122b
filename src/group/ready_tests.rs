use super::*;
use serde_json::json;

fn ready(v: Value) -> bool {
    member_ready(&v).is_ready()
}

fn deploy(generation: i64, status: Value) -> Value {
    json!({"kind": "Deployment", "metadata": {"generation": generation},
           "spec": {"replicas": 2}, "status": status})
}

#[test]
fn deployment_needs_rollout_availability_and_current_generation() {
    let done = json!({"observedGeneration": 3, "updatedReplicas": 2, "availableReplicas": 2,
        "conditions": [{"type": "Available", "status": "True"}]});
    assert!(ready(deploy(3, done.clone())));
    assert!(!ready(deploy(4, done.clone())), "status of an older spec");
    let mut v = done.clone();
    v["availableReplicas"] = json!(1);
    assert!(!ready(deploy(3, v)));
    let mut v = done.clone();
    v["updatedReplicas"] = json!(1);
    assert!(!ready(deploy(3, v)));
    let mut v = done.clone();
    v["conditions"][0]["status"] = json!("False");
    assert!(!ready(deploy(3, v)));
    assert!(!ready(deploy(3, json!({}))), "no status yet");
    let mut v = done;
    v["conditions"] = json!([{"type": "Available", "status": "True"},
        {"type": "Progressing", "status": "False", "message": "deadline exceeded"}]);
    let r = member_ready(&deploy(3, v));
    assert_eq!(
        r,
        Readiness::NotReady("rollout stalled: deadline exceeded".into())
    );
}

#[test]
fn deployment_replicas_default_to_one() {
    let v = json!({"kind": "Deployment", "metadata": {"generation": 1}, "spec": {},
        "status": {"observedGeneration": 1, "updatedReplicas": 1, "availableReplicas": 1,
        "conditions": [{"type": "Available", "status": "True"}]}});
    assert!(ready(v));
}

#[test]
fn stateful_set_and_daemon_set() {
    let ss = |ready_n: i64, updated: i64, strategy: &str| {
        json!({"kind": "StatefulSet", "metadata": {"generation": 1},
            "spec": {"replicas": 3, "updateStrategy": {"type": strategy}},
            "status": {"observedGeneration": 1, "readyReplicas": ready_n, "updatedReplicas": updated}})
    };
    assert!(ready(ss(3, 3, "RollingUpdate")));
    assert!(!ready(ss(2, 3, "RollingUpdate")));
    assert!(!ready(ss(3, 1, "RollingUpdate")));
    assert!(ready(ss(3, 1, "OnDelete")));
    let ds = |avail: i64| {
        json!({"kind": "DaemonSet", "metadata": {"generation": 2},
            "status": {"observedGeneration": 2, "desiredNumberScheduled": 3,
            "updatedNumberScheduled": 3, "numberAvailable": avail}})
    };
    assert!(ready(ds(3)));
    assert!(!ready(ds(2)));
}

#[test]
fn jobs_pvcs_pods() {
    let job =
        |t: &str| json!({"kind": "Job", "status": {"conditions": [{"type": t, "status": "True"}]}});
    assert!(ready(job("Complete")));
    assert!(!ready(job("Failed")));
    assert!(!ready(json!({"kind": "Job", "status": {"active": 1}})));
    assert!(ready(
        json!({"kind": "PersistentVolumeClaim", "status": {"phase": "Bound"}})
    ));
    assert!(!ready(
        json!({"kind": "PersistentVolumeClaim", "status": {"phase": "Pending"}})
    ));
    let pod = json!({"kind": "Pod", "status": {"phase": "Running",
        "conditions": [{"type": "Ready", "status": "True"}]}});
    assert!(ready(pod));
    assert!(!ready(json!({"kind": "Pod", "status": {"phase": "Running",
        "conditions": [{"type": "Ready", "status": "False"}]}})));
    assert!(ready(
        json!({"kind": "Pod", "status": {"phase": "Succeeded"}})
    ));
}

#[test]
fn plain_objects_are_ready_once_they_exist() {
    assert!(ready(
        json!({"kind": "ConfigMap", "metadata": {"name": "a"}})
    ));
    assert!(ready(
        json!({"kind": "Secret", "metadata": {"generation": 0}})
    ));
    assert!(ready(
        json!({"kind": "Service", "spec": {"type": "ClusterIP"}})
    ));
    assert!(!ready(
        json!({"kind": "Service", "spec": {"type": "LoadBalancer"}, "status": {}})
    ));
    assert!(ready(
        json!({"kind": "Service", "spec": {"type": "LoadBalancer"},
        "status": {"loadBalancer": {"ingress": [{"ip": "10.0.0.1"}]}}})
    ));
    assert!(!ready(
        json!({"kind": "Widget", "status": {"conditions": [{"type": "Ready", "status": "False"}]}})
    ));
    assert!(!ready(
        json!({"kind": "Widget", "metadata": {"generation": 2},
        "status": {"observedGeneration": 1}})
    ));
}

fn rules(list: Value) -> ReadyRules {
    let list: Vec<ReadyWhen> = serde_json::from_value(list).expect("rules");
    ReadyRules::compile(&list)
}

fn widget(status: Value) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
        "status": status})
}

#[test]
fn a_rule_decides_a_custom_kind_instead_of_the_generic_rule() {
    let r = rules(
        json!([{"kind": "Widget", "expression": "object.status.?phase.orValue('') == 'Running'"}]),
    );
    assert!(r.readiness(&widget(json!({"phase": "Running"}))).is_ready());
    let not = r.readiness(&widget(json!({"phase": "Pending"})));
    assert_eq!(
        not,
        Readiness::NotReady(
            "spec.readyWhen[0] is false: object.status.?phase.orValue('') == 'Running'".into()
        )
    );
    // The generic rule would call this ready; the group's rule does not.
    assert!(member_ready(&widget(json!({}))).is_ready());
    assert!(!r.readiness(&widget(json!({}))).is_ready());
    // Another apiVersion of the kind, when the rule names one.
    let v2 =
        rules(json!([{"apiVersion": "example.com/v2", "kind": "Widget", "expression": "false"}]));
    assert!(v2.readiness(&widget(json!({}))).is_ready());
}

#[test]
fn a_rule_for_a_built_in_kind_holds_in_addition() {
    let r = rules(
        json!([{"kind": "Job", "expression": "object.metadata.?labels.?checked.orValue('') == 'yes'"}]),
    );
    let done = |labels: Value| {
        json!({"kind": "Job", "metadata": {"labels": labels},
        "status": {"conditions": [{"type": "Complete", "status": "True"}]}})
    };
    assert!(r.readiness(&done(json!({"checked": "yes"}))).is_ready());
    assert!(!r.readiness(&done(json!({}))).is_ready());
    let running =
        json!({"kind": "Job", "metadata": {"labels": {"checked": "yes"}}, "status": {"active": 1}});
    assert_eq!(
        r.readiness(&running),
        Readiness::NotReady("not Complete".into())
    );
}

#[test]
fn a_rule_that_fails_makes_the_member_not_ready_with_the_error() {
    let r = rules(json!([{"kind": "Widget", "expression": "object.status.phase == 'Running'"}]));
    let Readiness::NotReady(why) = r.readiness(&widget(json!({}))) else {
        panic!("ready without the field");
    };
    assert!(why.starts_with("spec.readyWhen[0] failed: "), "{why}");
    let r = rules(json!([{"kind": "Widget", "expression": "object.status"}]));
    let Readiness::NotReady(why) = r.readiness(&widget(json!({"a": 1}))) else {
        panic!("a map is not a bool");
    };
    assert!(why.contains("not a bool"), "{why}");
}

#[test]
fn a_rule_that_does_not_compile_is_named_with_its_position() {
    let r = rules(json!([
        {"kind": "Widget", "expression": "true"},
        {"kind": "Widget", "expression": "object.status.phase =="},
        {"kind": "Widget", "expression": "1 + 1"}
    ]));
    let errors: Vec<(usize, String)> = r.errors().map(|(i, e)| (i, e.to_string())).collect();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert_eq!(errors[0].0, 1);
    assert!(
        errors[0].1.starts_with("ERROR: <input>:1:"),
        "{}",
        errors[0].1
    );
    assert_eq!(
        errors[1],
        (2, "must evaluate to bool but got int".to_string())
    );
    let Readiness::NotReady(why) = r.readiness(&widget(json!({}))) else {
        panic!("ready with a broken rule");
    };
    assert!(
        why.starts_with("spec.readyWhen[1] does not compile"),
        "{why}"
    );
}
