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

#[test]
fn an_openshift_service_annotation_makes_its_serving_certificate() {
    let svc = json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "console", "namespace": "plugin",
                     "annotations": {"service.beta.openshift.io/serving-cert-secret-name": "plugin-serving-cert"}}});
    let made = made_by(&svc);
    assert_eq!(names(&made), ["Secret plugin/plugin-serving-cert"]);
    assert_eq!(
        made[0]["metadata"]["annotations"][PRODUCED_BY],
        "Service plugin/console"
    );
    let plain = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "a"}});
    assert!(made_by(&plain).is_empty());
}

#[test]
fn secret_references_of_every_pod_spec_place() {
    let d = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"template": {"spec": {
            "imagePullSecrets": [{"name": "pull"}],
            "volumes": [{"name": "a", "secret": {"secretName": "vol"}},
                        {"name": "b", "projected": {"sources": [{"secret": {"name": "proj"}}, {"configMap": {"name": "cm"}}]}},
                        {"name": "c", "configMap": {"name": "cm"}}],
            "initContainers": [{"name": "i", "envFrom": [{"secretRef": {"name": "from"}}, {"configMapRef": {"name": "cm"}}]}],
            "containers": [{"name": "c", "env": [{"name": "P", "valueFrom": {"secretKeyRef": {"name": "key", "key": "k"}}},
                                                 {"name": "Q", "value": "x"}]}]}}}});
    assert_eq!(
        secret_references(&d),
        ["from", "key", "proj", "pull", "vol"]
    );
    let cron = json!({"kind": "CronJob", "spec": {"jobTemplate": {"spec": {"template": {"spec": {
        "volumes": [{"name": "a", "secret": {"secretName": "nightly"}}]}}}}}});
    assert_eq!(secret_references(&cron), ["nightly"]);
}

/// Flux's HelmRelease and Kustomization install into their own namespace
/// or spec.targetNamespace; an Argo CD Application into
/// spec.destination.namespace.
#[test]
fn releases_and_applications_install_what_the_files_do_not_show() {
    let release = json!({"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
        "metadata": {"name": "dns", "namespace": "flux-system"},
        "spec": {"targetNamespace": "network"}});
    assert_eq!(unshown_in(&release, "default"), ["flux-system", "network"]);
    let bare = json!({"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
        "metadata": {"name": "dns"}});
    assert_eq!(unshown_in(&bare, "apps"), ["apps"]);
    let app = json!({"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
        "metadata": {"name": "web", "namespace": "argocd"},
        "spec": {"destination": {"namespace": "shop"}}});
    assert_eq!(unshown_in(&app, "default"), ["shop"]);
    // A Flux Kustomization applies a source's path after substitutions,
    // into its namespace or its targetNamespace.
    let ks = json!({"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
        "metadata": {"name": "external-secrets", "namespace": "external-secrets"},
        "spec": {"path": "./apps/base/external-secrets"}});
    assert_eq!(unshown_in(&ks, "default"), ["external-secrets"]);
    let config = json!({"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "metadata": {"name": "k"}});
    assert!(unshown_in(&config, "default").is_empty());
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "d", "namespace": "a"}});
    assert!(unshown_in(&deployment, "default").is_empty());
}

/// RBAC's documented limit: `create` cannot be restricted by
/// resourceNames, so a Role that writes named Secrets grants create
/// on all of them and names them in its other rules.
#[test]
fn a_role_that_may_create_secrets_makes_the_secrets_it_names() {
    let role = |rules: Json| {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
               "metadata": {"name": "redis", "namespace": "argocd"}, "rules": rules})
    };
    let writes = role(json!([
        {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["argocd-redis"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
        {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["not-a-secret"], "verbs": ["get"]}
    ]));
    let made = made_by(&writes);
    assert_eq!(names(&made), ["Secret argocd/argocd-redis"]);
    assert_eq!(
        made[0]["metadata"]["annotations"][PRODUCED_BY],
        "Role argocd/redis"
    );
    // Reading named Secrets without create makes nothing.
    let reads = role(json!([
        {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["argocd-redis"], "verbs": ["get", "update"]}
    ]));
    assert!(made_by(&reads).is_empty());
    // Create with no names: which Secrets is unknown.
    let anonymous = role(json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["*"]}]));
    assert!(made_by(&anonymous).is_empty());
    // Another group's `secrets` resource is not the core kind.
    let other = role(json!([
        {"apiGroups": ["example.com"], "resources": ["secrets"], "resourceNames": ["x"], "verbs": ["create", "get"]}
    ]));
    assert!(made_by(&other).is_empty());
}

/// A controller told by flag or environment which Secret or ConfigMap
/// to write (the issue's examples: `--secret-name=foo`,
/// `WEBHOOK_SECRET_NAME`, a memberlist Secret `--ml-secret-name`).
#[test]
fn workloads_make_what_their_flags_and_environment_name() {
    let d = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "controller", "namespace": "lb"},
        "spec": {"template": {"spec": {"containers": [{"name": "c",
            "args": ["--ml-secret-name=memberlist", "--webhook-secret", "webhook-cert",
                     "--config-map-name=lb-config", "--port=7472",
                     "--secret-name=$(SECRET)", "--tls-secret=ns/other", "--secret-name="],
            "env": [{"name": "WEBHOOK_SECRET_NAME", "value": "webhook-server-cert"},
                    {"name": "LEADER_CONFIGMAP_NAME", "value": "leader"},
                    {"name": "SECRET_KEY", "value": "not-a-name-variable"},
                    {"name": "POD_NAME", "value": "not-a-secret"},
                    {"name": "OTHER_SECRET_NAME",
                     "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]}]}}}});
    let made = made_by(&d);
    assert_eq!(
        names(&made),
        [
            "ConfigMap lb/lb-config",
            "ConfigMap lb/leader",
            "Secret lb/memberlist",
            "Secret lb/webhook-cert",
            "Secret lb/webhook-server-cert"
        ]
    );
    assert_eq!(
        made[0]["metadata"]["annotations"][PRODUCED_BY],
        "Deployment lb/controller"
    );
    // Only workloads: a ConfigMap's data is not a container's flags.
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
        "spec": {"containers": [{"args": ["--secret-name=x"]}]}});
    assert!(made_by(&cm).is_empty());
    // A CronJob's containers are under its job template.
    let cron = json!({"apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": {"name": "rotate", "namespace": "a"},
        "spec": {"jobTemplate": {"spec": {"template": {"spec": {"containers": [
            {"name": "r", "args": ["--secret-name", "rotated"]}]}}}}}});
    assert_eq!(names(&made_by(&cron)), ["Secret a/rotated"]);
}
