//! Kinds that hold a pod template: core/v1 PodTemplate and
//! ReplicationController, apps/v1, batch/v1. Templates get the pod spec's
//! defaults only; what only Pods get (requests from limits,
//! `enableServiceLinks`) happens when the Pods are made.

use super::pod::{pod_spec, pvc_spec};
use super::{child, child_or_new, default_ptr, default_str, each, str_of, Map};
use serde_json::{json, Value as Json};

const TEMPLATE_GENERATION: &str = "deprecated.daemonset.template.generation";

/// `spec.template` of a workload (or whatever holds a `template`): its
/// pod spec's defaults, and an empty `metadata`, which Go writes out.
fn template_spec(holder: &mut Map) {
    let Some(template) = child(holder, "template") else {
        return;
    };
    default_ptr(template, "metadata", json!({}));
    if let Some(spec) = child_or_new(template, "spec") {
        pod_spec(spec);
    }
}

pub(super) fn pod_template(pt: &mut Map) {
    template_spec(pt);
}

pub(super) fn replication_controller(rc: &mut Map) {
    let labels = rc
        .get("spec")
        .and_then(|s| s.pointer("/template/metadata/labels"))
        .filter(|l| l.is_object())
        .cloned();
    if let Some(labels) = labels {
        if let Some(spec) = child_or_new(rc, "spec") {
            if is_empty(spec.get("selector")) {
                spec.insert("selector".into(), labels.clone());
            }
        }
        if let Some(meta) = child_or_new(rc, "metadata") {
            if is_empty(meta.get("labels")) {
                meta.insert("labels".into(), labels);
            }
        }
    }
    let Some(spec) = child_or_new(rc, "spec") else {
        return;
    };
    default_ptr(spec, "replicas", json!(1));
    template_spec(spec);
}

fn is_empty(value: Option<&Json>) -> bool {
    value
        .and_then(Json::as_object)
        .is_none_or(serde_json::Map::is_empty)
}

pub(super) fn deployment(d: &mut Map) {
    let Some(spec) = child_or_new(d, "spec") else {
        return;
    };
    default_ptr(spec, "replicas", json!(1));
    if let Some(strategy) = child_or_new(spec, "strategy") {
        default_str(strategy, "type", "RollingUpdate");
        if str_of(strategy, "type") == "RollingUpdate" {
            if let Some(rolling) = child_or_new(strategy, "rollingUpdate") {
                default_ptr(rolling, "maxUnavailable", json!("25%"));
                default_ptr(rolling, "maxSurge", json!("25%"));
            }
        }
    }
    default_ptr(spec, "revisionHistoryLimit", json!(10));
    default_ptr(spec, "progressDeadlineSeconds", json!(600));
    template_spec(spec);
}

/// Besides the spec's defaults, the template generation the registry
/// starts at (`PrepareForCreate`), which apps/v1 carries as an annotation.
pub(super) fn daemon_set(ds: &mut Map) {
    if let Some(annotations) =
        child_or_new(ds, "metadata").and_then(|m| child_or_new(m, "annotations"))
    {
        let generation = annotations
            .get(TEMPLATE_GENERATION)
            .and_then(Json::as_str)
            .and_then(|g| g.parse::<i64>().ok());
        if generation.is_none_or(|g| g < 1) {
            annotations.insert(TEMPLATE_GENERATION.into(), json!("1"));
        }
    }
    let Some(spec) = child_or_new(ds, "spec") else {
        return;
    };
    if let Some(strategy) = child_or_new(spec, "updateStrategy") {
        default_str(strategy, "type", "RollingUpdate");
        if str_of(strategy, "type") == "RollingUpdate" {
            if let Some(rolling) = child_or_new(strategy, "rollingUpdate") {
                default_ptr(rolling, "maxUnavailable", json!(1));
                default_ptr(rolling, "maxSurge", json!(0));
            }
        }
    }
    default_ptr(spec, "revisionHistoryLimit", json!(10));
    template_spec(spec);
}

pub(super) fn stateful_set(ss: &mut Map) {
    let Some(spec) = child_or_new(ss, "spec") else {
        return;
    };
    default_str(spec, "podManagementPolicy", "OrderedReady");
    if let Some(strategy) = child_or_new(spec, "updateStrategy") {
        if str_of(strategy, "type").is_empty() {
            strategy.insert("type".into(), json!("RollingUpdate"));
            default_ptr(strategy, "rollingUpdate", json!({}));
        }
        if str_of(strategy, "type") == "RollingUpdate" {
            if let Some(rolling) = child(strategy, "rollingUpdate") {
                default_ptr(rolling, "partition", json!(0));
            }
        }
    }
    if let Some(retention) = child_or_new(spec, "persistentVolumeClaimRetentionPolicy") {
        default_str(retention, "whenDeleted", "Retain");
        default_str(retention, "whenScaled", "Retain");
    }
    default_ptr(spec, "replicas", json!(1));
    default_ptr(spec, "revisionHistoryLimit", json!(10));
    template_spec(spec);
    for claim in each(spec, "volumeClaimTemplates") {
        // The apps/v1 conversion writes these into every claim template.
        claim.insert("apiVersion".into(), json!("v1"));
        claim.insert("kind".into(), json!("PersistentVolumeClaim"));
        // SetDefaults_PersistentVolumeClaim: inside spec, so admission sees it.
        if let Some(status) = child_or_new(claim, "status") {
            default_str(status, "phase", "Pending");
        }
        if let Some(claim_spec) = child_or_new(claim, "spec") {
            pvc_spec(claim_spec);
        }
    }
}

pub(super) fn replica_set(rs: &mut Map) {
    let Some(spec) = child_or_new(rs, "spec") else {
        return;
    };
    default_ptr(spec, "replicas", json!(1));
    template_spec(spec);
}

pub(super) fn job(job: &mut Map) {
    let labels = job
        .get("spec")
        .and_then(|s| s.pointer("/template/metadata/labels"))
        .filter(|l| l.is_object())
        .cloned();
    if let (Some(labels), Some(meta)) = (labels, child_or_new(job, "metadata")) {
        if is_empty(meta.get("labels")) {
            meta.insert("labels".into(), labels);
        }
    }
    let Some(spec) = child_or_new(job, "spec") else {
        return;
    };
    if !spec.contains_key("completions") && !spec.contains_key("parallelism") {
        spec.insert("completions".into(), json!(1));
    }
    default_ptr(spec, "parallelism", json!(1));
    let backoff = if spec.contains_key("backoffLimitPerIndex") {
        i64::from(i32::MAX)
    } else {
        6
    };
    default_ptr(spec, "backoffLimit", json!(backoff));
    default_ptr(spec, "completionMode", json!("NonIndexed"));
    default_ptr(spec, "suspend", json!(false));
    let replacement = if spec.contains_key("podFailurePolicy") {
        "Failed"
    } else {
        "TerminatingOrFailed"
    };
    default_ptr(spec, "podReplacementPolicy", json!(replacement));
    default_ptr(spec, "manualSelector", json!(false));
    pod_failure_policy(spec);
    template_spec(spec);
}

/// `onPodConditions[].status` defaults to `True`.
fn pod_failure_policy(job_spec: &mut Map) {
    let Some(policy) = child(job_spec, "podFailurePolicy") else {
        return;
    };
    for rule in each(policy, "rules") {
        for pattern in each(rule, "onPodConditions") {
            default_str(pattern, "status", "True");
        }
    }
}

/// A CronJob's own fields, and its job template's pod failure policy and
/// pod spec; the job template's other fields are defaulted when the Job is
/// made, not in the CronJob.
pub(super) fn cron_job(cj: &mut Map) {
    let Some(spec) = child_or_new(cj, "spec") else {
        return;
    };
    default_str(spec, "concurrencyPolicy", "Allow");
    default_ptr(spec, "suspend", json!(false));
    default_ptr(spec, "successfulJobsHistoryLimit", json!(3));
    default_ptr(spec, "failedJobsHistoryLimit", json!(1));
    let Some(job_template) = child(spec, "jobTemplate") else {
        return;
    };
    default_ptr(job_template, "metadata", json!({}));
    if let Some(job_spec) = child_or_new(job_template, "spec") {
        pod_failure_policy(job_spec);
        template_spec(job_spec);
    }
}
