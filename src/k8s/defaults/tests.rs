//! One test per defaulting rule; tests/integration/defaults_apiserver.rs
//! compares the whole result with what a real kube-apiserver stores.

use super::apply;
use super::pod::pull_policy;
use serde_json::{json, Value as Json};

fn defaulted(mut object: Json) -> Json {
    apply(&mut object);
    object
}

fn pod(spec: Json) -> Json {
    defaulted(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}))
}

fn at<'a>(v: &'a Json, pointer: &str) -> &'a Json {
    v.pointer(pointer)
        .unwrap_or_else(|| panic!("no {pointer} in {v}"))
}

#[test]
fn pull_policy_follows_the_tag() {
    for (image, policy) in [
        ("nginx", "Always"),
        ("nginx:latest", "Always"),
        ("nginx:1.27", "IfNotPresent"),
        ("registry.example.com:5000/team/app", "Always"),
        ("registry.example.com:5000/team/app:v2", "IfNotPresent"),
        ("localhost/app:latest", "Always"),
        (
            "nginx@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "IfNotPresent",
        ),
        (
            "nginx:latest@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "Always",
        ),
        // Go's parser refuses these; the tag is then empty, not `latest`.
        ("Nginx", "IfNotPresent"),
        ("nginx@sha256:abc", "IfNotPresent"),
        ("", "IfNotPresent"),
        ("nginx:", "IfNotPresent"),
        ("a--b", "Always"),
        ("a-.b", "IfNotPresent"),
    ] {
        assert_eq!(pull_policy(image), policy, "{image}");
    }
}

#[test]
fn container_defaults() {
    let p = pod(json!({"containers": [{"name": "c", "image": "nginx:1",
        "ports": [{"containerPort": 80}, {"containerPort": 53, "protocol": "UDP"}]}]}));
    let c = at(&p, "/spec/containers/0");
    assert_eq!(c["imagePullPolicy"], "IfNotPresent");
    assert_eq!(c["terminationMessagePath"], "/dev/termination-log");
    assert_eq!(c["terminationMessagePolicy"], "File");
    assert_eq!(c["ports"][0]["protocol"], "TCP");
    assert_eq!(c["ports"][1]["protocol"], "UDP");
}

#[test]
fn explicit_values_are_kept() {
    let p = pod(json!({"restartPolicy": "Never", "dnsPolicy": "Default",
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "c", "image": "nginx", "imagePullPolicy": "Never"}]}));
    assert_eq!(p["spec"]["restartPolicy"], "Never");
    assert_eq!(p["spec"]["dnsPolicy"], "Default");
    assert_eq!(p["spec"]["terminationGracePeriodSeconds"], 0);
    assert_eq!(p["spec"]["containers"][0]["imagePullPolicy"], "Never");
}

#[test]
fn pod_spec_defaults() {
    let p = pod(json!({"containers": [{"name": "c", "image": "nginx"}]}));
    let s = &p["spec"];
    assert_eq!(s["restartPolicy"], "Always");
    assert_eq!(s["dnsPolicy"], "ClusterFirst");
    assert_eq!(s["schedulerName"], "default-scheduler");
    assert_eq!(s["terminationGracePeriodSeconds"], 30);
    assert_eq!(s["securityContext"], json!({}));
    assert_eq!(s["enableServiceLinks"], true);
}

#[test]
fn requests_default_to_limits_in_pods_only() {
    let containers = json!([{"name": "c", "image": "nginx",
        "resources": {"limits": {"cpu": "1000m", "memory": "1Gi"}, "requests": {"cpu": 0.5}}}]);
    let p = pod(json!({"containers": containers}));
    let r = at(&p, "/spec/containers/0/resources");
    assert_eq!(r["limits"], json!({"cpu": "1", "memory": "1Gi"}));
    assert_eq!(r["requests"], json!({"cpu": "500m", "memory": "1Gi"}));
    let d = defaulted(json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "d"},
        "spec": {"template": {"spec": {"containers": containers}}}}));
    let r = at(&d, "/spec/template/spec/containers/0/resources");
    assert_eq!(r["requests"], json!({"cpu": "500m"}));
    assert!(d
        .pointer("/spec/template/spec/enableServiceLinks")
        .is_none());
}

#[test]
fn quantities_are_rounded_up_to_millis_and_canonical() {
    let p = pod(
        json!({"containers": [{"name": "c", "image": "nginx", "resources": {
        "limits": {"cpu": "100u", "memory": "1.5Gi", "example.com/gpu": 2},
        "requests": {"cpu": "0.0001", "memory": "1536Mi"}}}]}),
    );
    let r = at(&p, "/spec/containers/0/resources");
    assert_eq!(
        r["limits"],
        json!({"cpu": "1m", "memory": "1536Mi", "example.com/gpu": "2"})
    );
    assert_eq!(
        r["requests"],
        json!({"cpu": "1m", "memory": "1536Mi", "example.com/gpu": "2"})
    );
}

#[test]
fn host_network_defaults_host_ports() {
    let p = pod(json!({"hostNetwork": true,
        "containers": [{"name": "c", "image": "nginx", "ports": [{"containerPort": 8080}]}]}));
    assert_eq!(at(&p, "/spec/containers/0/ports/0/hostPort"), 8080);
}

#[test]
fn probes_and_hooks() {
    let p = pod(json!({"containers": [{"name": "c", "image": "nginx",
        "livenessProbe": {"httpGet": {"port": 80}},
        "readinessProbe": {"grpc": {"port": 9000}, "periodSeconds": 5},
        "lifecycle": {"preStop": {"httpGet": {"port": 80, "path": "/quit"}}}}]}));
    let c = at(&p, "/spec/containers/0");
    assert_eq!(
        c["livenessProbe"],
        json!({"httpGet": {"port": 80, "path": "/", "scheme": "HTTP"},
            "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3})
    );
    assert_eq!(c["readinessProbe"]["periodSeconds"], 5);
    assert_eq!(c["readinessProbe"]["grpc"]["service"], "");
    assert_eq!(c["lifecycle"]["preStop"]["httpGet"]["scheme"], "HTTP");
    assert_eq!(c["lifecycle"]["preStop"]["httpGet"]["path"], "/quit");
}

#[test]
fn env_references() {
    let p = pod(
        json!({"containers": [{"name": "c", "image": "nginx", "env": [
        {"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "B", "value": "b"}]}]}),
    );
    assert_eq!(
        at(&p, "/spec/containers/0/env/0/valueFrom/fieldRef/apiVersion"),
        "v1"
    );
    assert_eq!(
        at(&p, "/spec/containers/0/env/1"),
        &json!({"name": "B", "value": "b"})
    );
}

#[test]
fn volumes() {
    let p = pod(
        json!({"containers": [{"name": "c", "image": "nginx"}], "volumes": [
        {"name": "scratch"},
        {"name": "s", "secret": {"secretName": "x"}},
        {"name": "m", "configMap": {"name": "x", "defaultMode": 256}},
        {"name": "h", "hostPath": {"path": "/tmp"}},
        {"name": "p", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}},
            {"downwardAPI": {"items": [{"path": "n", "fieldRef": {"fieldPath": "metadata.name"}}]}}]}},
        {"name": "i", "image": {"reference": "quay.io/x/y"}}]}),
    );
    let v = at(&p, "/spec/volumes");
    assert_eq!(v[0]["emptyDir"], json!({}));
    assert_eq!(v[1]["secret"]["defaultMode"], 420);
    assert_eq!(v[2]["configMap"]["defaultMode"], 256);
    assert_eq!(v[3]["hostPath"]["type"], "");
    assert_eq!(v[4]["projected"]["defaultMode"], 420);
    assert_eq!(
        v[4]["projected"]["sources"][0]["serviceAccountToken"]["expirationSeconds"],
        3600
    );
    assert_eq!(
        v[4]["projected"]["sources"][1]["downwardAPI"]["items"][0]["fieldRef"]["apiVersion"],
        "v1"
    );
    assert_eq!(v[5]["image"]["pullPolicy"], "Always");
}

#[test]
fn service_defaults() {
    let s = defaulted(
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
        "spec": {"selector": {"app": "a"}, "ports": [{"port": 80}, {"port": 53, "targetPort": "dns", "protocol": "UDP"}],
            "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 5}}}}),
    );
    let spec = &s["spec"];
    assert_eq!(spec["type"], "ClusterIP");
    assert_eq!(spec["sessionAffinity"], "None");
    assert!(
        spec.get("sessionAffinityConfig").is_none(),
        "dropped with None"
    );
    assert_eq!(spec["ports"][0]["protocol"], "TCP");
    assert_eq!(spec["ports"][0]["targetPort"], 80);
    assert_eq!(spec["ports"][1]["targetPort"], "dns");
    assert_eq!(spec["internalTrafficPolicy"], "Cluster");
    assert_eq!(spec["ipFamilyPolicy"], "SingleStack");
    assert!(spec.get("externalTrafficPolicy").is_none());
    assert!(spec.get("clusterIP").is_none(), "allocated, not defaulted");
}

#[test]
fn load_balancer_and_client_ip() {
    let s = defaulted(
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
        "spec": {"type": "LoadBalancer", "sessionAffinity": "ClientIP", "ports": [{"port": 80}]}}),
    );
    let spec = &s["spec"];
    assert_eq!(spec["externalTrafficPolicy"], "Cluster");
    assert_eq!(spec["allocateLoadBalancerNodePorts"], true);
    assert_eq!(
        spec["sessionAffinityConfig"]["clientIP"]["timeoutSeconds"],
        10800
    );
}

#[test]
fn headless_and_external_name_services() {
    let headless = defaulted(
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
        "spec": {"clusterIP": "None"}}),
    );
    assert_eq!(headless["spec"]["ipFamilyPolicy"], "RequireDualStack");
    let external = defaulted(
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
        "spec": {"type": "ExternalName", "externalName": "example.com"}}),
    );
    assert!(external["spec"].get("ipFamilyPolicy").is_none());
    assert!(external["spec"].get("internalTrafficPolicy").is_none());
}

#[test]
fn deployment_defaults() {
    let d = defaulted(
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}),
    );
    let spec = &d["spec"];
    assert_eq!(spec["replicas"], 1);
    assert_eq!(
        spec["strategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
    );
    assert_eq!(spec["revisionHistoryLimit"], 10);
    assert_eq!(spec["progressDeadlineSeconds"], 600);
    assert_eq!(spec["template"]["spec"]["restartPolicy"], "Always");
    assert_eq!(
        spec["template"]["spec"]["containers"][0]["imagePullPolicy"],
        "Always"
    );
    let recreate = defaulted(json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "d"}, "spec": {"strategy": {"type": "Recreate"}}}));
    assert_eq!(recreate["spec"]["strategy"], json!({"type": "Recreate"}));
}

#[test]
fn daemon_set_and_replica_set() {
    let ds = defaulted(
        json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "d"}, "spec": {}}),
    );
    assert_eq!(
        ds["spec"]["updateStrategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}})
    );
    assert_eq!(ds["spec"]["revisionHistoryLimit"], 10);
    let rs = defaulted(
        json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "r"}, "spec": {}}),
    );
    assert_eq!(rs["spec"]["replicas"], 1);
}

#[test]
fn stateful_set_defaults() {
    let ss = defaulted(
        json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "s"},
        "spec": {"volumeClaimTemplates": [{"metadata": {"name": "data"},
            "spec": {"resources": {"requests": {"storage": "1024Mi"}}}}]}}),
    );
    let spec = &ss["spec"];
    assert_eq!(spec["podManagementPolicy"], "OrderedReady");
    assert_eq!(
        spec["updateStrategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}})
    );
    assert_eq!(
        spec["persistentVolumeClaimRetentionPolicy"],
        json!({"whenDeleted": "Retain", "whenScaled": "Retain"})
    );
    let claim = &spec["volumeClaimTemplates"][0];
    assert_eq!(claim["spec"]["volumeMode"], "Filesystem");
    assert_eq!(claim["spec"]["resources"]["requests"]["storage"], "1Gi");
    assert_eq!(claim["status"]["phase"], "Pending");
}

#[test]
fn job_defaults() {
    let j = defaulted(
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
        "spec": {"template": {"metadata": {"labels": {"app": "j"}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox:1"}]}}}}),
    );
    assert_eq!(j["metadata"]["labels"], json!({"app": "j"}));
    let spec = &j["spec"];
    for (field, value) in [
        ("completions", json!(1)),
        ("parallelism", json!(1)),
        ("backoffLimit", json!(6)),
        ("completionMode", json!("NonIndexed")),
        ("suspend", json!(false)),
        ("podReplacementPolicy", json!("TerminatingOrFailed")),
        ("manualSelector", json!(false)),
    ] {
        assert_eq!(spec[field], value, "{field}");
    }
    let parallel = defaulted(
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
        "spec": {"parallelism": 3, "backoffLimitPerIndex": 1, "completionMode": "Indexed", "completions": 3,
            "podFailurePolicy": {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}}}),
    );
    let spec = &parallel["spec"];
    assert_eq!(spec["completions"], 3);
    assert_eq!(spec["backoffLimit"], 2147483647);
    assert_eq!(spec["podReplacementPolicy"], "Failed");
    assert_eq!(
        spec["podFailurePolicy"]["rules"][0]["onPodConditions"][0]["status"],
        "True"
    );
}

#[test]
fn cron_job_defaults_its_own_fields_and_the_pod_spec_only() {
    let cj = defaulted(
        json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c"},
        "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": {"spec": {
            "restartPolicy": "OnFailure", "containers": [{"name": "c", "image": "busybox"}]}}}}}}),
    );
    let spec = &cj["spec"];
    assert_eq!(spec["concurrencyPolicy"], "Allow");
    assert_eq!(spec["suspend"], false);
    assert_eq!(spec["successfulJobsHistoryLimit"], 3);
    assert_eq!(spec["failedJobsHistoryLimit"], 1);
    assert!(spec["jobTemplate"]["spec"].get("backoffLimit").is_none());
    assert_eq!(
        spec["jobTemplate"]["spec"]["template"]["spec"]["schedulerName"],
        "default-scheduler"
    );
}

#[test]
fn other_core_kinds() {
    let secret =
        defaulted(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}));
    assert_eq!(secret["type"], "Opaque");
    let ns = defaulted(json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "team", "labels": {"kubernetes.io/metadata.name": "other"}}}));
    assert_eq!(
        ns["metadata"]["labels"]["kubernetes.io/metadata.name"],
        "team"
    );
    assert_eq!(ns["spec"]["finalizers"], json!(["kubernetes"]));
    let pvc = defaulted(
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "c"},
        "spec": {"resources": {"requests": {"storage": 1073741824}}}}),
    );
    assert_eq!(pvc["spec"]["volumeMode"], "Filesystem");
    assert_eq!(
        pvc["spec"]["resources"]["requests"]["storage"],
        "1073741824"
    );
    let rc = defaulted(
        json!({"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "r"},
        "spec": {"template": {"metadata": {"labels": {"app": "r"}}, "spec": {}}}}),
    );
    assert_eq!(rc["spec"]["selector"], json!({"app": "r"}));
    assert_eq!(rc["metadata"]["labels"], json!({"app": "r"}));
    assert_eq!(rc["spec"]["replicas"], 1);
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
    assert_eq!(
        defaulted(cm.clone()),
        cm,
        "an empty data map is not written out"
    );
}

#[test]
fn network_policy_defaults() {
    let np = defaulted(
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": "n"}, "spec": {"podSelector": {},
            "egress": [{"ports": [{"port": 53}]}]}}),
    );
    assert_eq!(np["spec"]["policyTypes"], json!(["Ingress", "Egress"]));
    assert_eq!(np["spec"]["egress"][0]["ports"][0]["protocol"], "TCP");
}

#[test]
fn unknown_kinds_and_versions_are_untouched() {
    for object in [
        json!({"apiVersion": "example.com/v1", "kind": "Pod", "spec": {}}),
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "s"}}),
        json!({"apiVersion": "v1", "kind": "Pod", "spec": "not a mapping"}),
    ] {
        assert_eq!(defaulted(object.clone()), object);
    }
}

#[test]
fn defaulting_twice_changes_nothing() {
    let once = pod(json!({"containers": [{"name": "c", "image": "nginx",
        "resources": {"limits": {"cpu": "2"}}, "livenessProbe": {"tcpSocket": {"port": 1}}}]}));
    assert_eq!(defaulted(once.clone()), once);
}
