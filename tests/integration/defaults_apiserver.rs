//! Interlock's offline defaulting (`k8s::defaults`) against the real
//! kube-apiserver: objects of every defaulted kind, in many shapes, are
//! created with kubectl; what the server returns (the stored object) must
//! equal Interlock's defaulting of the same input, field for field, once
//! the fields the server owns or allocates are set aside. The test cluster
//! runs no controllers that write these objects, so what is stored is what
//! defaulting (and the registry) made.

use crate::support;
use serde_json::{json, Value as Json};

const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fn container(name: &str, image: &str) -> Json {
    json!({"name": name, "image": image})
}

fn pods() -> Vec<Json> {
    let probes = json!({"name": "app", "image": "nginx:1.27",
        "ports": [{"containerPort": 80}, {"containerPort": 53, "protocol": "UDP", "name": "dns"}],
        "resources": {"limits": {"cpu": "1000m", "memory": "1Gi"}},
        "livenessProbe": {"httpGet": {"port": 80}},
        "readinessProbe": {"tcpSocket": {"port": 80}, "periodSeconds": 5},
        "startupProbe": {"exec": {"command": ["true"]}, "failureThreshold": 30},
        "lifecycle": {"preStop": {"httpGet": {"port": 80, "path": "/quit"}}},
        "env": [{"name": "NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "PLAIN", "value": "x"}]});
    let init = json!({"name": "init", "image": "busybox",
        "resources": {"limits": {"cpu": 1, "memory": "128Mi"}, "requests": {"cpu": "100m"}}});
    let sidecar = json!({"name": "sidecar", "image": "busybox:latest", "restartPolicy": "Always"});
    let volumes = json!([
        {"name": "scratch"},
        {"name": "secret", "secret": {"secretName": "s"}},
        {"name": "config", "configMap": {"name": "c", "defaultMode": 256}},
        {"name": "downward", "downwardAPI": {"items": [
            {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}}]}},
        {"name": "projected", "projected": {"sources": [
            {"serviceAccountToken": {"path": "token"}},
            {"configMap": {"name": "c"}},
            {"downwardAPI": {"items": [{"path": "ns", "fieldRef": {"fieldPath": "metadata.namespace"}}]}}]}},
        {"name": "host", "hostPath": {"path": "/tmp"}},
        {"name": "claim", "ephemeral": {"volumeClaimTemplate": {"spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "0.5Gi"}}}}}},
        {"name": "image", "image": {"reference": "quay.io/team/data"}}]);
    vec![
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "minimal"},
            "spec": {"containers": [container("c", "nginx")]}}),
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probes"},
            "spec": {"containers": [probes], "initContainers": [init, sidecar]}}),
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "volumes"},
            "spec": {"restartPolicy": "Never", "serviceAccountName": "robot", "volumes": volumes,
                "containers": [container("c", &format!("nginx@{DIGEST}"))]}}),
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "host-network"},
            "spec": {"hostNetwork": true, "dnsPolicy": "Default", "terminationGracePeriodSeconds": 5,
                "containers": [{"name": "c", "image": format!("registry.example.com:5000/team/app:latest@{DIGEST}"),
                    "ports": [{"containerPort": 8080}],
                    "readinessProbe": {"grpc": {"port": 9000}}}]}}),
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "images"},
            "spec": {"enableServiceLinks": false, "containers": [
                {"name": "a", "image": "localhost:5000/app",
                    "resources": {"limits": {"cpu": "100u", "memory": "1.5Gi"}}},
                container("b", "Example/App:1"),
                container("c", "docker.io/library/nginx:latest"),
                {"name": "d", "image": "nginx", "imagePullPolicy": "Never",
                    "resources": {"limits": {"memory": 1073741824, "cpu": "0.5"},
                        "requests": {"memory": "512Mi"}}}]}}),
    ]
}

fn template(labels: Json, spec: Json) -> Json {
    json!({"metadata": {"labels": labels}, "spec": spec})
}

fn workloads() -> Vec<Json> {
    let app = |name: &str| json!({"app": name});
    let spec = |image: &str| {
        json!({"containers": [{"name": "c", "image": image,
            "resources": {"limits": {"cpu": "2"}}, "ports": [{"containerPort": 80}],
            "livenessProbe": {"httpGet": {"port": 80}}}],
            "volumes": [{"name": "v"}, {"name": "s", "secret": {"secretName": "s"}}]})
    };
    let job_spec =
        |image: &str| json!({"restartPolicy": "Never", "containers": [container("c", image)]});
    vec![
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "minimal"},
            "spec": {"selector": {"matchLabels": app("d1")}, "template": template(app("d1"), spec("nginx"))}}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "recreate"},
            "spec": {"replicas": 0, "strategy": {"type": "Recreate"}, "revisionHistoryLimit": 2,
                "selector": {"matchLabels": app("d2")}, "template": template(app("d2"), spec("nginx:1"))}}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "surge"},
            "spec": {"strategy": {"rollingUpdate": {"maxSurge": 1}},
                "selector": {"matchLabels": app("d3")}, "template": template(app("d3"), spec("nginx"))}}),
        json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "minimal"},
            "spec": {"serviceName": "s", "selector": {"matchLabels": app("s1")},
                "template": template(app("s1"), spec("redis:7")),
                "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
                    "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1024Mi"}}}}]}}),
        json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "on-delete"},
            "spec": {"serviceName": "s", "podManagementPolicy": "Parallel",
                "updateStrategy": {"type": "OnDelete"},
                "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Delete"},
                "selector": {"matchLabels": app("s2")}, "template": template(app("s2"), spec("redis"))}}),
        json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "rolling"},
            "spec": {"serviceName": "s", "updateStrategy": {"type": "RollingUpdate"},
                "selector": {"matchLabels": app("s3")}, "template": template(app("s3"), spec("redis"))}}),
        json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "minimal"},
            "spec": {"selector": {"matchLabels": app("ds1")}, "template": template(app("ds1"), spec("fluentd"))}}),
        json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "on-delete"},
            "spec": {"updateStrategy": {"type": "OnDelete"},
                "selector": {"matchLabels": app("ds2")}, "template": template(app("ds2"), spec("fluentd"))}}),
        json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "minimal"},
            "spec": {"selector": {"matchLabels": app("rs1")}, "template": template(app("rs1"), spec("nginx"))}}),
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "minimal"},
            "spec": {"template": template(app("j1"), job_spec("busybox"))}}),
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "parallel", "labels": {"own": "x"}},
            "spec": {"parallelism": 3, "template": template(app("j2"), job_spec("busybox:1"))}}),
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "indexed"},
            "spec": {"completions": 3, "completionMode": "Indexed", "backoffLimitPerIndex": 1,
                "podFailurePolicy": {"rules": [{"action": "Ignore",
                    "onPodConditions": [{"type": "DisruptionTarget"}]}]},
                "template": template(app("j3"), job_spec("busybox"))}}),
        json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "minimal"},
            "spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {
                "template": template(app("cj1"), job_spec("busybox"))}}}}),
        json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "forbid"},
            "spec": {"schedule": "0 * * * *", "concurrencyPolicy": "Forbid", "suspend": true,
                "jobTemplate": {"spec": {"backoffLimit": 2, "template": template(app("cj2"), job_spec("busybox:1"))}}}}),
        json!({"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "minimal"},
            "spec": {"template": template(app("rc1"), spec("nginx"))}}),
        json!({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "minimal"},
            "template": template(app("pt1"), spec("nginx"))}),
    ]
}

fn services() -> Vec<Json> {
    let port = json!([{"port": 80}]);
    vec![
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "cluster-ip"},
            "spec": {"selector": {"app": "a"}, "ports": [{"port": 80, "name": "http"}, {"port": 53, "protocol": "UDP", "targetPort": "dns", "name": "dns"}]}}),
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "node-port"},
            "spec": {"type": "NodePort", "sessionAffinity": "ClientIP", "selector": {"app": "a"}, "ports": port}}),
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "load-balancer"},
            "spec": {"type": "LoadBalancer", "selector": {"app": "a"}, "ports": [{"port": 443, "targetPort": 8443}]}}),
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "headless"},
            "spec": {"clusterIP": "None", "selector": {"app": "a"}, "ports": port}}),
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "headless-no-selector"},
            "spec": {"clusterIP": "None", "ports": port}}),
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "external-name"},
            "spec": {"type": "ExternalName", "externalName": "example.com"}}),
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "external-ips"},
            "spec": {"externalIPs": ["192.0.2.10"], "sessionAffinity": "None",
                "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 60}}, "ports": port}}),
    ]
}

fn others(prefix: &str) -> Vec<Json> {
    vec![
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "empty"}}),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "data"}, "data": {"a": "b"}}),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "untyped"}, "data": {"a": "Yg=="}}),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "typed"},
            "type": "kubernetes.io/basic-auth", "data": {"username": "Yg=="}}),
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "robot"}}),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": format!("{prefix}-extra"),
            "labels": {"team": "a"}}}),
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "claim"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1G"}}}}),
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "block"},
            "spec": {"accessModes": ["ReadWriteOnce"], "volumeMode": "Block",
                "resources": {"requests": {"storage": 2147483648_u64}}}}),
        json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": format!("{prefix}-pv")},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/data"}}}),
        json!({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "limits"},
            "spec": {"limits": [{"type": "Container", "max": {"cpu": "2000m", "memory": "1Gi"}, "min": {"cpu": "10m"}}]}}),
        json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "quota"},
            "spec": {"hard": {"requests.cpu": "1000m", "pods": 10}}}),
        json!({"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "endpoints"},
            "subsets": [{"addresses": [{"ip": "192.0.2.1"}], "ports": [{"port": 80}]}]}),
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "ingress"},
            "spec": {"podSelector": {}, "ingress": [{"ports": [{"port": 80}]}]}}),
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "egress"},
            "spec": {"podSelector": {"matchLabels": {"app": "a"}},
                "egress": [{"ports": [{"port": 53, "protocol": "UDP"}, {"port": 443}]}]}}),
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "web"},
            "spec": {"rules": [{"host": "a.example.com", "http": {"paths": [{"path": "/", "pathType": "Prefix",
                "backend": {"service": {"name": "s", "port": {"number": 80}}}}]}}]}}),
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass", "metadata": {"name": format!("{prefix}-class")},
            "spec": {"controller": "example.com/ingress", "parameters": {"apiGroup": "example.com", "kind": "Params", "name": "p"}}}),
    ]
}

const CLUSTER_SCOPED: [&str; 3] = ["Namespace", "PersistentVolume", "IngressClass"];

/// What the server owns or takes from elsewhere than defaulting: metadata
/// it writes, status, allocated addresses and ports, a Job's generated
/// selector, what admission plugins add (Priority, DefaultTolerationSeconds,
/// StorageObjectInUseProtection's finalizers).
fn server_owned(object: &mut Json) {
    let kind = object["kind"].as_str().unwrap_or_default().to_string();
    if let Some(meta) = object["metadata"].as_object_mut() {
        for key in [
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "managedFields",
            "generation",
        ] {
            meta.remove(key);
        }
        if matches!(kind.as_str(), "PersistentVolumeClaim" | "PersistentVolume") {
            meta.remove("finalizers");
        }
    }
    if let Some(o) = object.as_object_mut() {
        o.remove("status");
    }
    let Some(spec) = object.get_mut("spec").and_then(Json::as_object_mut) else {
        return;
    };
    match kind.as_str() {
        "Service" => {
            for key in [
                "clusterIP",
                "clusterIPs",
                "ipFamilies",
                "healthCheckNodePort",
            ] {
                spec.remove(key);
            }
            let ports = spec.get_mut("ports").and_then(Json::as_array_mut);
            for port in ports.into_iter().flatten().filter_map(Json::as_object_mut) {
                port.remove("nodePort");
            }
        }
        "Pod" => {
            for key in ["tolerations", "priority", "preemptionPolicy"] {
                spec.remove(key);
            }
        }
        "Job" => {
            spec.remove("selector");
            let generated = |k: &String| k.contains("controller-uid") || k.contains("job-name");
            for pointer in ["/spec/template/metadata/labels", "/metadata/labels"] {
                if let Some(labels) = object.pointer_mut(pointer).and_then(Json::as_object_mut) {
                    labels.retain(|k, _| !generated(k));
                }
            }
        }
        _ => {}
    }
}

/// The first differences between `ours` and `theirs`, as `pointer: ours
/// vs theirs`.
fn differences(ours: &Json, theirs: &Json, at: &str, out: &mut Vec<String>) {
    match (ours, theirs) {
        (Json::Object(a), Json::Object(b)) => {
            for k in a.keys().chain(b.keys().filter(|k| !a.contains_key(*k))) {
                let path = format!("{at}/{k}");
                match (a.get(k), b.get(k)) {
                    (Some(x), Some(y)) => differences(x, y, &path, out),
                    (x, y) => out.push(format!("{path}: interlock {x:?} vs apiserver {y:?}")),
                }
            }
        }
        (Json::Array(a), Json::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                differences(x, y, &format!("{at}/{i}"), out);
            }
        }
        (a, b) if a != b => out.push(format!("{at}: interlock {a} vs apiserver {b}")),
        _ => {}
    }
}

#[test]
fn defaulting_matches_what_kube_apiserver_stores() {
    let cluster = support::cluster::TestCluster::shared();
    let _logs = cluster.logs_on_panic();
    let ns = cluster.create_namespace("defaults");
    let mut inputs: Vec<Json> = [pods(), workloads(), services(), others(&ns)].concat();
    for object in &mut inputs {
        if !CLUSTER_SCOPED.contains(&object["kind"].as_str().unwrap_or_default()) {
            object["metadata"]["namespace"] = json!(ns);
        }
    }
    let list = json!({"apiVersion": "v1", "kind": "List", "items": inputs});
    let out = cluster.kubectl_stdin(&["create", "-o", "json", "-f", "-"], &list.to_string());
    assert!(
        out.status.success(),
        "kubectl create: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // One JSON document per created object, in input order.
    let stored: Vec<Json> = serde_json::Deserializer::from_slice(&out.stdout)
        .into_iter::<Json>()
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| panic!("kubectl create -o json: {e}"));
    assert_eq!(stored.len(), inputs.len(), "one created object per input");
    let mut disagreements = Vec::new();
    for (input, stored) in inputs.iter().zip(stored) {
        let mut ours = input.clone();
        interlock::k8s::defaults::apply(&mut ours);
        server_owned(&mut ours);
        let mut theirs = stored.clone();
        server_owned(&mut theirs);
        let name = format!("{} {}", input["kind"], input["metadata"]["name"]);
        let mut found = Vec::new();
        differences(&ours, &theirs, "", &mut found);
        disagreements.extend(found.into_iter().map(|d| format!("{name} {d}")));
    }
    for kind in CLUSTER_SCOPED {
        let name = match kind {
            "Namespace" => format!("{ns}-extra"),
            "PersistentVolume" => format!("{ns}-pv"),
            _ => format!("{ns}-class"),
        };
        cluster.kubectl(&["delete", &kind.to_lowercase(), &name, "--wait=false"]);
    }
    cluster.kubectl(&["delete", "namespace", &ns, "--wait=false"]);
    assert!(
        disagreements.is_empty(),
        "{} disagreements with kube-apiserver:\n{}",
        disagreements.len(),
        disagreements.join("\n")
    );
}
