//! Pure-Rust cores of the Kubernetes CEL libraries (kube-apiserver v1.36,
//! `k8s.io/apiserver/pkg/cel/library` and the apimachinery code they call).
//!
//! Nothing here depends on the CEL value type: each module is a plain API with
//! its own error enum whose `Display` text is the message kube-apiserver
//! produces, so the bindings can surface it unchanged.

pub mod format;
pub mod net;
pub mod quantity;
pub mod regex;
pub mod semver;
pub mod url;

pub(crate) mod goquote;

#[cfg(test)]
mod fuzz;
