//! Objects that other objects will make, known offline.
//!
//! In a cluster, cert-manager makes the Secret a Certificate names, the
//! Prometheus operator makes a StatefulSet per Prometheus, the StatefulSet
//! controller makes a PersistentVolumeClaim per claim template and replica.
//! None of these is in the manifests, yet a Pod may mount the Secret and a
//! PodDisruptionBudget may select the operator's pods. `interlock check`
//! adds what these producers will make to the inventory (where no object
//! of that name is given), so that lookups find it; the made objects are
//! not themselves checked, and carry the annotation
//! `interlock.dev/produced-by: Kind namespace/name`.

use serde_json::{json, Map, Value as Json};

/// The annotation that names the producer of a made object.
pub const PRODUCED_BY: &str = "interlock.dev/produced-by";

/// What `object` will make: each a minimal object with the fields the
/// bundled policies read.
pub fn made_by(object: &Json) -> Vec<Json> {
    let s = |p: &str| object.pointer(p).and_then(Json::as_str).unwrap_or("");
    let (api_version, kind, name, ns) = (
        s("/apiVersion"),
        s("/kind"),
        s("/metadata/name"),
        s("/metadata/namespace"),
    );
    if name.is_empty() {
        return vec![];
    }
    let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
    let producer = if ns.is_empty() {
        format!("{kind} {name}")
    } else {
        format!("{kind} {ns}/{name}")
    };
    let meta = |made: &str, labels: Option<Json>| {
        let mut m = json!({"name": made, "namespace": ns,
                           "annotations": {PRODUCED_BY: producer}});
        if let Some(l) = labels {
            m["labels"] = l;
        }
        m
    };
    let secret =
        |made: &str| json!({"apiVersion": "v1", "kind": "Secret", "metadata": meta(made, None)});
    match (group, kind) {
        ("cert-manager.io", "Certificate") => {
            let made = s("/spec/secretName");
            if made.is_empty() {
                vec![]
            } else {
                vec![secret(made)]
            }
        }
        ("bitnami.com", "SealedSecret") => {
            let made = match s("/spec/template/metadata/name") {
                "" => name,
                n => n,
            };
            vec![secret(made)]
        }
        ("external-secrets.io", "ExternalSecret") => {
            let made = match s("/spec/target/name") {
                "" => name,
                n => n,
            };
            vec![secret(made)]
        }
        // The Prometheus operator's StatefulSets: its own labels, and the
        // pod labels the resource asks for (podMetadata).
        ("monitoring.coreos.com", "Prometheus" | "Alertmanager") => {
            let app = kind.to_ascii_lowercase();
            let mut labels = Map::new();
            for (k, v) in [
                ("app.kubernetes.io/name", app.as_str()),
                ("app.kubernetes.io/managed-by", "prometheus-operator"),
                ("app.kubernetes.io/instance", name),
                (app.as_str(), name),
            ] {
                labels.insert(k.into(), v.into());
            }
            if let Some(Json::Object(extra)) = object.pointer("/spec/podMetadata/labels") {
                labels.extend(extra.clone());
            }
            let replicas = object
                .pointer("/spec/replicas")
                .and_then(Json::as_i64)
                .unwrap_or(1);
            vec![json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
                        "metadata": meta(&format!("{app}-{name}"), None),
                        "spec": {"replicas": replicas,
                                 "template": {"metadata": {"labels": labels}}}})]
        }
        // Install Jobs that make Secrets (webhook certificates, initial
        // passwords): what they make is in their own words, a
        // `--secret-name=NAME` argument or their name
        // (`argocd-redis-secret-init` makes `argocd-redis`). Every name the
        // Job mentions is taken as a Secret it may make; a heuristic, and a
        // missing Secret that such a Job mentions is no longer reported.
        ("batch", "Job") => job_secret_names(object, name)
            .into_iter()
            .map(|made| secret(&made))
            .collect(),
        // One claim per template and replica: <template>-<set>-<ordinal>.
        ("apps", "StatefulSet") => {
            let replicas = object
                .pointer("/spec/replicas")
                .and_then(Json::as_i64)
                .unwrap_or(1)
                .clamp(0, 100);
            let templates = object
                .pointer("/spec/volumeClaimTemplates")
                .and_then(Json::as_array)
                .map(Vec::as_slice)
                .unwrap_or_default();
            templates
                .iter()
                .filter_map(|t| t.pointer("/metadata/name").and_then(Json::as_str))
                .flat_map(|t| {
                    (0..replicas).map(move |i| {
                        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                               "metadata": {"name": format!("{t}-{name}-{i}"), "namespace": ns,
                                            "annotations": {PRODUCED_BY: format!("StatefulSet {ns}/{name}")}}})
                    })
                })
                .collect()
        }
        _ => vec![],
    }
}

/// The names a Job mentions: the leading parts of its own name (at `-`),
/// and the name-like words of its containers' command, args and env values.
fn job_secret_names(job: &Json, name: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let parts: Vec<&str> = name.split('-').collect();
    for n in 2..=parts.len() {
        out.push(parts[..n].join("-"));
    }
    let containers = ["containers", "initContainers"].into_iter().flat_map(|c| {
        job.pointer(&format!("/spec/template/spec/{c}"))
            .and_then(Json::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default()
    });
    for c in containers {
        let words = ["command", "args"]
            .into_iter()
            .filter_map(|f| c.get(f).and_then(Json::as_array))
            .flatten()
            .chain(
                c.get("env")
                    .and_then(Json::as_array)
                    .map(Vec::as_slice)
                    .unwrap_or_default()
                    .iter()
                    .filter_map(|e| e.get("value")),
            )
            .filter_map(Json::as_str);
        for text in words {
            out.extend(
                text.split(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '-' || ch == '.'))
                    .filter(|w| w.len() >= 3 && w.contains('-') && !w.starts_with('-'))
                    .map(str::to_string),
            );
        }
    }
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(made: &[Json]) -> Vec<String> {
        made.iter()
            .map(|m| {
                format!(
                    "{} {}/{}",
                    m["kind"].as_str().unwrap_or(""),
                    m["metadata"]["namespace"].as_str().unwrap_or(""),
                    m["metadata"]["name"].as_str().unwrap_or("")
                )
            })
            .collect()
    }

    #[test]
    fn known_producers() {
        let cert = json!({"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
            "metadata": {"name": "web", "namespace": "a"}, "spec": {"secretName": "web-tls"}});
        let made = made_by(&cert);
        assert_eq!(names(&made), ["Secret a/web-tls"]);
        assert_eq!(
            made[0]["metadata"]["annotations"][PRODUCED_BY],
            "Certificate a/web"
        );
        let sealed = json!({"apiVersion": "bitnami.com/v1alpha1", "kind": "SealedSecret",
            "metadata": {"name": "db", "namespace": "a"}});
        assert_eq!(names(&made_by(&sealed)), ["Secret a/db"]);
        let external = json!({"apiVersion": "external-secrets.io/v1beta1", "kind": "ExternalSecret",
            "metadata": {"name": "x", "namespace": "a"}, "spec": {"target": {"name": "y"}}});
        assert_eq!(names(&made_by(&external)), ["Secret a/y"]);
        let prom = json!({"apiVersion": "monitoring.coreos.com/v1", "kind": "Prometheus",
            "metadata": {"name": "k8s", "namespace": "monitoring"},
            "spec": {"replicas": 2, "podMetadata": {"labels": {"app.kubernetes.io/part-of": "kube-prometheus"}}}});
        let made = made_by(&prom);
        assert_eq!(names(&made), ["StatefulSet monitoring/prometheus-k8s"]);
        let labels = &made[0]["spec"]["template"]["metadata"]["labels"];
        assert_eq!(labels["app.kubernetes.io/name"], "prometheus");
        assert_eq!(labels["app.kubernetes.io/part-of"], "kube-prometheus");
        assert_eq!(made[0]["spec"]["replicas"], 2);
        let sts = json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "db", "namespace": "a"},
            "spec": {"replicas": 2, "volumeClaimTemplates": [{"metadata": {"name": "data"}}]}});
        assert_eq!(
            names(&made_by(&sts)),
            [
                "PersistentVolumeClaim a/data-db-0",
                "PersistentVolumeClaim a/data-db-1"
            ]
        );
        let certgen = json!({"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "admission-create", "namespace": "ing"},
            "spec": {"template": {"spec": {"containers": [{"name": "create",
                "args": ["create", "--secret-name=ingress-nginx-admission", "--namespace=$(POD_NAMESPACE)"]}]}}}});
        assert_eq!(
            names(&made_by(&certgen)),
            [
                "Secret ing/admission-create",
                "Secret ing/ingress-nginx-admission"
            ]
        );
        let init = json!({"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "argocd-redis-secret-init", "namespace": "argocd"},
            "spec": {"template": {"spec": {"containers": [{"name": "i", "command": ["argocd", "admin"]}]}}}});
        assert!(names(&made_by(&init)).contains(&"Secret argocd/argocd-redis".to_string()));
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
        assert!(made_by(&cm).is_empty());
    }
}
