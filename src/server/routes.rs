//! HTTP routes: admission endpoints, health, readiness and metrics.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::error_handling::HandleErrorLayer;
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{BoxError, Router};
use bytes::Bytes;
use k8s_openapi::api::authentication::v1::UserInfo;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, Operation, META_KIND};
use kube::core::{GroupVersionKind, GroupVersionResource, ObjectMeta, TypeMeta};
use prometheus_client::registry::Registry;
use serde_json::value::RawValue;
use tower::ServiceBuilder;

use super::executor::Executor;
use super::logging::RateLimit;
use super::metrics::{Decision, Endpoint, InFlight, ServerMetrics};
use super::{ParsedReview, Reviewer};
use crate::cel::interrupt::{self, CancelOnDrop, Interrupt};
use std::panic::{catch_unwind, AssertUnwindSafe};

#[derive(Clone)]
pub(crate) struct AppState {
    pub reviewer: Arc<dyn Reviewer>,
    pub metrics: Arc<ServerMetrics>,
    pub registry: Arc<Registry>,
    pub executor: Executor,
    pub max_body_bytes: usize,
    pub shutting_down: Arc<AtomicBool>,
    /// The served certificate: one that is expired or about to be makes
    /// the server unready.
    pub certificate: Arc<super::tls::CertReloader>,
    /// Admission requests being evaluated or waiting for the evaluator.
    pub slots: Arc<tokio::sync::Semaphore>,
}

pub(crate) struct RouterConfig {
    pub request_timeout: Duration,
}

pub(crate) fn router(state: AppState, cfg: &RouterConfig) -> Router {
    // The deadline covers reading the body, waiting for a slot and
    // evaluating; the error handler turns an elapsed deadline into 503. The
    // concurrency limit is a semaphore taken inside the handler (see
    // `admission`): tower's ConcurrencyLimit waits in `poll_ready`, which
    // tower's Timeout does not time.
    let limits = ServiceBuilder::new()
        .layer(HandleErrorLayer::new(deadline_error))
        .timeout(cfg.request_timeout);
    let admission = Router::new()
        .route("/validate", post(validate))
        .route("/mutate", post(mutate))
        .route_layer(limits)
        .route_layer(axum::middleware::from_fn_with_state(state.clone(), measure));
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .merge(admission)
        .with_state(state)
}

/// The outcome of one admission request, carried to [`measure`] as a
/// response extension.
#[derive(Clone, Copy)]
struct Outcome(Decision);

async fn deadline_error(err: BoxError) -> Response {
    if err.is::<tower::timeout::error::Elapsed>() {
        // The evaluation, if it started, stops at its next charge of cost
        // (its interrupt is set as this request's future is dropped) and
        // logs what it was doing; this line covers requests still queued.
        static LIMIT: RateLimit = RateLimit::new();
        if let Some(suppressed) = LIMIT.allow() {
            tracing::warn!(suppressed, "admission request cut by the deadline");
        }
        error_review(
            StatusCode::SERVICE_UNAVAILABLE,
            Decision::Timeout,
            "the admission request did not complete within the server's deadline",
            "Timeout",
        )
    } else {
        error_review(
            StatusCode::INTERNAL_SERVER_ERROR,
            Decision::Error,
            &format!("internal error: {err}"),
            "InternalError",
        )
    }
}

/// Counts every admission request once, with its decision and latency, and
/// keeps the in-flight gauge (also for requests cut by the deadline).
async fn measure(
    State(state): State<AppState>,
    req: Request,
    next: axum::middleware::Next,
) -> Response {
    let endpoint = match (req.method(), req.uri().path()) {
        (&Method::POST, "/validate") => Endpoint::Validate,
        (&Method::POST, "/mutate") => Endpoint::Mutate,
        // 405s and the like are not admission requests.
        _ => return next.run(req).await,
    };
    let start = Instant::now();
    let _guard = InFlight::enter(state.metrics.in_flight());
    let resp = next.run(req).await;
    let decision = match resp.extensions().get::<Outcome>() {
        Some(Outcome(d)) => *d,
        None if resp.status() == StatusCode::PAYLOAD_TOO_LARGE => Decision::TooLarge,
        None if resp.status().is_client_error() => Decision::Invalid,
        None => Decision::Error,
    };
    state
        .metrics
        .observe_request(endpoint, decision, start.elapsed().as_secs_f64());
    resp
}

async fn validate(State(state): State<AppState>, req: Request) -> Response {
    admission(state, Endpoint::Validate, req).await
}

async fn mutate(State(state): State<AppState>, req: Request) -> Response {
    admission(state, Endpoint::Mutate, req).await
}

async fn admission(state: AppState, endpoint: Endpoint, req: Request) -> Response {
    let limit = state.max_body_bytes;
    let too_large = || {
        error_review(
            StatusCode::PAYLOAD_TOO_LARGE,
            Decision::TooLarge,
            &format!("request body larger than {limit} bytes"),
            "RequestEntityTooLarge",
        )
    };
    // Refuse early on a declared length; otherwise stop reading at the limit.
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return too_large();
    }
    let body = match axum::body::to_bytes(req.into_body(), limit).await {
        Ok(b) => b,
        Err(e) => {
            let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&e);
            while let Some(err) = source {
                if err.is::<http_body_util::LengthLimitError>() {
                    return too_large();
                }
                source = err.source();
            }
            return error_review(
                StatusCode::BAD_REQUEST,
                Decision::Invalid,
                &format!("could not read the request body: {e}"),
                "BadRequest",
            );
        }
    };
    // A slot is held until the evaluation ends, even if the deadline drops
    // this future first: the pool never holds more than the limit.
    let Ok(slot) = state.slots.clone().acquire_owned().await else {
        return error_review(
            StatusCode::SERVICE_UNAVAILABLE,
            Decision::Error,
            "the server is shutting down",
            "ServiceUnavailable",
        );
    };
    // Set when this future ends, answered or dropped by the deadline (or
    // with its connection): the evaluation then stops at its next charge
    // of cost instead of running on for an answer nobody reads.
    let interrupt = Interrupt::new();
    let _cancel = CancelOnDrop(interrupt.clone());
    let reviewer = state.reviewer.clone();
    let metrics = state.metrics.clone();
    let lane = super::cost::lane(&body, &*reviewer);
    if lane.heavy {
        metrics.heavy_lane_request();
    }
    match state
        .executor
        .run(lane, move || {
            // The deadline passed while this waited for a thread: no one
            // will read the answer, do not start.
            let answer = (!interrupt.is_cancelled())
                .then(|| review_with(&*reviewer, endpoint, body, &interrupt, Some(&metrics)));
            drop(slot);
            answer
        })
        .await
    {
        Some(Some(answer)) => answer.into_response(),
        Some(None) => error_review(
            StatusCode::SERVICE_UNAVAILABLE,
            Decision::Timeout,
            "the admission request did not complete within the server's deadline",
            "Timeout",
        ),
        None => error_review(
            StatusCode::INTERNAL_SERVER_ERROR,
            Decision::Error,
            "internal error while answering the admission request",
            "InternalError",
        ),
    }
}

/// The request side of an AdmissionReview. kube's
/// `AdmissionRequest<DynamicObject>` flattens the objects' fields, which
/// makes serde buffer each object into an intermediate tree (and the policy
/// engine then serialised it back to JSON). Here `object` is parsed once
/// into JSON, `oldObject` is kept as text until something reads it, and the
/// other fields are read in the same pass into kube's types (a flattened
/// catch-all would buffer them twice more).
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct IncomingReview {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    request: Option<IncomingRequest>,
}

/// `AdmissionRequest`'s fields, types and defaults, but for the objects.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct IncomingRequest {
    uid: String,
    kind: GroupVersionKind,
    resource: GroupVersionResource,
    #[serde(default)]
    sub_resource: Option<String>,
    #[serde(default)]
    request_kind: Option<GroupVersionKind>,
    #[serde(default)]
    request_resource: Option<GroupVersionResource>,
    #[serde(default)]
    request_sub_resource: Option<String>,
    #[serde(default)]
    name: String,
    #[serde(default)]
    namespace: Option<String>,
    operation: Operation,
    user_info: UserInfo,
    #[serde(default)]
    object: Option<serde_json::Value>,
    #[serde(default)]
    old_object: Option<Box<RawValue>>,
    #[serde(default)]
    dry_run: bool,
    #[serde(default)]
    options: Option<RawExtension>,
}

/// Checks that `object` is what kube's parser accepts as a `DynamicObject`:
/// a map whose `metadata`, if present, is an `ObjectMeta`. That is the only
/// way a map can fail to be one: `apiVersion` and `kind` are a flattened
/// `Option<TypeMeta>` (a wrong type makes it `None`, not an error) and the
/// rest of an object is free-form. The metadata is checked where it lies,
/// without copying it (`object_check_matches_kube` holds the two together).
fn check_object(object: &serde_json::Value) -> Result<(), ObjectError> {
    let Some(fields) = object.as_object() else {
        return Err(ObjectError::NotAnObject);
    };
    if let Some(metadata) = fields.get("metadata") {
        <ObjectMeta as serde::Deserialize>::deserialize(metadata).map_err(ObjectError::Metadata)?;
    }
    Ok(())
}

/// Why `request.object` is not what kube's parser accepts.
#[derive(Debug, thiserror::Error)]
enum ObjectError {
    #[error("request.object is not an object")]
    NotAnObject,
    #[error("request.object.metadata: {0}")]
    Metadata(serde_json::Error),
}

/// Why a request body is not an AdmissionReview the server can answer
/// (kube's words where kube's parser would refuse it).
#[derive(Debug, thiserror::Error)]
enum ReviewError {
    #[error("request body is not an admission.k8s.io/v1 AdmissionReview: {0}")]
    Parse(serde_json::Error),
    #[error("request body is not an admission.k8s.io/v1 AdmissionReview: {0}")]
    Object(#[from] ObjectError),
    #[error("expected kind AdmissionReview in admission.k8s.io/v1, got kind {kind:?} apiVersion {api_version:?}")]
    NotAdmissionReview { kind: String, api_version: String },
    #[error("AdmissionReview has no request")]
    NoRequest,
    #[error("request body is not an admission.k8s.io/v1 AdmissionReview: request.oldObject is not an object")]
    OldObjectNotAnObject,
    #[error("request body is not an admission.k8s.io/v1 AdmissionReview: recursion limit exceeded in request.oldObject")]
    OldObjectTooDeep,
}

/// serde_json parses at most 127 levels of nesting (its recursion limit is
/// 128); the review and its request are two of them.
const MAX_OLD_OBJECT_DEPTH: usize = 125;

/// Whether valid JSON text nests maps and lists at most `limit` deep.
fn nests_at_most(json: &str, limit: usize) -> bool {
    // Each level opens with a bracket, so text with no more brackets than
    // the limit (in strings or not) is within it: one vectorised pass that
    // spares a small object the scan.
    let brackets = json.bytes().filter(|b| matches!(b, b'{' | b'[')).count();
    brackets <= limit || nesting_depth(json) <= limit
}

/// The deepest nesting of maps and lists in valid JSON text.
fn nesting_depth(json: &str) -> usize {
    let bytes = json.as_bytes();
    let (mut i, mut depth, mut deepest) = (0, 0usize, 0usize);
    while let Some(&b) = bytes.get(i) {
        i += 1;
        match b {
            // Skip the string: to its closing quote, over escapes.
            b'"' => loop {
                match memchr::memchr2(b'"', b'\\', bytes.get(i..).unwrap_or_default()) {
                    Some(j) if bytes[i + j] == b'\\' => i += j + 2,
                    Some(j) => {
                        i += j + 1;
                        break;
                    }
                    None => return deepest,
                }
            },
            b'{' | b'[' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// Parses an AdmissionReview body: the request without its objects,
/// `object` as JSON, `oldObject` as text.
fn parse_review(body: &[u8]) -> Result<ParsedReview, ReviewError> {
    // Parsed from bytes, serde_json checks every string it reads for UTF-8
    // on its own; one check of the whole body costs less. A body that
    // fails it is parsed from bytes: strings serde_json skips (unknown
    // fields) are not checked, and kube's parser accepts them.
    let parsed: IncomingReview = match std::str::from_utf8(body) {
        Ok(text) => serde_json::from_str(text),
        Err(_) => serde_json::from_slice(body),
    }
    .map_err(ReviewError::Parse)?;
    if parsed.kind != META_KIND || !parsed.api_version.starts_with("admission.k8s.io/") {
        return Err(ReviewError::NotAdmissionReview {
            kind: parsed.kind,
            api_version: parsed.api_version,
        });
    }
    let Some(request) = parsed.request else {
        return Err(ReviewError::NoRequest);
    };
    if let Some(object) = &request.object {
        check_object(object)?;
    }
    // A raw value is valid JSON with no leading whitespace, but nested as
    // deep as it likes: refuse what parsing the body as a tree would.
    if let Some(old) = &request.old_object {
        if !old.get().starts_with('{') {
            return Err(ReviewError::OldObjectNotAnObject);
        }
        if !nests_at_most(old.get(), MAX_OLD_OBJECT_DEPTH) {
            return Err(ReviewError::OldObjectTooDeep);
        }
    }
    let req = AdmissionRequest {
        types: TypeMeta {
            api_version: parsed.api_version,
            kind: parsed.kind,
        },
        uid: request.uid,
        kind: request.kind,
        resource: request.resource,
        sub_resource: request.sub_resource,
        request_kind: request.request_kind,
        request_resource: request.request_resource,
        request_sub_resource: request.request_sub_resource,
        name: request.name,
        namespace: request.namespace,
        operation: request.operation,
        user_info: request.user_info,
        object: None,
        old_object: None,
        dry_run: request.dry_run,
        options: request.options,
    };
    Ok(ParsedReview {
        request: req,
        object: request.object,
        old_object: request.old_object,
    })
}

/// A finished answer: status, JSON body, decision. Built off the async
/// workers; turned into a `Response` on them.
pub(crate) struct Answer {
    pub status: StatusCode,
    pub body: Vec<u8>,
    pub decision: Decision,
}

impl IntoResponse for Answer {
    fn into_response(self) -> Response {
        let mut resp = (self.status, Body::from(self.body)).into_response();
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        resp.extensions_mut().insert(Outcome(self.decision));
        resp
    }
}

/// Parse the body once, ask the reviewer, encode the answer. Never panics on
/// input; a panicking reviewer becomes a 500 carrying the request uid (so the
/// apiserver applies the webhook's failurePolicy).
pub(crate) fn review(reviewer: &dyn Reviewer, endpoint: Endpoint, body: Bytes) -> Answer {
    review_with(reviewer, endpoint, body, &Interrupt::new(), None)
}

/// [`review`] with the reviewer's CEL evaluations under `interrupt`; what
/// they ran into (errors, spent budgets, the deadline) is counted in
/// `metrics` and logged with the request's identity.
fn review_with(
    reviewer: &dyn Reviewer,
    endpoint: Endpoint,
    body: Bytes,
    interrupt: &Arc<Interrupt>,
    metrics: Option<&ServerMetrics>,
) -> Answer {
    let parsed = match parse_review(&body) {
        Ok(p) => p,
        Err(message) => return invalid_answer(StatusCode::BAD_REQUEST, message.to_string()),
    };
    drop(body);
    // What the answer needs once the reviewer has the request.
    let bare = AdmissionResponse::from(&parsed.request);
    let req = &bare;
    let (kind, namespace, name) = (
        parsed.request.kind.kind.clone(),
        parsed.request.namespace.clone().unwrap_or_default(),
        parsed.request.name.clone(),
    );
    let answered = interrupt::scope(interrupt, || {
        catch_unwind(AssertUnwindSafe(|| match endpoint {
            Endpoint::Validate => reviewer.validate_parsed(parsed),
            Endpoint::Mutate => reviewer.mutate_parsed(parsed),
        }))
    });
    let stats = interrupt.stats();
    if stats.expression_errors > 0 {
        if let Some(m) = metrics {
            m.observe_evaluation(&stats);
        }
        if stats.cost_limit_exceeded > 0 || stats.interrupted > 0 {
            // Hostile or runaway expressions: worth a warning, but one
            // client can send thousands a second.
            static LIMIT: RateLimit = RateLimit::new();
            if let Some(suppressed) = LIMIT.allow() {
                tracing::warn!(
                    uid = %req.uid,
                    endpoint = endpoint.as_str(),
                    kind = %kind,
                    namespace = %namespace,
                    name = %name,
                    expression_errors = stats.expression_errors,
                    cost_limit_exceeded = stats.cost_limit_exceeded,
                    deadline_interrupted = stats.interrupted,
                    suppressed,
                    "evaluation stopped by its cost budget or the request deadline"
                );
            }
        } else {
            tracing::debug!(
                uid = %req.uid,
                endpoint = endpoint.as_str(),
                kind = %kind,
                namespace = %namespace,
                name = %name,
                expression_errors = stats.expression_errors,
                "expressions failed"
            );
        }
    }
    let (status, mut resp) = match answered {
        Ok(resp) => (StatusCode::OK, resp),
        Err(_) => {
            tracing::error!(uid = %req.uid, endpoint = endpoint.as_str(), "reviewer panicked");
            let mut resp = bare.clone();
            resp.allowed = false;
            resp.result = kube::core::Status::failure(
                "internal error while evaluating policies",
                "InternalError",
            )
            .with_code(500);
            (StatusCode::INTERNAL_SERVER_ERROR, resp)
        }
    };
    // The answer always carries the request's uid, whatever the reviewer built.
    if resp.uid != req.uid {
        resp.uid.clone_from(&req.uid);
    }
    if endpoint == Endpoint::Validate && resp.patch.is_some() {
        tracing::warn!(uid = %req.uid, "validating answer carried a patch; dropped");
        let mut bare = bare.clone();
        bare.allowed = resp.allowed;
        bare.result = resp.result;
        bare.audit_annotations = resp.audit_annotations;
        bare.warnings = resp.warnings;
        resp = bare;
    }
    let decision = if status != StatusCode::OK {
        Decision::Error
    } else if !resp.allowed {
        Decision::Denied
    } else if resp.patch.is_some() {
        Decision::Patched
    } else {
        Decision::Allowed
    };
    match serde_json::to_vec(&resp.into_review()) {
        Ok(body) => Answer {
            status,
            body,
            decision,
        },
        Err(e) => {
            tracing::error!(uid = %req.uid, error = %e, "could not encode the AdmissionReview answer");
            invalid_answer(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("could not encode the answer: {e}"),
            )
        }
    }
}

fn invalid_answer(status: StatusCode, message: String) -> Answer {
    let decision = if status == StatusCode::BAD_REQUEST {
        Decision::Invalid
    } else {
        Decision::Error
    };
    let mut resp = AdmissionResponse::invalid(message);
    resp.result.code = status.as_u16();
    if status != StatusCode::BAD_REQUEST {
        resp.result.reason = "InternalError".to_owned();
    }
    Answer {
        status,
        body: serde_json::to_vec(&resp.into_review()).unwrap_or_default(),
        decision,
    }
}

fn error_review(status: StatusCode, decision: Decision, message: &str, reason: &str) -> Response {
    let mut resp = AdmissionResponse::invalid(message);
    resp.result.code = status.as_u16();
    reason.clone_into(&mut resp.result.reason);
    Answer {
        status,
        body: serde_json::to_vec(&resp.into_review()).unwrap_or_default(),
        decision,
    }
    .into_response()
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn readyz(State(state): State<AppState>) -> Response {
    if state.shutting_down.load(Ordering::Relaxed) {
        (StatusCode::SERVICE_UNAVAILABLE, "shutting down\n").into_response()
    } else if let Some(problem) = state.certificate.problem() {
        let reason = format!("not ready: the serving certificate {problem}\n");
        (StatusCode::SERVICE_UNAVAILABLE, reason).into_response()
    } else if state.reviewer.ready() {
        (StatusCode::OK, "ok\n").into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready\n").into_response()
    }
}

async fn metrics(State(state): State<AppState>) -> Response {
    let mut out = String::with_capacity(8 * 1024);
    match prometheus_client::encoding::text::encode(&mut out, &state.registry) {
        Ok(()) => (
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            out,
        )
            .into_response(),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("could not encode metrics: {e}\n"),
        )
            .into_response(),
    }
}

#[cfg(test)]
#[path = "routes_tests.rs"]
mod tests;
