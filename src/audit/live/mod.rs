//! The continuous audit: a loop beside `serve` or `controller`, over their
//! live cluster state, that keeps PolicyReports and gauges of what is
//! stored in the cluster and violates a policy (`--audit`, docs/audit.md).
//!
//! Decisions:
//! - Lookups read the process's live inventory (the one admission reads);
//!   the objects evaluated come from a [`store`] of their own, fed by
//!   watchers of the kinds policies *match*: the live inventory keeps only
//!   the kinds policies read, projected to the fields they read, and a
//!   policy's `object.*` may read any field. Memory: one compressed copy of
//!   each matched object (see docs/PERFORMANCE.md).
//! - Every [`TICK`] the loop evaluates what changed ([`pass`]); every
//!   `full_interval`, or after a policy reload, everything. Nothing runs
//!   before the inventory and the store have listed everything (a lookup
//!   in a half-listed inventory would report false violations).
//! - The evaluation runs on a blocking thread, in batches under the read
//!   lock; reports are written by the async loop afterwards, outside any
//!   lock.
//! - Matched kinds are found by discovery at start, after each policy
//!   reload and at each full pass (a CRD installed later is picked up).

pub mod cluster_vaps;
pub mod metrics;
pub mod pass;
pub mod reports;
pub mod store;

use crate::cluster::{Cluster, Companion};
use cluster_vaps::ClusterVaps;
use kube::discovery::{ApiResource, Discovery};
use kube::Client;
use metrics::AuditMetrics;
use pass::Auditor;
use reports::Reporter;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often the loop looks for changes.
pub const TICK: Duration = Duration::from_secs(1);

#[derive(Debug, Clone)]
pub struct LiveOptions {
    /// Between full passes (a pass over every object, changed or not).
    pub full_interval: Duration,
    /// Between looks for changes.
    pub tick: Duration,
    /// Store the results as reports (off: gauges only).
    pub write_reports: bool,
    /// Their kinds (`--audit-report-format`).
    pub report_format: super::policy_report::FormatChoice,
    /// `--audit-cluster-vaps`: the cluster's own VAPs too ([`cluster_vaps`]).
    pub cluster_vaps: bool,
}

impl Default for LiveOptions {
    fn default() -> Self {
        LiveOptions {
            full_interval: Duration::from_secs(3600),
            tick: TICK,
            write_reports: true,
            report_format: Default::default(),
            cluster_vaps: false,
        }
    }
}

/// The continuous audit of one process: its options and metrics; started
/// by the front-end as a [`Companion`].
#[derive(Clone)]
pub struct LiveAudit {
    pub options: LiveOptions,
    pub metrics: AuditMetrics,
}

impl LiveAudit {
    pub fn new(options: LiveOptions) -> Self {
        LiveAudit {
            options,
            metrics: AuditMetrics::default(),
        }
    }

    /// Runs until the task is aborted.
    pub async fn run(self, cluster: Arc<Cluster>, client: Client) {
        let store = store::Shared::default();
        let mut watchers = store::AuditWatchers::new(client.clone(), store.clone());
        let mut reporter = self
            .options
            .write_reports
            .then(|| Reporter::new(client.clone(), self.options.report_format));
        let mut auditor = Auditor::default();
        let mut last_full: Option<Instant> = None;
        // The policy generation and time of the last discovery.
        let mut discovered: Option<(u64, Instant)> = None;
        let mut vaps = VapsRead::default();
        tracing::info!(full_interval = ?self.options.full_interval, reports = self.options.write_reports, "continuous audit started");
        loop {
            tokio::time::sleep(self.options.tick).await;
            let generation = cluster.read(|st| st.generation());
            let vaps_changed = self.options.cluster_vaps && vaps.refresh(&client, &cluster).await;
            if vaps_changed {
                discovered = None;
            }
            let full_due =
                vaps_changed || last_full.is_none_or(|t| t.elapsed() >= self.options.full_interval);
            let stale = discovered.is_none_or(|(g, at)| {
                g != generation || at.elapsed() >= self.options.full_interval
            });
            if stale {
                match matched_kinds(&client, &cluster, vaps.set.as_deref()).await {
                    Ok(kinds) => {
                        watchers.set_kinds(&kinds);
                        discovered = Some((generation, Instant::now()));
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "audit: discovery failed; retrying");
                        continue;
                    }
                }
            }
            if !cluster.is_ready() || !store.lock().synced() {
                continue;
            }
            if let Some(r) = reporter.as_mut() {
                r.seed().await;
            }
            let mut a = std::mem::take(&mut auditor);
            let (st, c, m) = (store.clone(), cluster.clone(), self.metrics.clone());
            let set = vaps.set.clone();
            let started = Instant::now();
            let joined = tokio::task::spawn_blocking(move || {
                let pass = a.pass(&c, &st, full_due, set.as_deref());
                let objects = st.lock().objects.len();
                m.pass(pass.full, pass.evaluated, objects, a.findings());
                (a, pass)
            })
            .await;
            let Ok((a, pass)) = joined else {
                tracing::error!("audit pass panicked; the audit stops");
                break;
            };
            if pass.full {
                last_full = Some(Instant::now());
            }
            if pass.evaluated > 0 || !pass.changed.is_empty() {
                tracing::info!(
                    full = pass.full,
                    evaluated = pass.evaluated,
                    namespaces_changed = pass.changed.len(),
                    elapsed = ?started.elapsed(),
                    evaluating = ?pass.busy,
                    holds = pass.holds,
                    "audit pass"
                );
            }
            if let Some(r) = reporter.as_mut() {
                if r.is_seeded() {
                    self.write_reports(r, &a, &cluster, &pass).await;
                } else {
                    r.defer(&pass.changed);
                }
            }
            auditor = a;
        }
    }

    async fn write_reports(
        &self,
        reporter: &mut Reporter,
        auditor: &Auditor,
        cluster: &Cluster,
        pass: &pass::Pass,
    ) {
        for ns in reporter.take(&pass.changed) {
            if !ns.is_empty() && !namespace_exists(cluster, &ns) {
                reporter.forget(&ns);
                continue;
            }
            let findings = auditor.findings_in(&ns);
            if !reporter.wanted(&ns, &findings) {
                continue;
            }
            let report = reporter.desired(&ns, &findings);
            match reporter.write(&ns, &report).await {
                Ok(true) => self.metrics.wrote(&ns),
                Ok(false) => {}
                Err(e) => {
                    self.metrics.write_failed();
                    tracing::warn!(namespace = %ns, error = %e, hint = reports::hint(&e), "audit: report not written; retried after the next pass");
                }
            }
        }
    }
}

impl Companion for LiveAudit {
    fn register_metrics(&self, registry: &mut prometheus_client::registry::Registry) {
        self.metrics.register(registry);
    }

    fn start(&self, cluster: Arc<Cluster>, client: Client) -> tokio::task::JoinHandle<()> {
        tokio::spawn(self.clone().run(cluster, client))
    }
}

fn namespace_exists(cluster: &Cluster, ns: &str) -> bool {
    cluster.read(|st| {
        st.inventory
            .find(crate::inventory::ObjectKeyRef {
                group: "",
                kind: "Namespace",
                namespace: "",
                name: ns,
            })
            .is_some()
    })
}

/// The kinds some policy (or one of the cluster's VAPs audited) may
/// match, among those the cluster serves.
async fn matched_kinds(
    client: &Client,
    cluster: &Cluster,
    vaps: Option<&ClusterVaps>,
) -> Result<Vec<ApiResource>, kube::Error> {
    let discovery = Discovery::new(client.clone()).run().await?;
    let served: Vec<_> = discovery
        .groups()
        .flat_map(|g| g.resources_by_stability())
        .collect();
    let (mut planned, _) = cluster.read(|st| super::list::plan(&st.policies, &served));
    if let Some(v) = vaps {
        planned.extend(super::list::plan(&v.policies, &served).0);
    }
    let mut kinds: Vec<ApiResource> = Vec::new();
    for p in planned.into_iter().filter(|p| p.matched) {
        if !kinds.contains(&p.resource) {
            kinds.push(p.resource);
        }
    }
    Ok(kinds)
}

/// The cluster's VAPs as last read, and when.
#[derive(Default)]
struct VapsRead {
    set: Option<Arc<ClusterVaps>>,
    at: Option<Instant>,
}

impl VapsRead {
    /// Reads them again every [`cluster_vaps::REFRESH`]; whether they (or
    /// their params) changed.
    async fn refresh(&mut self, client: &Client, cluster: &Cluster) -> bool {
        if self.at.is_some_and(|t| t.elapsed() < cluster_vaps::REFRESH) {
            return false;
        }
        self.at = Some(Instant::now());
        let own = cluster.read(|st| st.policies.clone());
        match cluster_vaps::read(client, &own).await {
            Ok(v) => {
                let changed = self.set.as_ref().map(|s| &s.fingerprint) != Some(&v.fingerprint);
                if changed {
                    tracing::info!(
                        policies = v.policies.len(),
                        "audit: the cluster's VAPs changed"
                    );
                    self.set = Some(Arc::new(v));
                }
                changed
            }
            Err(e) => {
                tracing::warn!(error = %e, "audit: the cluster's VAPs not read; retried");
                false
            }
        }
    }
}
