//! The ResourceGroup controller: a group of objects validated against every
//! policy and applied as one unit (DESIGN.md, "Aggregate objects").
//!
//! This half is pure: types, the CRD, and the decision of a reconcile
//! ([`plan::plan`]), all without a cluster. The executor (watches,
//! server-side apply, finalizer, status writes) calls it with what its
//! caches hold and carries the plan out.
//!
//! Decisions, and why:
//! - **Level-triggered.** [`plan::plan`] sees the spec, the observed objects
//!   and the policy findings, nothing else; the previous status only keeps
//!   `lastTransitionTime` of unchanged conditions, and `now` is a parameter.
//!   A dropped event or a restart leads to the same plan.
//! - **All or nothing.** Any Deny finding, invalid member, duplicate member,
//!   member outside the group's namespace (or cluster-scoped, or of an
//!   unknown kind) or conflict: nothing is applied and nothing pruned; the
//!   members stay as last applied and the status names every culprit.
//!   Validity (`Valid`) is about the group; a conflict is about the cluster,
//!   so it shows on `Applied` with `Valid` True.
//! - **Ownership is the controller ownerReference by UID.** The part-of
//!   label is how the executor finds members (a label selector on its
//!   watches), but anyone can write a label, so only objects whose
//!   ownerReference names the group's UID are pruned or deleted. An object
//!   at a member's name owned by another group, controlled by anything
//!   else, or labelled for another ApplySet is a conflict, never adopted;
//!   an object nobody claims is taken over by the apply.
//! - **Zero writes when converged.** A member is written only when the
//!   stored object does not hold every field of the desired one
//!   ([`diff::needs_apply`]), so a converged group makes no write, also
//!   after a restart, without a hash or annotation to keep in sync.
//! - **Order.** [`order::rank`]: ServiceAccounts, RBAC, ConfigMaps and
//!   Secrets, PVCs, Services, then workloads, then what refers to them;
//!   reverse for pruning and deletion. Deletion goes one rank at a time.
//! - **Deletion ignores `suspend`.** A deleted group must not be stranded
//!   by its finalizer (the seed's warning); `Orphan` releases members by a
//!   JSON patch with `test` operations, never by an apply (an apply
//!   without the fields would remove them).
//! - **`interlock check`** expands groups offline ([`expand`]): members are
//!   checked as objects of the group's namespace, written by its
//!   ServiceAccount, and join the inventory that lookups see.

pub mod crd;
pub mod diff;
pub mod expand;
pub mod member;
pub mod order;
pub mod plan;
pub mod ready;
pub mod yaml;

pub use crd::{
    applyset_id, DeletionPolicy, ResourceGroup, ResourceGroupSpec, ResourceGroupStatus,
};
pub use diff::needs_apply;
pub use member::{BuiltinScopes, Scope, ScopeOracle};
pub use plan::{plan, Finalize, GroupRef, Plan, PlanInput};
pub use ready::{member_ready, Readiness};

/// The CRDs of the project's kinds as one YAML stream (`interlock crd`,
/// committed as `manifests/base/crd-resourcegroup.yaml`).
pub fn crd_yaml() -> String {
    let mut out = String::new();
    for crd in crd::crds() {
        out.push_str("---\n");
        out.push_str(&yaml::to_yaml(&crd));
    }
    out
}
