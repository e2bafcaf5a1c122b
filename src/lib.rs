//! Interlock: rules that span several Kubernetes objects.
//!
//! One policy engine ([`policy`]) over one CEL dialect ([`cel`]) and one
//! indexed snapshot of cluster state ([`inventory`]), with front-ends for
//! offline checks ([`check`]), admission ([`admission`], [`server`]) and
//! aggregates ([`controller`]).

pub mod cel;
pub mod certs;
pub mod server;
