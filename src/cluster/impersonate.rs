//! Writes as a group's ServiceAccount, shared by the controller and
//! `interlock plan`: an impersonating client, the server-side apply of one
//! member (for real or as a dry run), and a group's validation on a thread
//! of its own. Sharing them is what makes `plan`'s answers the controller's.

use crate::cel::interrupt::{self, Interrupt};
use crate::cel::k8s_authz::Authorizer;
use crate::cluster::live::Live;
use crate::cluster::Cluster;
use crate::group::crd::GroupFinding;
use crate::group::crd::FIELD_MANAGER;
use crate::group::member::ScopeOracle;
use crate::group::plan::{owned_by, DesiredObject, GroupRef};
use crate::group::validate::{spec_findings, Writer};
use crate::group::ResourceGroupSpec;
use crate::inventory::{Base, ObjectKey};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::Client;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// A client could not be made for the ServiceAccount.
#[derive(Debug, thiserror::Error)]
#[error("impersonating {user}: {message}")]
pub struct ImpersonationError {
    pub user: String,
    pub message: String,
}

/// A client made from `config` that acts as `writer`'s ServiceAccount.
pub fn client_as(config: &kube::Config, writer: &Writer) -> Result<Client, ImpersonationError> {
    let user = writer.username();
    let mut config = config.clone();
    config.auth_info.impersonate = Some(user.clone());
    // No Impersonate-Group headers: for a ServiceAccount username
    // kube-apiserver adds exactly `writer.groups()` itself
    // (system:serviceaccounts, system:serviceaccounts:NS,
    // system:authenticated). Naming them would need `impersonate` on
    // every namespace's group, which RBAC can only grant as "any
    // group", system:masters included (manifests/base/controller.yaml).
    config.auth_info.impersonate_groups = None;
    Client::try_from(config).map_err(|e| ImpersonationError {
        user,
        message: e.to_string(),
    })
}

/// Server-side apply of one member (field manager `interlock`, forced),
/// through `client`; a dry run writes nothing and returns the object as it
/// would be stored.
pub async fn apply_member(
    client: &Client,
    resource: &ApiResource,
    d: &DesiredObject,
    dry_run: bool,
) -> Result<DynamicObject, kube::Error> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &d.target.namespace, resource);
    let mut params = PatchParams::apply(FIELD_MANAGER).force();
    params.dry_run = dry_run;
    api.patch(&d.target.name, &params, &Patch::Apply(&d.object))
        .await
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
mod tests {
    use super::*;
    use crate::cel::k8s_authz::{Attributes, Decision, UserInfo};
    use crate::cluster::ClusterOptions;
    use crate::fixtures::{compile, ingress, UNIQUE_HOST};
    use crate::inventory::Inventory;
    use std::sync::Mutex;

    const ASKS_THE_AUTHORIZER: &str = "
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: may-create}
spec:
  matchConstraints:
    resourceRules:
      - {apiGroups: [networking.k8s.io], apiVersions: [v1], resources: [ingresses], operations: [CREATE, UPDATE]}
  validations:
    - expression: \"authorizer.requestResource.check('create').allowed()\"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: may-create}
spec: {policyName: may-create, validationActions: [Deny]}
";

    /// Answers yes, and notes whether a writer could take the state's lock
    /// at that moment, in the middle of the group's evaluation.
    struct Probe {
        cluster: Arc<Cluster>,
        lock_free: Mutex<Vec<bool>>,
    }

    impl std::fmt::Debug for Probe {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("Probe")
        }
    }

    impl Authorizer for Probe {
        fn authorize(
            &self,
            _: &UserInfo,
            _: &Attributes,
            _: Option<&crate::cel::interrupt::Interrupt>,
        ) -> Option<Decision> {
            let free = self.cluster.lock_is_free();
            self.lock_free.lock().unwrap().push(free);
            Some(Decision {
                allowed: true,
                reason: String::new(),
                error: None,
            })
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_group_validation_holds_the_state_lock_per_lookup_only() {
        let mut inv = Inventory::new();
        let policies = compile(&[UNIQUE_HOST, ASKS_THE_AUTHORIZER], &mut inv);
        inv.upsert(&ingress("u", "other", "b.example", "s"), None)
            .expect("store");
        let cluster = Arc::new(Cluster::new(policies, inv, ClusterOptions::default()));
        let probe = Arc::new(Probe {
            cluster: cluster.clone(),
            lock_free: Mutex::default(),
        });
        let authorizer: Arc<dyn Authorizer> = probe.clone();
        let group = GroupRef {
            namespace: "t".into(),
            name: "g".into(),
            uid: "u1".into(),
            generation: 1,
            deleting: false,
        };
        let spec: ResourceGroupSpec = serde_json::from_value(serde_json::json!({
            "serviceAccountName": "deployer",
            "resources": [ingress("t", "web", "b.example", "s")],
        }))
        .expect("spec");
        let findings = validate_group(
            &cluster,
            &group,
            &spec,
            Some(&authorizer),
            &[],
            &crate::group::BuiltinScopes,
        )
        .await
        .expect("within the deadline");
        // The inventory was read: the other tenant's host is a conflict.
        assert!(
            findings.iter().any(|f| f.policy == "unique-host"),
            "{findings:?}"
        );
        let seen = probe.lock_free.lock().unwrap().clone();
        assert!(!seen.is_empty(), "the authorizer was asked");
        assert!(
            seen.iter().all(|free| *free),
            "a writer could not get in mid-evaluation: {seen:?}"
        );
    }
}
