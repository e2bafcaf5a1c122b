//! `interlock controller`: the executor of ResourceGroups. It reconciles
//! each group level-triggered, from (spec, what the caches hold) only: the
//! group is validated as a whole against the shared cluster state
//! ([`crate::group::validate`]), planned by the pure
//! [`crate::group::plan::plan`], and the plan is carried out by server-side
//! apply as the group's ServiceAccount.
//!
//! Decisions, and why:
//! - **kube-runtime's `Controller`**, with the members' watches feeding it
//!   through `reconcile_on`: member kinds are only known from the groups'
//!   specs, so their caches start on demand ([`members`]), one watch per
//!   kind, filtered by the ApplySet part-of label.
//! - **Reads from caches, by index.** Observed members come from those
//!   caches, through an index by group ([`index`]: the part-of label, the
//!   ownerReferences' UIDs) and a lookup per listed member, so a pass costs
//!   O(its members), never O(the namespace); no group is decided before the
//!   caches of its kinds have synced, nor before the policies' inventory
//!   has. An object at a member's name that the cache lacks (not
//!   labelled: new, or someone else's) is assumed new and not read: its
//!   server-side dry run, which every write has anyway, says whether an
//!   object is there (a resourceVersion) and only then is the pass decided
//!   again with one GET of it, which decides "conflict" versus "take over".
//!   The label filter is what keeps the caches to the groups' own objects
//!   (an unfiltered cache would hold and follow every ConfigMap, Secret and
//!   Service in the cluster).
//! - **Writes as the group's ServiceAccount** (impersonation), so a group
//!   can create only what its ServiceAccount may. Status is written as the
//!   controller, through the status subresource, only when it changed.
//! - **Backoff per group**: exponential from 1 s, capped at 5 min, with
//!   jitter, reset on success; a permanently broken group is retried at the
//!   cap, never in a hot loop. Reconciles are bounded (`--concurrency`).
//! - **Leader election** on a Lease ([`lease`]): a replica reconciles only
//!   while its term lasts; when it ends (the API server unreachable, or
//!   another replica holds the lease) the reconciles stop and the replica
//!   campaigns again, so an outage longer than the lease needs no restart.
//! - **Shards** ([`shards`], `--shards K`): the groups split by a hash of
//!   their namespace, each shard owned by a Lease of its own through the
//!   same elector; a replica reconciles the groups of the shards it holds,
//!   each pass under its shard's term. One shard (the leader does all) is
//!   the default.
//! - **Prerequisites first** ([`crate::cluster::prereq`]): unready, and no
//!   campaign, until the CRD, the namespace and the permissions are there.
//! - **The authorizer.** Policies' `authorizer...check()` on members asks
//!   kube-apiserver about the group's ServiceAccount (the user of the
//!   impersonated writes). A review without an answer (failed, cut by the
//!   validation's 10 s deadline, or an authorizer's evaluation error)
//!   leaves the group invalid with reason `AuthorizerUnavailable` and fails
//!   the pass, so it is retried with the backoff above: an answer may come
//!   later, and applying on a non-answer could write what RBAC forbids
//!   the group. A denied check is a policy verdict, like any other.

pub mod error;
pub mod index;
/// The Lease moved to `cluster/` (serve campaigns for the policy-status Lease too).
pub use crate::cluster::lease;
pub mod members;
pub mod metrics;
pub mod quota;
pub mod reconcile;
pub mod run;
pub mod shards;
pub mod stored;
pub mod written;
