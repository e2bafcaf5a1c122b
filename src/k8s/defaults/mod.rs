//! kube-apiserver's built-in defaulting, offline.
//!
//! kube-apiserver fills in fields an object leaves out (a container's
//! `imagePullPolicy`, a Service's `type`, a Deployment's `strategy`, ...)
//! when it decodes the request, before any admission policy sees it. A
//! policy that reads such a field answers differently on a manifest file
//! than in admission unless the file is defaulted the same way; `check` and
//! `test` call [`apply`] on every object for that reason.
//!
//! The rules follow the `SetDefaults_*` and generated `SetObjectDefaults_*`
//! functions of kube-apiserver 1.36 (pkg/apis/{core,apps,batch,networking}/v1)
//! with that release's default feature gates, plus the two create-time
//! values the registry sets from the object alone (a Service's
//! `ipFamilyPolicy`, a Namespace's `kubernetes` finalizer), which validating
//! admission sees too. Values the registry allocates or takes from the
//! cluster's configuration (a Service's `clusterIP(s)`, `ipFamilies`,
//! `nodePort`s, `healthCheckNodePort`; a Job's generated `selector` and
//! controller-uid labels), what admission plugins add (a Pod's
//! `serviceAccountName`, tolerations, token volume) and `status` are not;
//! docs/usage.md lists what is and is not defaulted.
//!
//! Go also writes out struct-valued fields that are left out (a container's
//! `resources: {}`, a template's `metadata: {}`) and fills in what the
//! v1 conversions derive (a pod spec's deprecated `serviceAccount`, a
//! StatefulSet's claim templates' `apiVersion` and `kind`, a DaemonSet's
//! template-generation annotation); admission sees those too, so they are
//! here as well.
//!
//! Defaulting only adds fields (and drops a Service's `sessionAffinityConfig`
//! when the affinity is `None`, as kube-apiserver does); it never moves an
//! existing value, so source positions of findings stay where they were.

mod pod;
mod workloads;

#[cfg(test)]
mod tests;

use serde_json::{json, Map as JsonMap, Value as Json};

type Map = JsonMap<String, Json>;

/// Defaults `object` in place as kube-apiserver does on create. Kinds and
/// versions without built-in defaults are left as they are; so are fields
/// of the wrong type (kube-apiserver refuses those objects).
pub fn apply(object: &mut Json) {
    let api_version = object
        .get("apiVersion")
        .and_then(Json::as_str)
        .unwrap_or("");
    let kind = object.get("kind").and_then(Json::as_str).unwrap_or("");
    let Some(handler) = handler(api_version, kind) else {
        return;
    };
    if let Some(map) = object.as_object_mut() {
        handler(map);
    }
}

/// Whether [`apply`] changes objects of this kind at all.
pub fn defaults_kind(api_version: &str, kind: &str) -> bool {
    handler(api_version, kind).is_some()
}

fn handler(api_version: &str, kind: &str) -> Option<fn(&mut Map)> {
    Some(match (api_version, kind) {
        ("v1", "Pod") => pod::pod,
        ("v1", "PodTemplate") => workloads::pod_template,
        ("v1", "ReplicationController") => workloads::replication_controller,
        ("v1", "Service") => service,
        ("v1", "Secret") => secret,
        ("v1", "Namespace") => namespace,
        ("v1", "PersistentVolumeClaim") => persistent_volume_claim,
        ("v1", "PersistentVolume") => persistent_volume,
        ("v1", "Endpoints") => endpoints,
        ("v1", "LimitRange") => limit_range,
        ("v1", "ResourceQuota") => resource_quota,
        ("apps/v1", "Deployment") => workloads::deployment,
        ("apps/v1", "StatefulSet") => workloads::stateful_set,
        ("apps/v1", "DaemonSet") => workloads::daemon_set,
        ("apps/v1", "ReplicaSet") => workloads::replica_set,
        ("batch/v1", "Job") => workloads::job,
        ("batch/v1", "CronJob") => workloads::cron_job,
        ("networking.k8s.io/v1", "NetworkPolicy") => network_policy,
        ("networking.k8s.io/v1", "IngressClass") => ingress_class,
        _ => return None,
    })
}

// ---- field helpers: Go's zero values as JSON ----

/// A string field Go defaults when it is `""`: absent or empty.
fn default_str(m: &mut Map, key: &str, value: &str) {
    match m.get(key) {
        None => {}
        Some(Json::String(s)) if s.is_empty() => {}
        Some(_) => return,
    }
    m.insert(key.into(), Json::String(value.into()));
}

/// A pointer field Go defaults when it is nil: absent.
fn default_ptr(m: &mut Map, key: &str, value: Json) {
    if !m.contains_key(key) {
        m.insert(key.into(), value);
    }
}

/// An integer field Go defaults when it is `0`: absent or zero.
fn default_int(m: &mut Map, key: &str, value: i64) {
    match m.get(key) {
        None => {}
        Some(Json::Number(n)) if n.as_f64() == Some(0.0) => {}
        Some(_) => return,
    }
    m.insert(key.into(), json!(value));
}

/// The mapping at `key`, when there is one.
fn child<'a>(m: &'a mut Map, key: &str) -> Option<&'a mut Map> {
    m.get_mut(key).and_then(Json::as_object_mut)
}

/// The mapping at `key`, made empty when absent (a struct, not a pointer,
/// in Go: its defaults apply even when the field is left out).
fn child_or_new<'a>(m: &'a mut Map, key: &str) -> Option<&'a mut Map> {
    m.entry(key)
        .or_insert_with(|| Json::Object(Map::new()))
        .as_object_mut()
}

/// The mappings of the list at `key`.
fn each<'a>(m: &'a mut Map, key: &str) -> impl Iterator<Item = &'a mut Map> {
    m.get_mut(key)
        .and_then(Json::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Json::as_object_mut)
}

fn str_of<'a>(m: &'a Map, key: &str) -> &'a str {
    m.get(key).and_then(Json::as_str).unwrap_or("")
}

fn is_empty_map(m: &Map, key: &str) -> bool {
    m.get(key)
        .and_then(Json::as_object)
        .is_none_or(JsonMap::is_empty)
}

/// `SetDefaults_ResourceList` (rounded up to millis), and the canonical
/// text kube-apiserver writes quantities back in (`1000m` becomes `1`, `0.5` becomes `500m`,
/// a YAML number becomes a string), which is what admission sees.
fn resource_list(m: &mut Map, key: &str) {
    let Some(list) = child(m, key) else { return };
    for value in list.values_mut() {
        let text = match value {
            Json::String(s) => s.clone(),
            Json::Number(n) => n.to_string(),
            _ => continue,
        };
        if let Ok(q) = crate::cel::k8s::quantity::Quantity::parse(text.trim()) {
            *value = Json::String(q.round_up_to_milli().canonical());
        }
    }
}

fn resource_requirements(m: &mut Map, key: &str) {
    if let Some(r) = child(m, key) {
        resource_list(r, "limits");
        resource_list(r, "requests");
    }
}

// ---- core/v1 kinds without pod specs ----

fn service(svc: &mut Map) {
    let Some(spec) = child_or_new(svc, "spec") else {
        return;
    };
    default_str(spec, "sessionAffinity", "None");
    match str_of(spec, "sessionAffinity") {
        "None" => {
            spec.remove("sessionAffinityConfig");
        }
        "ClientIP" => {
            let has_timeout = spec
                .get("sessionAffinityConfig")
                .and_then(|c| c.pointer("/clientIP/timeoutSeconds"))
                .is_some();
            if !has_timeout {
                spec.insert(
                    "sessionAffinityConfig".into(),
                    json!({"clientIP": {"timeoutSeconds": 10800}}),
                );
            }
        }
        _ => {}
    }
    default_str(spec, "type", "ClusterIP");
    for port in each(spec, "ports") {
        default_str(port, "protocol", "TCP");
        let unset = match port.get("targetPort") {
            None => true,
            Some(Json::String(s)) => s.is_empty(),
            Some(Json::Number(n)) => n.as_f64() == Some(0.0),
            Some(_) => false,
        };
        if unset {
            if let Some(p) = port.get("port").cloned() {
                port.insert("targetPort".into(), p);
            }
        }
    }
    let kind = str_of(spec, "type").to_string();
    let external_ips = spec
        .get("externalIPs")
        .and_then(Json::as_array)
        .is_some_and(|a| !a.is_empty());
    let externally_accessible = matches!(kind.as_str(), "LoadBalancer" | "NodePort")
        || (kind == "ClusterIP" && external_ips);
    if externally_accessible {
        default_str(spec, "externalTrafficPolicy", "Cluster");
    }
    if matches!(kind.as_str(), "NodePort" | "LoadBalancer" | "ClusterIP") {
        default_ptr(spec, "internalTrafficPolicy", json!("Cluster"));
    }
    if kind == "LoadBalancer" {
        default_ptr(spec, "allocateLoadBalancerNodePorts", json!(true));
    }
    ip_family_policy(spec, &kind);
}

/// The registry's create-time `ipFamilyPolicy` (pkg/registry/core/service
/// `initIPFamilyFields`): it does not depend on the cluster's families,
/// unlike `ipFamilies`, which is left out.
fn ip_family_policy(spec: &mut Map, kind: &str) {
    if kind == "ExternalName" || spec.contains_key("ipFamilyPolicy") {
        return;
    }
    let headless = str_of(spec, "clusterIP") == "None";
    let policy = if headless && is_empty_map(spec, "selector") {
        "RequireDualStack"
    } else {
        "SingleStack"
    };
    spec.insert("ipFamilyPolicy".into(), json!(policy));
}

fn secret(secret: &mut Map) {
    default_str(secret, "type", "Opaque");
}

/// The name label (`SetDefaults_Namespace`, which overwrites a label of
/// another value), and the `kubernetes` finalizer the registry appends
/// on create (`PrepareForCreate`).
fn namespace(ns: &mut Map) {
    if let Some(meta) = child_or_new(ns, "metadata") {
        let name = str_of(meta, "name").to_string();
        if !name.is_empty() {
            if let Some(labels) = child_or_new(meta, "labels") {
                labels.insert("kubernetes.io/metadata.name".into(), Json::String(name));
            }
        }
    }
    let Some(spec) = child_or_new(ns, "spec") else {
        return;
    };
    let Some(finalizers) = spec
        .entry("finalizers")
        .or_insert_with(|| json!([]))
        .as_array_mut()
    else {
        return;
    };
    if !finalizers.iter().any(|f| f == "kubernetes") {
        finalizers.push(json!("kubernetes"));
    }
}

fn persistent_volume_claim(pvc: &mut Map) {
    if let Some(spec) = child_or_new(pvc, "spec") {
        pod::pvc_spec(spec);
    }
}

fn persistent_volume(pv: &mut Map) {
    let Some(spec) = child_or_new(pv, "spec") else {
        return;
    };
    default_str(spec, "persistentVolumeReclaimPolicy", "Retain");
    default_ptr(spec, "volumeMode", json!("Filesystem"));
    resource_list(spec, "capacity");
    pod::volume_source(spec);
}

fn endpoints(ep: &mut Map) {
    for subset in each(ep, "subsets") {
        for port in each(subset, "ports") {
            default_str(port, "protocol", "TCP");
        }
    }
}

fn limit_range(lr: &mut Map) {
    let Some(spec) = child(lr, "spec") else {
        return;
    };
    for item in each(spec, "limits") {
        if str_of(item, "type") == "Container" {
            copy_missing(item, "max", "default");
            copy_missing(item, "default", "defaultRequest");
            copy_missing(item, "min", "defaultRequest");
        }
        for key in [
            "max",
            "min",
            "default",
            "defaultRequest",
            "maxLimitRequestRatio",
        ] {
            resource_list(item, key);
        }
    }
}

/// The entries of `from` that `to` lacks, copied into `to` (made when
/// absent and there is something to copy; Go leaves an empty map, which
/// is not written out).
fn copy_missing(m: &mut Map, from: &str, to: &str) {
    let Some(source) = m.get(from).and_then(Json::as_object).cloned() else {
        return;
    };
    if source.is_empty() {
        return;
    }
    let Some(target) = child_or_new(m, to) else {
        return;
    };
    for (k, v) in source {
        target.entry(k).or_insert(v);
    }
}

fn resource_quota(rq: &mut Map) {
    if let Some(spec) = child(rq, "spec") {
        resource_list(spec, "hard");
    }
}

// ---- networking.k8s.io/v1 ----

fn network_policy(np: &mut Map) {
    let Some(spec) = child_or_new(np, "spec") else {
        return;
    };
    default_ptr(spec, "podSelector", json!({}));
    let no_types = spec
        .get("policyTypes")
        .and_then(Json::as_array)
        .is_none_or(Vec::is_empty);
    if no_types {
        let egress = spec
            .get("egress")
            .and_then(Json::as_array)
            .is_some_and(|e| !e.is_empty());
        let types = if egress {
            json!(["Ingress", "Egress"])
        } else {
            json!(["Ingress"])
        };
        spec.insert("policyTypes".into(), types);
    }
    for direction in ["ingress", "egress"] {
        for rule in each(spec, direction) {
            for port in each(rule, "ports") {
                default_ptr(port, "protocol", json!("TCP"));
            }
        }
    }
}

fn ingress_class(ic: &mut Map) {
    if let Some(params) = child(ic, "spec").and_then(|s| child(s, "parameters")) {
        default_ptr(params, "scope", json!("Cluster"));
    }
}
