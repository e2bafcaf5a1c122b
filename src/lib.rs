//! Interlock: rules that span several Kubernetes objects.
//!
//! One policy engine ([`policy`]) over one CEL dialect ([`cel`]) and one
//! indexed snapshot of cluster state ([`inventory`]), with front-ends for
//! offline checks ([`check`]) and the admission webhook ([`admission`],
//! [`server`]), and the ResourceGroup controller ([`controller`]).

#![forbid(unsafe_code)]

pub mod admission;
pub mod audit;
pub mod bundled;
pub mod cel;
pub mod certs;
pub mod check;
pub mod cli;
pub mod cluster;
pub mod controller;
pub mod eval;
#[cfg(test)]
mod fixtures;
pub mod group;
pub mod inventory;
pub mod k8s;
pub mod manifest;
pub mod plan;
pub mod policy;
pub mod report;
pub mod server;
/// The one deterministic generator of the unit tests' property and fuzz
/// tests, shared with the integration tests.
#[cfg(test)]
#[path = "../tests/support/rng.rs"]
mod test_rng;
pub mod unstick;
pub mod webhook_config;

/// The version and the commit it was built from, as `interlock --version`
/// prints it: `0.1.0 (1a2b3c4d5e6f)`, or `(unknown)` when built outside a
/// git checkout without `INTERLOCK_GIT_COMMIT` (build.rs).
pub const VERSION: &str = env!("INTERLOCK_VERSION");

/// The short git commit of [`VERSION`], or `unknown`.
pub const GIT_COMMIT: &str = env!("INTERLOCK_GIT_COMMIT");
