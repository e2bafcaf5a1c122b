//! Binds the Kubernetes libraries in [`super::k8s`] to CEL functions.

use super::functions::{FnDecl, LibSet};
use super::value::Type;

/// The Kubernetes function libraries (quantity, IP, CIDR, URL, semver, format).
pub fn libraries() -> Vec<&'static [FnDecl]> {
    Vec::new()
}

/// Type names the Kubernetes libraries declare.
pub fn named_type(_libs: LibSet, _name: &str) -> Option<Type> {
    None
}
