//! The controller's Prometheus metrics, served by the admin endpoint.

use crate::k8s::kind::NamespacedName;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

type Labels = Vec<(String, String)>;

#[derive(Clone)]
pub struct Metrics {
    reconciles: Counter,
    observed: Counter,
    errors: Family<Labels, Counter>,
    writes: Family<Labels, Counter>,
    duration: Histogram,
    in_flight: Gauge,
    failing: Gauge,
    drifted: Gauge,
    /// Drifted members per group, summed into `drifted`.
    drifted_by_group: Arc<Mutex<HashMap<NamespacedName, usize>>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            reconciles: Counter::default(),
            observed: Counter::default(),
            errors: Family::default(),
            writes: Family::default(),
            duration: Histogram::new(exponential_buckets(0.001, 2.0, 16)),
            in_flight: Gauge::default(),
            failing: Gauge::default(),
            drifted: Gauge::default(),
            drifted_by_group: Arc::default(),
        }
    }
}

/// Observes a reconcile's duration and in-flight count when dropped.
pub struct Timer<'a> {
    metrics: &'a Metrics,
    start: Instant,
}

impl Drop for Timer<'_> {
    fn drop(&mut self) {
        self.metrics
            .duration
            .observe(self.start.elapsed().as_secs_f64());
        self.metrics.in_flight.dec();
    }
}

impl Metrics {
    pub fn register(&self, registry: &mut Registry) {
        let r = registry.sub_registry_with_prefix("controller");
        r.register(
            "reconciles",
            "Reconciles that succeeded",
            self.reconciles.clone(),
        );
        r.register(
            "observed_objects",
            "Cached objects a reconcile read to observe its group (its own members, never the namespace's)",
            self.observed.clone(),
        );
        r.register(
            "reconcile_errors",
            "Reconciles that failed, by reason",
            self.errors.clone(),
        );
        r.register(
            "writes",
            "Writes to the API server, by verb (apply, prune, delete, release, status)",
            self.writes.clone(),
        );
        r.register(
            "reconcile_duration_seconds",
            "Time one reconcile took",
            self.duration.clone(),
        );
        r.register(
            "reconciles_in_flight",
            "Reconciles running now (the queue's busy workers)",
            self.in_flight.clone(),
        );
        r.register(
            "groups_backing_off",
            "Groups whose last reconcile failed and that wait to be retried",
            self.failing.clone(),
        );
        r.register(
            "drifted_members",
            "Members of groups with spec.drift Report that differ from the spec (reported, not reverted)",
            self.drifted.clone(),
        );
    }

    pub fn reconcile_timer(&self) -> Timer<'_> {
        self.in_flight.inc();
        Timer {
            metrics: self,
            start: Instant::now(),
        }
    }

    pub fn reconciled(&self) {
        self.reconciles.inc();
    }

    pub fn observed(&self, objects: usize) {
        self.observed.inc_by(objects as u64);
    }

    pub fn failed(&self, reason: &str) {
        self.errors
            .get_or_create(&vec![("reason".into(), reason.into())])
            .inc();
    }

    pub fn wrote(&self, verb: &str) {
        self.writes
            .get_or_create(&vec![("verb".into(), verb.into())])
            .inc();
    }

    pub fn set_backing_off(&self, n: usize) {
        self.failing.set(n as i64);
    }

    /// Records how many members of one group differ from its spec now
    /// (0 for a group that is gone or no longer reports drift).
    pub fn set_drifted(&self, namespace: &str, name: &str, n: usize) {
        let mut by_group = self
            .drifted_by_group
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let key = NamespacedName::new(namespace, name);
        if n == 0 {
            by_group.remove(&key);
        } else {
            by_group.insert(key, n);
        }
        self.drifted.set(by_group.values().sum::<usize>() as i64);
    }
}

#[cfg(test)]
#[path = "metrics_tests.rs"]
mod tests;
