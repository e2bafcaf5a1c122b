//! One error type for a reconcile, telling "retry" (the API server, a cache
//! not synced yet) from "wait" (members still being deleted). A group that
//! is invalid is not an error: the plan reports it in status and waits for a
//! spec change.

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("the group has no {0}")]
    Metadata(&'static str),
    #[error("the cluster inventory is not synced yet")]
    InventoryNotReady,
    #[error("the cache of {0} has not listed yet")]
    CacheNotSynced(String),
    #[error("impersonating {user}: {message}")]
    Impersonation { user: String, message: String },
    #[error("the validation of the group took longer than {0:?}")]
    ValidationDeadline(std::time::Duration),
    /// Some `authorizer...check()` got no answer: the status says which;
    /// validated again with backoff.
    #[error("the authorizer did not answer: {0}")]
    Authorizer(String),
    #[error("finalizer: {0}")]
    Finalizer(String),
    /// Members of the deleted group are still terminating: come back soon,
    /// without counting a failure.
    #[error("waiting for {0} member(s) to be deleted")]
    Waiting(usize),
}

impl Error {
    /// The `reason` label of `interlock_controller_reconcile_errors_total`.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube(kube::Error::Api(s)) if s.code == 409 => "conflict",
            Error::Kube(kube::Error::Api(s)) if s.code == 403 => "forbidden",
            Error::Kube(_) => "kube",
            Error::Metadata(_) => "metadata",
            Error::InventoryNotReady => "inventory_not_ready",
            Error::CacheNotSynced(_) => "cache_not_synced",
            Error::Impersonation { .. } => "impersonation",
            Error::ValidationDeadline(_) => "validation_deadline",
            Error::Authorizer(_) => "authorizer",
            Error::Finalizer(_) => "finalizer",
            Error::Waiting(_) => "waiting",
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
