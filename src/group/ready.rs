//! Whether a stored member reports ready, from its own status. The group's
//! `Ready` condition is True only when every member is applied and ready.
//!
//! A group's `spec.readyWhen` rules ([`ReadyRules`]) are CEL over `object`,
//! the member as stored: for a kind with a built-in rule they must hold as
//! well, for any other kind they replace the generic rule. A rule that does
//! not compile or fails to evaluate leaves the member not ready with the
//! error as its message: the group waits, it never fails its reconcile.

use super::crd::ReadyWhen;
use crate::cel::{Activation, CompileError, Env, Program, Ty, Value as Cel};
use serde_json::Value;

/// A stored member's readiness.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readiness {
    Ready,
    /// Not yet (or no longer) ready, and why, for the member's message.
    NotReady(String),
}

impl Readiness {
    pub fn is_ready(&self) -> bool {
        matches!(self, Readiness::Ready)
    }
}

/// The per-evaluation cost limit of a readyWhen rule (a policy's).
const COST_LIMIT: u64 = 10_000_000;

/// A group's readyWhen rules, compiled once per reconcile.
#[derive(Debug, Default)]
pub struct ReadyRules {
    rules: Vec<Rule>,
}

#[derive(Debug)]
struct Rule {
    /// The rule's index in `spec.readyWhen`.
    index: usize,
    api_version: Option<String>,
    kind: String,
    program: Result<Program, RuleError>,
}

impl Rule {
    fn applies_to(&self, api_version: &str, kind: &str) -> bool {
        self.kind == kind && self.api_version.as_deref().is_none_or(|v| v == api_version)
    }

    /// `None`: the rule holds; otherwise why the member is not ready.
    fn fails(&self, live: &Value) -> Option<String> {
        let field = format!("spec.readyWhen[{}]", self.index);
        let program = match &self.program {
            Ok(p) => p,
            Err(e) => return Some(format!("{field} does not compile: {e}")),
        };
        let mut act = Activation::new_with_slots(1).with_cost_limit(COST_LIMIT);
        act.set(OBJECT_SLOT, Cel::from_json(live));
        match program.eval(&act) {
            Ok(Cel::Bool(true)) => None,
            Ok(Cel::Bool(false)) => Some(format!("{field} is false: {}", program.source())),
            Ok(other) => Some(format!(
                "{field} gave a {}, not a bool: {}",
                other.type_name(),
                program.source()
            )),
            Err(e) => Some(format!(
                "{field} failed: {}: {}",
                e.message(),
                program.source()
            )),
        }
    }
}

/// The environment of a readyWhen expression: `object` and kube-apiserver's
/// libraries (the Kubernetes dialect, as a ValidatingAdmissionPolicy's).
fn env() -> Env {
    let mut env = Env::kubernetes();
    let slot = env.add_variable("object");
    debug_assert_eq!(slot, OBJECT_SLOT);
    env
}

/// `object`'s slot: the environment's only variable.
const OBJECT_SLOT: usize = 0;

/// Compiles one expression, refusing a result type that is known not to be
/// a bool (`dyn`, from a field of `object`, is checked when evaluated).
pub fn compile_rule(expression: &str) -> Result<Program, RuleError> {
    let checked = env().check_expression(expression)?;
    match checked.static_type() {
        Some(t) if !matches!(t, Ty::Bool | Ty::Dyn | Ty::Unknown) => {
            Err(RuleError::NotBool(t.to_string()))
        }
        _ => Ok(checked.plan()?),
    }
}

/// Why a readyWhen expression does not compile.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RuleError {
    #[error(transparent)]
    Compile(#[from] CompileError),
    #[error("must evaluate to bool but got {0}")]
    NotBool(String),
}

impl ReadyRules {
    pub fn compile(rules: &[ReadyWhen]) -> ReadyRules {
        ReadyRules {
            rules: rules
                .iter()
                .enumerate()
                .map(|(index, r)| Rule {
                    index,
                    api_version: r.api_version.clone().filter(|v| !v.is_empty()),
                    kind: r.kind.clone(),
                    program: compile_rule(&r.expression),
                })
                .collect(),
        }
    }

    /// Each rule that does not compile: (index in `spec.readyWhen`, error).
    pub fn errors(&self) -> impl Iterator<Item = (usize, &RuleError)> {
        self.rules
            .iter()
            .filter_map(|r| r.program.as_ref().err().map(|e| (r.index, e)))
    }

    /// Readiness of a stored member: the built-in rules of its kind, with
    /// the group's rules for the kind in addition (built-in kinds) or
    /// instead of the generic rule (any other kind).
    pub fn readiness(&self, live: &Value) -> Readiness {
        let s = |k: &str| live.get(k).and_then(Value::as_str).unwrap_or("");
        let (api_version, kind) = (s("apiVersion"), s("kind"));
        let mut rules = self
            .rules
            .iter()
            .filter(|r| r.applies_to(api_version, kind))
            .peekable();
        if rules.peek().is_none() {
            return member_ready(live);
        }
        if has_builtin_rule(kind) {
            let builtin = member_ready(live);
            if !builtin.is_ready() {
                return builtin;
            }
        }
        match rules.find_map(|r| r.fails(live)) {
            Some(why) => Readiness::NotReady(why),
            None => Readiness::Ready,
        }
    }
}

/// Kinds [`member_ready`] knows by their status (not the generic rule).
fn has_builtin_rule(kind: &str) -> bool {
    matches!(
        kind,
        "Deployment"
            | "StatefulSet"
            | "DaemonSet"
            | "ReplicaSet"
            | "Job"
            | "PersistentVolumeClaim"
            | "Pod"
            | "Service"
    )
}

/// Readiness of a stored object: workloads by their status (rollout done,
/// replicas available), Jobs complete, PVCs bound, Pods ready, LoadBalancer
/// Services with an address; anything else once it exists, unless its status
/// lags its generation or it has a `Ready` condition that is not True.
pub fn member_ready(live: &Value) -> Readiness {
    if let Some(lag) = generation_lag(live) {
        return Readiness::NotReady(lag);
    }
    let kind = live.get("kind").and_then(Value::as_str).unwrap_or("");
    let status = live.get("status").unwrap_or(&Value::Null);
    match kind {
        "Deployment" => deployment(live, status),
        "StatefulSet" => stateful_set(live, status),
        "DaemonSet" => daemon_set(status),
        "ReplicaSet" => replicas_at_least(status, "availableReplicas", wanted(live)),
        "Job" => job(status),
        "PersistentVolumeClaim" => phase_is(status, "Bound"),
        "Pod" => pod(status),
        "Service" => service(live, status),
        _ => generic(status),
    }
}

/// The status describes an older spec (the controller has not caught up).
fn generation_lag(live: &Value) -> Option<String> {
    let generation = live
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)?;
    let observed = live
        .pointer("/status/observedGeneration")
        .and_then(Value::as_i64);
    match observed {
        Some(o) if o >= generation => None,
        // Kinds without observedGeneration (ConfigMap, Service, ...) are
        // not behind anything.
        None if !expects_observed_generation(live) => None,
        o => Some(format!(
            "status describes generation {} of {generation}",
            o.unwrap_or(0)
        )),
    }
}

fn expects_observed_generation(live: &Value) -> bool {
    matches!(
        live.get("kind").and_then(Value::as_str),
        Some("Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet")
    )
}

/// `spec.replicas`, 1 when unset (the API default).
fn wanted(live: &Value) -> i64 {
    live.pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1)
}

fn count(status: &Value, field: &str) -> i64 {
    status.get(field).and_then(Value::as_i64).unwrap_or(0)
}

fn replicas_at_least(status: &Value, field: &str, want: i64) -> Readiness {
    let have = count(status, field);
    if have >= want {
        Readiness::Ready
    } else {
        Readiness::NotReady(format!("{have} of {want} replicas {}", field_words(field)))
    }
}

fn field_words(field: &str) -> &'static str {
    match field {
        "updatedReplicas" => "updated",
        "readyReplicas" => "ready",
        _ => "available",
    }
}

/// The condition of `type_` in `status.conditions`: its status and message.
fn condition<'a>(status: &'a Value, type_: &str) -> Option<(&'a str, &'a str)> {
    status
        .get("conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(type_))
        .map(|c| {
            let s = c.get("status").and_then(Value::as_str).unwrap_or("");
            let m = c.get("message").and_then(Value::as_str).unwrap_or("");
            (s, m)
        })
}

fn deployment(live: &Value, status: &Value) -> Readiness {
    if let Some(("False", message)) = condition(status, "Progressing") {
        return Readiness::NotReady(format!("rollout stalled: {message}"));
    }
    let want = wanted(live);
    for field in ["updatedReplicas", "availableReplicas"] {
        let r = replicas_at_least(status, field, want);
        if !r.is_ready() {
            return r;
        }
    }
    match condition(status, "Available") {
        Some(("True", _)) => Readiness::Ready,
        _ => Readiness::NotReady("not Available".into()),
    }
}

fn stateful_set(live: &Value, status: &Value) -> Readiness {
    let want = wanted(live);
    let on_delete = live
        .pointer("/spec/updateStrategy/type")
        .and_then(Value::as_str)
        == Some("OnDelete");
    // With OnDelete, Pods update only when someone deletes them: the set is
    // as ready as its Pods.
    let fields: &[&str] = if on_delete {
        &["readyReplicas"]
    } else {
        &["readyReplicas", "updatedReplicas"]
    };
    for field in fields {
        let r = replicas_at_least(status, field, want);
        if !r.is_ready() {
            return r;
        }
    }
    Readiness::Ready
}

fn daemon_set(status: &Value) -> Readiness {
    let want = count(status, "desiredNumberScheduled");
    for field in ["updatedNumberScheduled", "numberAvailable"] {
        let have = count(status, field);
        if have < want {
            return Readiness::NotReady(format!("{have} of {want} nodes {field}"));
        }
    }
    Readiness::Ready
}

fn job(status: &Value) -> Readiness {
    if let Some(("True", message)) = condition(status, "Failed") {
        return Readiness::NotReady(format!("failed: {message}"));
    }
    match condition(status, "Complete") {
        Some(("True", _)) => Readiness::Ready,
        _ => Readiness::NotReady("not Complete".into()),
    }
}

fn phase_is(status: &Value, phase: &str) -> Readiness {
    match status.get("phase").and_then(Value::as_str) {
        Some(p) if p == phase => Readiness::Ready,
        Some(p) => Readiness::NotReady(format!("phase {p}, not {phase}")),
        None => Readiness::NotReady(format!("not {phase}")),
    }
}

fn pod(status: &Value) -> Readiness {
    // A Pod that ran to completion did its job.
    if status.get("phase").and_then(Value::as_str) == Some("Succeeded") {
        return Readiness::Ready;
    }
    match condition(status, "Ready") {
        Some(("True", _)) => Readiness::Ready,
        _ => Readiness::NotReady("not Ready".into()),
    }
}

fn service(live: &Value, status: &Value) -> Readiness {
    if live.pointer("/spec/type").and_then(Value::as_str) != Some("LoadBalancer") {
        return Readiness::Ready;
    }
    let has_address = status
        .pointer("/loadBalancer/ingress")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty());
    if has_address {
        Readiness::Ready
    } else {
        Readiness::NotReady("no load-balancer address yet".into())
    }
}

fn generic(status: &Value) -> Readiness {
    match condition(status, "Ready") {
        Some(("True", _)) | None => Readiness::Ready,
        Some((s, m)) => Readiness::NotReady(format!("Ready is {s}: {m}")),
    }
}

#[cfg(test)]
#[path = "ready_tests.rs"]
mod tests;
