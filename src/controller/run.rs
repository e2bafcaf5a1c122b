//! `interlock controller`: the shared cluster state (policies, watched
//! inventory), leader election, the admin endpoint and kube-runtime's
//! Controller over ResourceGroups, wired together and shut down together.

use super::error::Error;
use super::lease::{Elector, LeaseConfig};
use super::members::Members;
use super::metrics::Metrics;
use super::quota::Quotas;
use super::reconcile::{jittered, reconcile, Context};
use super::shards::{self, Shards};
use crate::cluster::authz::SarAuthorizer;
use crate::cluster::prereq::{self, Access, Need};
use crate::cluster::reload::{self, Sources, Supervisor};
use crate::cluster::{Cluster, ClusterOptions};
use crate::group::crd::{ResourceGroup, API_VERSION, GROUP, KIND};
use crate::k8s::kind::GroupVersionKind;
use crate::k8s::kind::NamespacedName;
use futures::StreamExt;
use kube::api::Api;
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::{reflector, watcher, WatchStreamExt as _};
use kube::ResourceExt;
use prometheus_client::registry::Registry;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The controller's settings (built from its command-line flags).
#[derive(Debug, Clone)]
pub struct ControllerConfig {
    /// `-p` paths; empty: the bundled library.
    pub policies: Vec<PathBuf>,
    /// Groups reconciled at once.
    pub concurrency: u16,
    /// Where `/metrics`, `/healthz` and `/readyz` are served.
    pub admin_addr: SocketAddr,
    /// `None`: no leader election (a single replica, or tests).
    pub lease: Option<LeaseConfig>,
    /// Shards of the groups, each with a Lease of its own (needs `lease`);
    /// 1: the leader reconciles every group.
    pub shards: u16,
    /// Whether the Lease's namespace was given; if not, it may default to
    /// the kubeconfig context's namespace outside a cluster.
    pub lease_namespace_given: bool,
    pub watch_timeout: Duration,
    /// `--disable` and `--action`.
    pub overrides: crate::policy::overrides::Overrides,
    /// `--cluster-policies`.
    pub objects: Option<crate::cluster::policy_objects::ObjectOptions>,
}

struct Health(Arc<Cluster>);

impl crate::server::admin::Health for Health {
    fn ready(&self) -> bool {
        self.0.is_ready()
    }
}

/// Runs until a shutdown signal; `companion` (the continuous audit) runs
/// beside the reconciles while this replica leads. A replica that loses
/// the lease stops reconciling and campaigns again; it never exits for it.
pub async fn run(
    cfg: ControllerConfig,
    companion: Option<Arc<dyn crate::cluster::Companion>>,
) -> anyhow::Result<()> {
    // Bound first: a replica that cannot serve its probes and metrics must
    // not run unseen (exit 2, as `serve` does on its --listen).
    let admin_listener = crate::server::admin::bind(cfg.admin_addr)
        .await
        .map_err(|e| anyhow::anyhow!("--admin-addr: {e}"))?;
    let kube_config = kube::Config::infer()
        .await
        .map_err(|e| anyhow::anyhow!("no cluster to reconcile against ({e})"))?;
    let client = kube::Client::try_from(kube_config.clone())?;
    let impersonator = crate::cluster::impersonate::impersonator(&kube_config, &client)?;
    let sources = Sources {
        policies: cfg.policies.clone(),
        overrides: cfg.overrides.clone(),
        objects: cfg.objects.clone(),
        ..Sources::default()
    };
    let options = ClusterOptions {
        watch_timeout: cfg.watch_timeout,
    };
    let (cluster, kinds) = reload::initial(&sources, options)?;
    let cluster = Arc::new(cluster);
    let mut lease = cfg.lease.clone();
    if let Some(l) = lease.as_mut().filter(|_| !cfg.lease_namespace_given) {
        l.namespace = prereq::default_namespace(&client, &kube_config).await;
    }
    let shard_leases: Vec<LeaseConfig> = match &lease {
        Some(l) if cfg.shards > 1 => (0..cfg.shards)
            .map(|i| LeaseConfig {
                name: shards::lease_name(&l.name, i),
                ..l.clone()
            })
            .collect(),
        _ => vec![],
    };
    let mut needs = needs(&kinds, lease.as_ref());
    needs.extend(shard_leases.iter().flat_map(lease_needs));
    if let Some(o) = &sources.objects {
        needs.extend(crate::cluster::policy_objects::needs(&client, o));
    }
    cluster.set_prerequisites_met(false);
    let supervisor = Supervisor::start(cluster.clone(), Some(client.clone()), sources, kinds);

    let metrics = Metrics::default();
    // The members' `authorizer...check()`: reviews for the group's
    // ServiceAccount (create on subjectaccessreviews, manifests/base).
    let authorizer = Arc::new(SarAuthorizer::new(
        client.clone(),
        tokio::runtime::Handle::current(),
    ));
    let mut registry = Registry::default();
    let sub = registry.sub_registry_with_prefix("interlock");
    metrics.register(sub);
    authorizer.metrics().register(sub);
    cluster.reloads.register(sub);
    if let Some(c) = &companion {
        c.register_metrics(registry.sub_registry_with_prefix("interlock"));
    }
    let admin = tokio::spawn(crate::server::admin::serve(
        admin_listener,
        Arc::new(registry),
        Arc::new(Health(cluster.clone())),
        crate::server::shutdown_signal(),
    ));

    let leader = Leader {
        client: client.clone(),
        impersonator,
        cluster,
        metrics,
        authorizer,
        companion,
        concurrency: cfg.concurrency,
    };
    let elector = lease.map(|l| Elector::new(client.clone(), l));
    let shard_electors: Vec<Elector> = shard_leases
        .into_iter()
        .map(|l| Elector::new(client.clone(), l))
        .collect();
    tokio::select! {
        () = prereq::wait(&client, &leader.cluster, &needs) => match &elector {
            Some(e) if !shard_electors.is_empty() => share(&leader, e, &shard_electors).await,
            _ => lead_by_turns(&leader, elector.as_ref()).await,
        },
        _ = crate::server::shutdown_signal() => {}
    }
    for e in elector.iter().chain(&shard_electors) {
        e.release().await;
    }
    supervisor.shutdown().await;
    admin.abort();
    Ok(())
}

/// What `interlock controller` needs of the cluster: the ResourceGroup
/// CRD and its verbs on groups, the kinds its policies read, and with
/// leader election its namespace and its Lease (manifests/base/controller.yaml).
fn needs(kinds: &[GroupVersionKind], lease: Option<&LeaseConfig>) -> Vec<Need> {
    let kind = GroupVersionKind::from_api_version(API_VERSION, KIND);
    let mut needs = vec![Need::Served {
        kind,
        crd: "crd-resourcegroup.yaml",
    }];
    for verb in ["list", "watch", "patch"] {
        needs.push(Need::Access(Access::new(verb, GROUP, "resourcegroups")));
    }
    needs.push(Need::Access(Access::new(
        "patch",
        GROUP,
        "resourcegroups/status",
    )));
    // The quotas checked before a group's first write (super::quota).
    for verb in ["list", "watch"] {
        needs.push(Need::Access(Access::new(verb, "", "resourcequotas")));
    }
    needs.extend(prereq::watching(kinds));
    if let Some(l) = lease {
        needs.push(Need::Namespace(l.namespace.clone()));
        needs.extend(lease_needs(l));
    }
    needs
}

/// Creating Leases in its namespace, reading and replacing this one.
fn lease_needs(l: &LeaseConfig) -> Vec<Need> {
    let mut needs = vec![Need::Access(
        Access::new("create", "coordination.k8s.io", "leases").in_namespace(&l.namespace),
    )];
    for verb in ["get", "update"] {
        needs.push(Need::Access(
            Access::new(verb, "coordination.k8s.io", "leases")
                .in_namespace(&l.namespace)
                .named(&l.name),
        ));
    }
    needs
}

/// Campaigns, leads while the term lasts, and campaigns again, until a
/// shutdown signal. Without an elector, leads once until the signal.
async fn lead_by_turns(leader: &Leader, elector: Option<&Elector>) {
    match elector {
        Some(elector) => by_turns(elector, || leader.lead()).await,
        None => leader.lead().await,
    }
}

/// Runs `work` during each term of `elector`'s lease, campaigning between
/// terms, until a shutdown signal or `work` ends.
async fn by_turns<F: std::future::Future<Output = ()>>(elector: &Elector, work: impl Fn() -> F) {
    loop {
        let term = tokio::select! {
            t = elector.acquire() => t,
            _ = crate::server::shutdown_signal() => return,
        };
        // Dropping the reconciles aborts them where they wait: a pass is
        // level-triggered and every write idempotent, so the next leader's
        // pass finishes what this one left, as after a crash.
        let ended = tokio::select! {
            () = work() => return,
            e = elector.keep(term) => e,
        };
        tracing::warn!(error = %ended, "stopped reconciling; campaigning again");
    }
}

/// With shards: the reconciles run for good and act on the groups of the
/// shards held ([`reconcile_held`]); each shard's lease is campaigned for
/// on its own; the leader's lease only decides which replica audits.
async fn share(leader: &Leader, elector: &Elector, shard_electors: &[Elector]) {
    let shards = Arc::new(Shards::new(shard_electors.len() as u16));
    let (taken, on_taken) = tokio::sync::mpsc::unbounded_channel();
    let campaigns = futures::future::join_all(
        shard_electors
            .iter()
            .zip(0..)
            .map(|(e, i)| campaign(i, e, &shards, &taken)),
    );
    let on_taken = futures::stream::unfold(on_taken, |mut rx| async move {
        rx.recv().await.map(|()| ((), rx))
    });
    let audit = by_turns(elector, || async {
        let _audit = leader.audit();
        std::future::pending::<()>().await
    });
    tokio::select! {
        () = leader.reconcile(shards.clone(), on_taken) => {}
        _ = campaigns => {}
        () = audit => {}
    }
}

/// Holds shard `i` whenever its lease can be had. A shard taken wakes every
/// group (those of other shards return at once); a term that ends drops
/// the shard's reconciles in flight before another replica may take it.
async fn campaign(
    i: u16,
    elector: &Elector,
    shards: &Shards,
    taken: &tokio::sync::mpsc::UnboundedSender<()>,
) {
    let every = elector.renew_every();
    // A replica's campaigns start spread over one renewal period and, once
    // it holds a shard, wait one more before each attempt: replicas that
    // start together share the shards rather than the first taking all.
    tokio::time::sleep(every.mul_f64(crate::cluster::backoff::jitter_fraction())).await;
    loop {
        let term = elector.acquire_after(|| shards.patience(every)).await;
        shards.set(i, true);
        tracing::info!(shard = i, "reconciling the shard's groups");
        let _ = taken.send(());
        let ended = elector.keep(term).await;
        shards.set(i, false);
        tracing::warn!(shard = i, error = %ended, "stopped reconciling the shard; campaigning again");
    }
}

/// What one term of leadership is made from; each term starts afresh
/// (its caches, backoffs and the audit), so nothing of a term that ended
/// mid-pass carries over.
struct Leader {
    client: kube::Client,
    /// Writes as ServiceAccounts go through it (`Context::impersonator`).
    impersonator: kube::Client,
    cluster: Arc<Cluster>,
    metrics: Metrics,
    authorizer: Arc<SarAuthorizer>,
    companion: Option<Arc<dyn crate::cluster::Companion>>,
    concurrency: u16,
}

impl Leader {
    /// Reconciles every group until a shutdown signal (or until dropped:
    /// the term ended).
    async fn lead(&self) {
        let _audit = self.audit();
        self.reconcile(Arc::new(Shards::all()), futures::stream::pending())
            .await;
    }

    /// One replica audits and writes reports: the leader.
    fn audit(&self) -> Option<AbortOnDrop> {
        self.companion
            .as_ref()
            .map(|c| AbortOnDrop(c.start(self.cluster.clone(), self.client.clone())))
    }

    /// Reconciles the groups of the shards held; `taken` wakes them all.
    async fn reconcile(
        &self,
        shards: Arc<Shards>,
        taken: impl futures::Stream<Item = ()> + Send + 'static,
    ) {
        let (wake, woken) = tokio::sync::mpsc::unbounded_channel();
        let controller = groups_controller(self.client.clone());
        let (quotas, quota_watch) =
            Quotas::start(self.client.clone(), controller.store(), wake.clone());
        let _quota_watch = AbortOnDrop(quota_watch);
        let members = Members::new(self.client.clone(), wake);
        let mut ctx = Context::new(
            self.client.clone(),
            self.cluster.clone(),
            members,
            self.metrics.clone(),
        );
        ctx.authorizer = Some(self.authorizer.clone());
        ctx.shards = shards;
        ctx.quotas = Some(quotas);
        ctx.impersonator = self.impersonator.clone();
        let ctx = Arc::new(ctx);
        let woken =
            futures::stream::unfold(
                woken,
                |mut rx| async move { rx.recv().await.map(|r| (r, rx)) },
            );
        tracing::info!(concurrency = self.concurrency, "reconciling ResourceGroups");
        controller
            .reconcile_on(woken)
            .reconcile_all_on(taken)
            .with_config(controller::Config::default().concurrency(self.concurrency))
            .graceful_shutdown_on(crate::server::shutdown_signal())
            .run(reconcile_held, error_policy, ctx)
            .for_each(|r| async move {
                if let Err(e) = r {
                    tracing::debug!(error = %e, "reconcile did not complete");
                }
            })
            .await;
    }
}

/// The Controller over every ResourceGroup. Its store holds every group
/// for the whole term, in the compact form of [`super::stored`].
fn groups_controller(client: kube::Client) -> Controller<ResourceGroup> {
    let (reader, writer) = reflector::store();
    let groups = watcher(
        Api::<ResourceGroup>::all(client),
        watcher::Config::default(),
    )
    .modify(super::stored::packed)
    .reflect(writer)
    .applied_objects();
    Controller::for_stream(groups, reader)
}

/// [`reconcile`] of a group whose shard this replica holds, dropped where
/// it waits if the shard's term ends first; other groups are left alone.
async fn reconcile_held(rg: Arc<ResourceGroup>, ctx: Arc<Context>) -> Result<Action, Error> {
    let Some(held) = ctx
        .shards
        .hold(rg.namespace().as_deref().unwrap_or_default())
    else {
        // Another replica's (or, until taken, nobody's: taking a shard
        // wakes every group).
        return Ok(Action::await_change());
    };
    tokio::select! {
        r = reconcile(Arc::new(super::stored::unpacked(&rg)), ctx.clone()) => r,
        () = held.lost() => {
            tracing::info!(group = %rg.name_any(), namespace = ?rg.namespace(), "shard lost mid-pass; the pass is dropped");
            Ok(Action::await_change())
        }
    }
}

/// A task that ends with the scope that started it.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Requeues a failed group with its own exponential backoff (1 s doubling
/// to 5 min, jittered), so one broken group never becomes a hot loop and
/// never delays the others.
pub fn error_policy(rg: Arc<ResourceGroup>, e: &Error, ctx: Arc<Context>) -> Action {
    if let Error::Waiting(_) = e {
        return Action::requeue(Duration::from_secs(2));
    }
    ctx.metrics.failed(e.metric_label());
    let key = NamespacedName::new(rg.namespace().unwrap_or_default(), rg.name_any());
    let (attempt, failing) = {
        let mut failures = ctx.failures.lock().unwrap_or_else(|p| p.into_inner());
        let n = failures.entry(key.clone()).or_insert(0);
        *n = n.saturating_add(1);
        (*n, failures.len())
    };
    ctx.metrics.set_backing_off(failing);
    let wait = backoff(attempt);
    tracing::warn!(group = %key.name, namespace = %key.namespace, error = %e, reason = e.metric_label(), attempt, retry_in = ?wait, "reconcile failed");
    Action::requeue(wait)
}

/// The wait before retry number `attempt` (1-based).
pub fn backoff(attempt: u32) -> Duration {
    let exp = crate::cluster::backoff::exponential(
        attempt.saturating_sub(1),
        Duration::from_secs(1),
        Duration::from_secs(300),
    );
    jittered(exp)
}

#[cfg(test)]
#[path = "run_tests.rs"]
mod tests;
