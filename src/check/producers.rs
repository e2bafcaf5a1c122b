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

use crate::check::json_at::JsonAt;
use serde_json::{json, Map, Value as Json};

/// The annotation that names the producer of a made object.
pub const PRODUCED_BY: &str = "interlock.dev/produced-by";

/// What `object` will make: each a minimal object with the fields the
/// bundled policies read.
pub fn made_by(object: &Json) -> Vec<Json> {
    let s = |p: &str| object.at(p).and_then(Json::as_str).unwrap_or("");
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
    let mut made = made_by_kind(object, group, kind, name, &secret, &meta);
    // Controllers that write the Secret or ConfigMap their own flags or
    // environment name (`--secret-name=foo`, WEBHOOK_SECRET_NAME=foo).
    if is_workload(group, kind) {
        for (made_kind, made_name) in named_by_flags(object) {
            let m =
                json!({"apiVersion": "v1", "kind": made_kind, "metadata": meta(&made_name, None)});
            if !made.contains(&m) {
                made.push(m);
            }
        }
    }
    made
}

/// The namespaces where `object` installs objects that are fetched from
/// elsewhere, so the files cannot show them: a Flux HelmRelease's chart
/// (its namespace, and `spec.targetNamespace`), a Flux Kustomization's
/// path (the same two: it applies a source's path after substitutions,
/// often HelmReleases of its own, home-ops style) and an Argo CD
/// Application's source (`spec.destination.namespace`). A HelmRelease
/// without a namespace is in `default_ns` (kubectl's, `-n`): kube's kinds
/// table does not know the custom kind to put it there itself.
pub fn unshown_in(object: &Json, default_ns: &str) -> Vec<String> {
    let s = |p: &str| object.at(p).and_then(Json::as_str).unwrap_or("");
    let group = s("/apiVersion").rsplit_once('/').map_or("", |(g, _)| g);
    let places: &[&str] = match (group, s("/kind")) {
        ("helm.toolkit.fluxcd.io", "HelmRelease")
        | ("kustomize.toolkit.fluxcd.io", "Kustomization") => {
            &["/metadata/namespace", "/spec/targetNamespace"]
        }
        ("argoproj.io", "Application") => &["/spec/destination/namespace"],
        _ => &[],
    };
    let mut out: Vec<String> = places
        .iter()
        .map(|p| match s(p) {
            "" if *p == "/metadata/namespace" => default_ns,
            ns => ns,
        })
        .filter(|ns| !ns.is_empty())
        .map(str::to_string)
        .collect();
    out.dedup();
    out
}

/// The Secrets a pod spec of `object` names: volumes (and projected
/// sources), `env[].valueFrom.secretKeyRef`, `envFrom[].secretRef` of
/// every container, init container and ephemeral container, and
/// `imagePullSecrets`.
pub fn secret_references(object: &Json) -> Vec<String> {
    // Borrowed all the way down: this runs on every object checked.
    let name = |v: Option<&Json>| {
        v.and_then(Json::as_str)
            .filter(|n| !n.is_empty())
            .map(str::to_string)
    };
    let specs = [object.get("spec"), object.at("/template/spec")]
        .into_iter()
        .chain(
            crate::k8s::pod_template::TEMPLATE_PATHS
                .iter()
                .map(|p| object.at(p).and_then(|t| t.get("spec"))),
        )
        .flatten();
    let mut out = Vec::new();
    for spec in specs {
        for v in list(spec, "volumes") {
            out.extend(name(v.at("/secret/secretName")));
            for source in v
                .at("/projected/sources")
                .and_then(Json::as_array)
                .into_iter()
                .flatten()
            {
                out.extend(name(source.at("/secret/name")));
            }
        }
        for p in list(spec, "imagePullSecrets") {
            out.extend(name(p.get("name")));
        }
        for c in ["containers", "initContainers", "ephemeralContainers"]
            .iter()
            .flat_map(|k| list(spec, k))
        {
            for e in list(c, "env") {
                out.extend(name(e.at("/valueFrom/secretKeyRef/name")));
            }
            for e in list(c, "envFrom") {
                out.extend(name(e.at("/secretRef/name")));
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The list at `v[key]`, or none.
fn list<'v>(v: &'v Json, key: &str) -> &'v [Json] {
    v.get(key)
        .and_then(Json::as_array)
        .map_or(&[], Vec::as_slice)
}

/// The kinds that run pods from a template of their own.
fn is_workload(group: &str, kind: &str) -> bool {
    matches!(
        (group, kind),
        ("", "Pod" | "ReplicationController")
            | (
                "apps",
                "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet"
            )
            | ("batch", "Job" | "CronJob")
    )
}

/// What the known producers among `object`'s kinds make.
fn made_by_kind(
    object: &Json,
    group: &str,
    kind: &str,
    name: &str,
    secret: &dyn Fn(&str) -> Json,
    meta: &dyn Fn(&str, Option<Json>) -> Json,
) -> Vec<Json> {
    let s = |p: &str| object.at(p).and_then(Json::as_str).unwrap_or("");
    let ns = s("/metadata/namespace");
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
            if let Some(Json::Object(extra)) = object.at("/spec/podMetadata/labels") {
                labels.extend(extra.clone());
            }
            let replicas = object
                .at("/spec/replicas")
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
        // A Role that lets its subject create Secrets and names the
        // Secrets it may read or rewrite belongs to whatever writes them
        // in place: an init container that generates a password, a
        // certificate Job. RBAC cannot limit `create` by name, so the
        // names come from the Role's other rules on secrets.
        ("rbac.authorization.k8s.io", "Role") => secrets_a_role_writes(object)
            .into_iter()
            .map(|made| secret(&made))
            .collect(),
        // OpenShift's service-ca operator writes a serving certificate into
        // the Secret a Service's annotation names (OpenShift docs,
        // "Securing service traffic using service serving certificate
        // secrets"; the alpha annotation is the older spelling).
        ("", "Service") => [
            "service.beta.openshift.io/serving-cert-secret-name",
            "service.alpha.openshift.io/serving-cert-secret-name",
        ]
        .iter()
        .filter_map(|a| object.at(&format!("/metadata/annotations/{}", a.replace('/', "~1"))))
        .filter_map(Json::as_str)
        .filter(|n| !n.is_empty())
        .map(secret)
        .collect(),
        // One claim per template and replica: <template>-<set>-<ordinal>.
        // (A StatefulSet is also a workload: see `named_by_flags` below.)
        ("apps", "StatefulSet") => {
            let replicas = object
                .at("/spec/replicas")
                .and_then(Json::as_i64)
                .unwrap_or(1)
                .clamp(0, 100);
            let templates = object
                .at("/spec/volumeClaimTemplates")
                .and_then(Json::as_array)
                .map(Vec::as_slice)
                .unwrap_or_default();
            templates
                .iter()
                .filter_map(|t| t.at("/metadata/name").and_then(Json::as_str))
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

/// The Secrets and ConfigMaps a workload's containers name in their own
/// configuration: a flag `--NAME=VALUE` (or `--NAME VALUE`) whose NAME
/// says `secret` or `configmap`/`config-map`, and an environment variable
/// whose name says SECRET or CONFIGMAP/CONFIG_MAP and ends in NAME
/// (`WEBHOOK_SECRET_NAME`, `ML_SECRET_NAME`). A controller is told this
/// way which object to write (a webhook certificate, a memberlist key)
/// or read; either way the workload was installed with that object in
/// mind, so it is taken as made there, in the workload's namespace. The
/// value must be a plain object name (no `$(VAR)`, no `/`).
fn named_by_flags(object: &Json) -> Vec<(&'static str, String)> {
    let kind_of = |word: &str| -> Option<&'static str> {
        let w = word.to_ascii_lowercase().replace('_', "-");
        if w.contains("configmap") || w.contains("config-map") {
            Some("ConfigMap")
        } else if w.contains("secret") {
            Some("Secret")
        } else {
            None
        }
    };
    let is_name = |v: &str| {
        !v.is_empty()
            && v.len() <= 253
            && v.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
            && v.as_bytes()[0].is_ascii_alphanumeric()
    };
    let mut out = Vec::new();
    let specs = [
        "/spec",
        "/spec/template/spec",
        "/spec/jobTemplate/spec/template/spec",
    ];
    let containers = specs.iter().flat_map(|p| {
        ["containers", "initContainers"]
            .into_iter()
            .flat_map(move |c| {
                object
                    .at(&format!("{p}/{c}"))
                    .and_then(Json::as_array)
                    .map(Vec::as_slice)
                    .unwrap_or_default()
            })
    });
    for c in containers {
        let words: Vec<&str> = ["command", "args"]
            .into_iter()
            .filter_map(|f| c.get(f).and_then(Json::as_array))
            .flatten()
            .filter_map(Json::as_str)
            .collect();
        for (i, w) in words.iter().enumerate() {
            let Some(flag) = w.strip_prefix("--").or_else(|| w.strip_prefix('-')) else {
                continue;
            };
            let (flag, value) = match flag.split_once('=') {
                Some((f, v)) => (f, Some(v).filter(|v| !v.is_empty())),
                None => (
                    flag,
                    words.get(i + 1).copied().filter(|v| !v.starts_with('-')),
                ),
            };
            if let (Some(kind), Some(v)) = (kind_of(flag), value) {
                if is_name(v) {
                    out.push((kind, v.to_string()));
                }
            }
        }
        let env = c.get("env").and_then(Json::as_array);
        for e in env.into_iter().flatten() {
            let (Some(n), Some(v)) = (
                e.get("name").and_then(Json::as_str),
                e.get("value").and_then(Json::as_str),
            ) else {
                continue;
            };
            let ends_in_name = n.len() >= 4
                && n.is_char_boundary(n.len() - 4)
                && n[n.len() - 4..].eq_ignore_ascii_case("NAME");
            if ends_in_name && is_name(v) {
                if let Some(kind) = kind_of(n) {
                    out.push((kind, v.to_string()));
                }
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The Secrets a Role may create, by name: when one of its rules allows
/// `create` on core `secrets`, the `resourceNames` of its rules on
/// secrets.
fn secrets_a_role_writes(role: &Json) -> Vec<String> {
    let rules = role
        .get("rules")
        .and_then(Json::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let has = |rule: &Json, field: &str, want: &[&str]| {
        rule.get(field)
            .and_then(Json::as_array)
            .is_some_and(|v| v.iter().filter_map(Json::as_str).any(|x| want.contains(&x)))
    };
    let on_secrets =
        |r: &Json| has(r, "apiGroups", &["", "*"]) && has(r, "resources", &["secrets", "*"]);
    if !rules
        .iter()
        .any(|r| on_secrets(r) && has(r, "verbs", &["create", "*"]))
    {
        return vec![];
    }
    let mut out: Vec<String> = rules
        .iter()
        .filter(|r| on_secrets(r))
        .filter_map(|r| r.get("resourceNames").and_then(Json::as_array))
        .flatten()
        .filter_map(Json::as_str)
        .map(str::to_string)
        .collect();
    out.sort();
    out.dedup();
    out
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
        job.at(&format!("/spec/template/spec/{c}"))
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
#[path = "producers_tests.rs"]
mod tests;
