//! Writes as a group's ServiceAccount, shared by the controller and
//! `interlock plan`: requests as a group's ServiceAccount, the server-side
//! apply of one member (for real or as a dry run), and a group's validation on a thread
//! of its own. Sharing them is what makes `plan`'s answers the controller's.

use crate::cel::interrupt::{self, Interrupt};
use crate::cel::k8s_authz::Authorizer;
use crate::cluster::live::Live;
use crate::cluster::Cluster;
use crate::group::crd::GroupFinding;
use crate::group::crd::FIELD_MANAGER;
use crate::group::member::ScopeOracle;
use crate::group::plan::ObjectRef;
use crate::group::plan::{owned_by, DesiredObject, GroupRef};
use crate::group::validate::{spec_findings, Writer};
use crate::group::ResourceGroupSpec;
use crate::inventory::{Base, ObjectKey};
use http::header::{HeaderName, HeaderValue};
use kube::api::{ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, Preconditions};
use kube::{Client, Resource as _};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// A ServiceAccount's username cannot be a header value, or no client
/// could be made to impersonate through.
#[derive(Debug, thiserror::Error)]
#[error("impersonating {user}: {message}")]
pub struct ImpersonationError {
    pub user: String,
    pub message: String,
}

/// Requests through the one client of the controller (or of `plan`), as
/// itself or as a group's ServiceAccount. Impersonation is a header of
/// each request, not a client of its own: every ServiceAccount shares the
/// one connection pool and TLS state, so memory does not grow with the
/// number of namespaces.
#[derive(Clone)]
pub struct As {
    client: Client,
    /// The Impersonate-User header's value; `None`: as the client itself.
    user: Option<HeaderValue>,
}

impl As {
    /// As the client's own identity.
    pub fn itself(client: Client) -> As {
        As { client, user: None }
    }

    /// As `writer`'s ServiceAccount. Only the Impersonate-User header:
    /// for a ServiceAccount username kube-apiserver adds exactly
    /// `writer.groups()` itself (system:serviceaccounts,
    /// system:serviceaccounts:NS, system:authenticated). Naming them would
    /// need `impersonate` on every namespace's group, which RBAC can only
    /// grant as "any group", system:masters included
    /// (manifests/base/controller.yaml).
    pub fn writer(client: Client, writer: &Writer) -> Result<As, ImpersonationError> {
        let user = writer.username();
        let value = HeaderValue::from_str(&user).map_err(|e| ImpersonationError {
            user: user.clone(),
            message: e.to_string(),
        })?;
        Ok(As {
            client,
            user: Some(value),
        })
    }

    /// Server-side apply of one member (field manager `interlock`,
    /// forced); a dry run writes nothing and returns the object as it
    /// would be stored.
    pub async fn apply_member(
        &self,
        resource: &ApiResource,
        d: &DesiredObject,
        dry_run: bool,
    ) -> Result<DynamicObject, kube::Error> {
        let mut params = PatchParams::apply(FIELD_MANAGER).force();
        params.dry_run = dry_run;
        let req = request(resource, &d.target.namespace)
            .patch(&d.target.name, &params, &Patch::Apply(&d.object))
            .map_err(kube::Error::BuildRequest)?;
        self.client.request(self.sign(req, "patch")).await
    }

    /// Deletes `t` only while it is the object of its UID (a new object of
    /// the same name is never deleted by mistake); one already gone is
    /// deleted.
    pub async fn delete(
        &self,
        resource: &ApiResource,
        t: &ObjectRef,
        mut dp: DeleteParams,
    ) -> Result<(), kube::Error> {
        dp.preconditions = t.uid.clone().map(|uid| Preconditions {
            uid: Some(uid),
            resource_version: None,
        });
        let req = request(resource, &t.namespace)
            .delete(&t.name, &dp)
            .map_err(kube::Error::BuildRequest)?;
        match self.client.request_text(self.sign(req, "delete")).await {
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            r => r.map(drop),
        }
    }

    /// `req` with the impersonation header, and the verb kube's tracing
    /// names its span by (as `Api` sets it).
    fn sign(&self, mut req: http::Request<Vec<u8>>, verb: &'static str) -> http::Request<Vec<u8>> {
        if let Some(user) = &self.user {
            req.headers_mut().insert(IMPERSONATE_USER, user.clone());
        }
        req.extensions_mut().insert(verb);
        req
    }
}

/// The client to impersonate through: `client` itself, unless `config`
/// impersonates someone already (kubeconfig `as`, `as-group`): its headers
/// would then ride along with a ServiceAccount's, so a client of the same
/// credentials without them, made once.
pub fn impersonator(config: &kube::Config, client: &Client) -> Result<Client, ImpersonationError> {
    let a = &config.auth_info;
    if a.impersonate.is_none()
        && a.impersonate_groups.is_none()
        && a.impersonate_uid.is_none()
        && a.impersonate_user_extra.is_none()
    {
        return Ok(client.clone());
    }
    let mut config = config.clone();
    config.auth_info.impersonate = None;
    config.auth_info.impersonate_groups = None;
    config.auth_info.impersonate_uid = None;
    config.auth_info.impersonate_user_extra = None;
    Client::try_from(config).map_err(|e| ImpersonationError {
        user: a.impersonate.clone().unwrap_or_default(),
        message: e.to_string(),
    })
}

const IMPERSONATE_USER: HeaderName = HeaderName::from_static("impersonate-user");

fn request(resource: &ApiResource, namespace: &str) -> kube::core::Request {
    kube::core::Request::new(DynamicObject::url_path(resource, Some(namespace)))
}

/// Sets `interrupt` once `after` has passed (unless the task is aborted).
pub fn cancel_after(interrupt: &Arc<Interrupt>, after: Duration) -> tokio::task::JoinHandle<()> {
    let interrupt = interrupt.clone();
    tokio::spawn(async move {
        tokio::time::sleep(after).await;
        interrupt.cancel();
    })
}

/// Runs `f` under `deadline` on a thread outside the runtime, with the
/// caller's span (the group) on its logs. Evaluation and the state's
/// blocking lock stay off the async workers, and the authorizer's reviews
/// may block there: it refuses to on a thread of the runtime (workers and
/// blocking pool alike). Needs a multi-threaded runtime.
pub fn off_runtime<T: Send>(deadline: &Arc<Interrupt>, f: impl FnOnce() -> T + Send) -> T {
    let span = tracing::Span::current();
    tokio::task::block_in_place(|| {
        std::thread::scope(|s| {
            s.spawn(|| {
                let _group = span.enter();
                interrupt::scope(deadline, f)
            })
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        })
    })
}

/// The longest one validation of a group may take, authorizer reviews
/// included (each at most `cluster::authz::CALL_TIMEOUT`).
pub const VALIDATION_DEADLINE: Duration = Duration::from_secs(10);

/// A group's desired members judged as writes by its ServiceAccount
/// ([`spec_findings`]) on a thread outside the runtime, within
/// [`VALIDATION_DEADLINE`]. The inventory is read through
/// [`Live`], the read lock taken per lookup as admission does, so a big
/// group's validation never holds up the watches and admitted writes that
/// wait for the write lock (nor, behind them, every other reader). `observed` are the objects the
/// caller found of the group; those it owns are the members replaced.
/// `None` when the deadline cut it short: some evaluations then stopped
/// with an error that a policy under failurePolicy Ignore would skip, so
/// there is no verdict to act on.
pub async fn validate_group(
    cluster: &Cluster,
    group: &GroupRef,
    spec: &ResourceGroupSpec,
    authorizer: Option<&Arc<dyn Authorizer>>,
    observed: &[Value],
    scopes: &(dyn ScopeOracle + Sync),
) -> Option<Vec<GroupFinding>> {
    let current: Vec<ObjectKey> = observed
        .iter()
        .filter(|o| owned_by(o, &group.uid))
        .filter_map(ObjectKey::of)
        .collect();
    let deadline = Interrupt::new();
    let timer = cancel_after(&deadline, VALIDATION_DEADLINE);
    let found = off_runtime(&deadline, || {
        // The policies and the projection their overlay must share, read
        // together; the objects, one lookup at a time.
        cluster.expire_pending();
        let (published, shell) = cluster.read(|st| (cluster.published(), st.inventory.shell()));
        let live = Live::new(cluster);
        let base = Base {
            lookup: &live,
            shell,
        };
        let ns = &group.namespace;
        spec_findings(
            &published.policies,
            base,
            ns,
            spec,
            authorizer,
            &current,
            scopes,
            false,
        )
    });
    timer.abort();
    (!deadline.is_cancelled()).then_some(found)
}

#[cfg(test)]
#[path = "impersonate_tests.rs"]
mod tests;
