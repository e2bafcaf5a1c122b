//! The continuous audit's Prometheus metrics (registered under the process's
//! `interlock_` prefix, on the /metrics it already serves).

use crate::report::Finding;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::collections::HashMap;

type Labels = Vec<(String, String)>;

/// Cheap to clone: every field shares its value.
#[derive(Clone, Default)]
pub struct AuditMetrics {
    violations: Family<Labels, Gauge>,
    evaluations: Counter,
    passes: Family<Labels, Counter>,
    writes: Family<Labels, Counter>,
    write_errors: Counter,
    objects: Gauge,
}

impl AuditMetrics {
    pub fn register(&self, registry: &mut Registry) {
        let r = registry.sub_registry_with_prefix("audit");
        r.register(
            "violations",
            "Current audit results by policy, action and namespace (\"\": cluster-scoped)",
            self.violations.clone(),
        );
        r.register(
            "evaluations",
            "Objects evaluated by the continuous audit",
            self.evaluations.clone(),
        );
        r.register(
            "passes",
            "Audit passes, by kind (full, changes)",
            self.passes.clone(),
        );
        r.register(
            "report_writes",
            "PolicyReports (and the ClusterPolicyReport, namespace \"\") written, by namespace",
            self.writes.clone(),
        );
        r.register(
            "report_write_errors",
            "Report writes that failed (retried after the next pass)",
            self.write_errors.clone(),
        );
        r.register(
            "objects",
            "Objects the audit tracks (of the kinds policies match)",
            self.objects.clone(),
        );
    }

    /// Records a pass: its evaluations and the results now current.
    pub fn pass<'f>(
        &self,
        full: bool,
        evaluated: usize,
        objects: usize,
        findings: impl Iterator<Item = &'f Finding>,
    ) {
        // A tick that found nothing to do is not a pass.
        if full || evaluated > 0 {
            let kind = if full { "full" } else { "changes" };
            self.passes
                .get_or_create(&vec![("kind".into(), kind.into())])
                .inc();
        }
        self.evaluations.inc_by(evaluated as u64);
        self.objects.set(objects as i64);
        let mut counts: HashMap<Labels, i64> = HashMap::new();
        for f in findings {
            let labels = vec![
                ("policy".to_string(), f.policy.clone()),
                ("action".to_string(), f.action.as_str().to_string()),
                (
                    "namespace".to_string(),
                    f.object.namespace.clone().unwrap_or_default(),
                ),
            ];
            *counts.entry(labels).or_default() += 1;
        }
        // A series whose violations are gone must disappear, not stay at
        // its last value.
        self.violations.clear();
        for (labels, n) in counts {
            self.violations.get_or_create(&labels).set(n);
        }
    }

    pub fn wrote(&self, namespace: &str) {
        self.writes.get_or_create(&ns_label(namespace)).inc();
    }

    pub fn write_failed(&self) {
        self.write_errors.inc();
    }

    /// Writes of one namespace's report so far ("": the ClusterPolicyReport).
    pub fn writes_in(&self, namespace: &str) -> u64 {
        self.writes.get_or_create(&ns_label(namespace)).get()
    }

    /// Full passes made so far.
    pub fn full_passes(&self) -> u64 {
        self.passes
            .get_or_create(&vec![("kind".into(), "full".into())])
            .get()
    }

    /// Objects evaluated so far.
    pub fn evaluations(&self) -> u64 {
        self.evaluations.get()
    }
}

fn ns_label(namespace: &str) -> Labels {
    vec![("namespace".into(), namespace.into())]
}
