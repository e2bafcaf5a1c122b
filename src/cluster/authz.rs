//! `authorizer...check(verb)` under `serve` and the controller:
//! kube-apiserver's own authorizer, asked with a SubjectAccessReview
//! (authorization.k8s.io/v1) for the admission request's user (username,
//! uid, groups, extra), a ResourceGroup's ServiceAccount, or a service
//! account, as kube-apiserver asks its authorizer for a
//! ValidatingAdmissionPolicy (`apiserver/pkg/cel/library/authz.go`).
//!
//! - **Where it waits.** `check` runs on a thread outside the runtime
//!   (serve's evaluation threads, the controller's validation thread),
//!   never a tokio worker: the call is driven with `Handle::block_on` there, and
//!   stops as soon as the request's interrupt is set (polled every
//!   [`POLL`]), or after [`CALL_TIMEOUT`] when nothing interrupts it.
//!   Asked on a runtime thread, it answers an errored decision instead of
//!   blocking one.
//! - **Answers.** `allowed` is the status's `allowed`, `reason` its
//!   `reason`, `errored`/`error` its `evaluationError`, less the notes the
//!   SubjectAccessReview endpoint adds for a selector it could not parse
//!   (in-process, kube-apiserver's authorizer sees only the parse error,
//!   which RBAC ignores). A call that fails (refused, timed out) is a
//!   decision with the failure as error and `allowed` false, as
//!   kube-apiserver's webhook authorizer reports its own failures.
//! - **Cache.** The same question for the same user within [`CACHE_TTL`]
//!   gets the same answer without a call; at most [`CACHE_CAPACITY`]
//!   answers are kept. Failed calls are not cached.

use crate::cel::interrupt::Interrupt;
use crate::cel::k8s_authz::{Attributes, Authorizer, Decision, UserInfo};
use k8s_openapi::api::authorization::v1::{
    FieldSelectorAttributes, LabelSelectorAttributes, NonResourceAttributes, ResourceAttributes,
    SubjectAccessReview, SubjectAccessReviewSpec, SubjectAccessReviewStatus,
};
use kube::api::{Api, PostParams};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How long an answer is reused: an RBAC change shows within this.
pub const CACHE_TTL: Duration = Duration::from_secs(5);
/// Most answers kept at once.
pub const CACHE_CAPACITY: usize = 4096;
/// The longest one SubjectAccessReview may take when no deadline stops
/// it first.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(2);
/// How often a waiting check looks at its request's interrupt.
const POLL: Duration = Duration::from_millis(5);

/// What the SubjectAccessReview endpoint adds to `evaluationError` for a
/// selector it could not parse (`authorization/util.BuildEvaluationError`).
const SELECTOR_NOTES: [&str; 4] = [
    "spec.resourceAttributes.fieldSelector ignored due to parse error",
    "spec.resourceAttributes.fieldSelector partially ignored due to parse error",
    "spec.resourceAttributes.labelSelector ignored due to parse error",
    "spec.resourceAttributes.labelSelector partially ignored due to parse error",
];

type Question = (UserInfo, Attributes);

/// Answers kept for [`CACHE_TTL`], at most [`CACHE_CAPACITY`].
#[derive(Default)]
struct Cache {
    answers: HashMap<Question, (Instant, Decision)>,
}

impl Cache {
    fn get(&self, q: &Question, now: Instant) -> Option<Decision> {
        let (at, d) = self.answers.get(q)?;
        (now.duration_since(*at) < CACHE_TTL).then(|| d.clone())
    }

    fn put(&mut self, q: Question, d: Decision, now: Instant) {
        if self.answers.len() >= CACHE_CAPACITY && !self.answers.contains_key(&q) {
            self.answers
                .retain(|_, (at, _)| now.duration_since(*at) < CACHE_TTL);
            if self.answers.len() >= CACHE_CAPACITY {
                let oldest = self
                    .answers
                    .iter()
                    .min_by_key(|(_, (at, _))| *at)
                    .map(|(q, _)| q.clone());
                if let Some(oldest) = oldest {
                    self.answers.remove(&oldest);
                }
            }
        }
        self.answers.insert(q, (now, d));
    }
}

/// Checks by answer (`allowed`, `denied`, `error`) and where it came from
/// (`api`, `cache`).
#[derive(Clone, Default)]
pub struct Metrics {
    checks: Family<Vec<(String, String)>, Counter>,
}

impl Metrics {
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "authorizer_checks",
            "authorizer check() calls of CEL expressions by answer (allowed, denied, error) and source (api, cache)",
            self.checks.clone(),
        );
    }

    fn count(&self, d: &Decision, source: &str) {
        let answer = match (d.allowed, &d.error) {
            (true, _) => "allowed",
            (false, None) => "denied",
            (false, Some(_)) => "error",
        };
        self.checks
            .get_or_create(&vec![
                ("answer".into(), answer.into()),
                ("source".into(), source.into()),
            ])
            .inc();
    }
}

/// kube-apiserver's authorizer, asked through SubjectAccessReviews.
pub struct SarAuthorizer {
    api: Api<SubjectAccessReview>,
    runtime: tokio::runtime::Handle,
    cache: Mutex<Cache>,
    metrics: Metrics,
}

impl std::fmt::Debug for SarAuthorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SarAuthorizer")
    }
}

impl SarAuthorizer {
    /// Asks through `client`, on `runtime` (the evaluation threads that
    /// call it are not the runtime's).
    pub fn new(client: kube::Client, runtime: tokio::runtime::Handle) -> Self {
        SarAuthorizer {
            api: Api::all(client),
            runtime,
            cache: Mutex::default(),
            metrics: Metrics::default(),
        }
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The review's status; `None` if `interrupt` was set first.
    fn ask(
        &self,
        review: &SubjectAccessReview,
        interrupt: Option<&Interrupt>,
    ) -> Option<Result<SubjectAccessReviewStatus, AskError>> {
        if tokio::runtime::Handle::try_current().is_ok() {
            return Some(Err(AskError::OnRuntime));
        }
        let post = PostParams::default();
        self.runtime.block_on(async {
            let call = tokio::time::timeout(CALL_TIMEOUT, self.api.create(&post, review));
            tokio::select! {
                r = call => Some(match r {
                    Ok(Ok(sar)) => sar.status.ok_or(AskError::NoStatus),
                    Ok(Err(e)) => Err(call_error(e)),
                    Err(_) => Err(AskError::NoAnswer(CALL_TIMEOUT)),
                }),
                () = stopped(interrupt) => None,
            }
        })
    }
}

/// A failed call in words: the API server's status code and message (a
/// 403 names the missing permission), without the status's debug dump.
fn call_error(e: kube::Error) -> AskError {
    match e {
        kube::Error::Api(s) => AskError::Refused {
            code: s.code,
            message: s.message,
        },
        other => AskError::Call(other),
    }
}

/// Why a SubjectAccessReview gave no decision.
#[derive(Debug, thiserror::Error)]
enum AskError {
    #[error("the authorizer was asked on an async runtime thread, which must not block")]
    OnRuntime,
    #[error("the SubjectAccessReview has no status")]
    NoStatus,
    #[error("SubjectAccessReview refused ({code}): {message}")]
    Refused { code: u16, message: String },
    #[error("SubjectAccessReview: {0}")]
    Call(kube::Error),
    #[error("SubjectAccessReview: no answer within {0:?}")]
    NoAnswer(std::time::Duration),
}

/// Returns once `interrupt` is set; never without one.
async fn stopped(interrupt: Option<&Interrupt>) {
    let Some(i) = interrupt else {
        return std::future::pending().await;
    };
    while !i.is_cancelled() {
        tokio::time::sleep(POLL).await;
    }
}

impl Authorizer for SarAuthorizer {
    fn authorize(
        &self,
        user: &UserInfo,
        attributes: &Attributes,
        interrupt: Option<&Interrupt>,
    ) -> Option<Decision> {
        let question = (user.clone(), attributes.clone());
        let cached = self
            .cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&question, Instant::now());
        if let Some(d) = cached {
            self.metrics.count(&d, "cache");
            return Some(d);
        }
        let d = match self.ask(&review(user, attributes), interrupt)? {
            Ok(status) => {
                let d = decision(status);
                self.cache
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .put(question, d.clone(), Instant::now());
                d
            }
            Err(error) => {
                tracing::warn!(user = %user.username, ?attributes, %error, "authorizer check failed");
                Decision {
                    allowed: false,
                    reason: String::new(),
                    error: Some(error.to_string()),
                }
            }
        };
        tracing::debug!(user = %user.username, ?attributes, allowed = d.allowed, reason = %d.reason, "authorizer check");
        self.metrics.count(&d, "api");
        Some(d)
    }
}

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

/// The SubjectAccessReview kube-apiserver would evaluate in-process: every
/// version (`*`, the endpoint's default for an empty one), selectors as
/// written (the endpoint parses them as the CEL library does).
fn review(user: &UserInfo, attributes: &Attributes) -> SubjectAccessReview {
    let mut spec = SubjectAccessReviewSpec {
        user: non_empty(&user.username),
        uid: non_empty(&user.uid),
        groups: (!user.groups.is_empty()).then(|| user.groups.clone()),
        extra: (!user.extra.is_empty()).then(|| user.extra.clone()),
        ..SubjectAccessReviewSpec::default()
    };
    match attributes {
        Attributes::Path { path, verb } => {
            spec.non_resource_attributes = Some(NonResourceAttributes {
                path: Some(path.clone()),
                verb: Some(verb.clone()),
            })
        }
        Attributes::Resource {
            group,
            resource,
            subresource,
            namespace,
            name,
            verb,
            field_selector,
            label_selector,
        } => {
            spec.resource_attributes = Some(ResourceAttributes {
                group: Some(group.clone()),
                resource: Some(resource.clone()),
                subresource: non_empty(subresource),
                namespace: non_empty(namespace),
                name: non_empty(name),
                verb: Some(verb.clone()),
                version: None,
                field_selector: non_empty(field_selector).map(|raw| FieldSelectorAttributes {
                    raw_selector: Some(raw),
                    requirements: None,
                }),
                label_selector: non_empty(label_selector).map(|raw| LabelSelectorAttributes {
                    raw_selector: Some(raw),
                    requirements: None,
                }),
            })
        }
    }
    SubjectAccessReview {
        spec,
        ..SubjectAccessReview::default()
    }
}

/// The decision kube-apiserver's authorizer gave, read back from the
/// review's status.
fn decision(status: SubjectAccessReviewStatus) -> Decision {
    let error = status.evaluation_error.and_then(|e| {
        let kept: Vec<&str> = e
            .split("; ")
            .filter(|part| !SELECTOR_NOTES.contains(part))
            .collect();
        (!kept.is_empty()).then(|| kept.join("; "))
    });
    Decision {
        allowed: status.allowed,
        reason: status.reason.unwrap_or_default(),
        error,
    }
}

#[cfg(test)]
#[path = "authz_tests.rs"]
mod tests;
