//! One reconcile of one group: observe (caches), validate (the shared
//! cluster state), plan (pure), act (server-side apply as the group's
//! ServiceAccount, prune, status). Both arms of the finalizer go through
//! the same observation and plan; only what is carried out differs.

use super::error::{Error, Result};
use super::index::{GroupKey, Member, Name};
use super::members::{KindCache, Members};
use super::metrics::Metrics;
use crate::cel::k8s_authz::Authorizer;
use crate::cluster::impersonate::{validate_group, As, VALIDATION_DEADLINE};
use crate::cluster::Cluster;
use crate::group::crd::{
    applyset_id, GroupFinding, ResourceGroup, ResourceGroupStatus, API_VERSION, FIELD_MANAGER,
    FINALIZER, KIND,
};
use crate::group::member::{parse_member, Scope};
use crate::group::outcome::Stop;
use crate::group::plan::{
    after_writes, plan, reason, DesiredObject, Finalize, GroupRef, ObjectRef, Plan, PlanInput,
    VALID,
};
use crate::group::quota::{shortfall, NewObject, Shortfall};
use crate::group::validate::Writer;
use crate::inventory::ObjectKey;
use crate::k8s::kind::{GroupKind, GroupVersionKind, NamespacedName};
use crate::k8s::kinds::group_of;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PropagationPolicy};
use kube::runtime::controller::Action;
use kube::runtime::finalizer::{finalizer, Event};
use kube::{Client, ResourceExt};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long a pass waits for a cache's first list (a member kind's, or
/// the shared inventory's, or its re-list after a policy reload) before it
/// counts as a failure. Generous: at start every group's pass waits on the
/// same lists, and a wait is a hold, not a retry with a warning.
pub const SYNC_WAIT: Duration = Duration::from_secs(60);

/// What every reconcile shares.
pub struct Context {
    pub client: Client,
    /// The client writes as a group's ServiceAccount go through
    /// ([`crate::cluster::impersonate::impersonator`]): `client`, unless its configuration
    /// impersonates someone itself.
    pub impersonator: Client,
    pub cluster: Arc<Cluster>,
    pub members: Members,
    pub metrics: Metrics,
    /// Consecutive failures per group, for backoff; reset on success.
    pub failures: Mutex<HashMap<NamespacedName, u32>>,
    /// How long an applied member stays in the inventory before a watch
    /// shows it (so the next group's validation sees it).
    pub pending_ttl: Duration,
    /// Answers the policies' `authorizer...check()` for the group's
    /// ServiceAccount.
    pub authorizer: Option<Arc<dyn Authorizer>>,
    /// The shards whose groups this replica reconciles (all, unless
    /// `--shards`).
    pub shards: Arc<super::shards::Shards>,
    /// The ResourceQuotas checked before a group's first write; `None`:
    /// not checked (the API server alone decides).
    pub quotas: Option<super::quota::Quotas>,
    /// Statuses written whose watch events the store may not hold yet.
    pub written: super::written::Written,
}

impl Context {
    pub fn new(
        client: Client,
        cluster: Arc<Cluster>,
        members: Members,
        metrics: Metrics,
    ) -> Context {
        Context {
            impersonator: client.clone(),
            client,
            cluster,
            members,
            metrics,
            failures: Mutex::default(),
            pending_ttl: Duration::from_secs(30),
            authorizer: None,
            shards: Arc::new(super::shards::Shards::all()),
            quotas: None,
            written: Default::default(),
        }
    }

    /// Requests as `writer`'s ServiceAccount, through the one client.
    fn as_writer(&self, writer: &Writer) -> Result<As> {
        As::writer(self.impersonator.clone(), writer).map_err(|e| Error::Impersonation {
            user: e.user,
            message: e.message,
        })
    }

    fn succeeded(&self, key: &NamespacedName) {
        let mut failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        if failures.remove(key).is_some() {
            self.metrics.set_backing_off(failures.len());
        }
    }
}

/// The reconcile kube-runtime calls: the group's finalizer first, then the
/// Apply or Cleanup arm.
pub async fn reconcile(rg: Arc<ResourceGroup>, ctx: Arc<Context>) -> Result<Action> {
    let ns = rg.namespace().ok_or(Error::Metadata("namespace"))?;
    let key = NamespacedName::new(ns.as_str(), rg.name_any());
    // Held, not failed, until the inventory has listed: at start every
    // group's first pass waits here instead of warning and backing off.
    inventory_synced(&ctx.cluster, SYNC_WAIT).await?;
    let _timer = ctx.metrics.reconcile_timer();
    let result = if lacks_finalizer(&rg) {
        // The finalizer goes into the group's one metadata patch, with its
        // ApplySet labels, before any member is written (`apply`): kube's
        // helper would spend a patch and a pass on it alone.
        apply(&rg, &ctx).await
    } else {
        with_finalizer(rg, &ctx).await
    };
    if result.is_ok() {
        ctx.succeeded(&key);
        ctx.metrics.reconciled();
    }
    result
}

/// A group that is not being deleted and has no finalizer yet.
fn lacks_finalizer(rg: &ResourceGroup) -> bool {
    rg.metadata.deletion_timestamp.is_none() && !rg.finalizers().iter().any(|f| f == FINALIZER)
}

/// The Apply or Cleanup arm through kube's finalizer helper, which removes
/// the finalizer once the cleanup is done.
async fn with_finalizer(rg: Arc<ResourceGroup>, ctx: &Context) -> Result<Action> {
    let ns = rg.namespace().ok_or(Error::Metadata("namespace"))?;
    let api: Api<ResourceGroup> = Api::namespaced(ctx.client.clone(), &ns);
    finalizer(&api, FINALIZER, rg, |event| async {
        match event {
            Event::Apply(rg) => apply(&rg, ctx).await,
            Event::Cleanup(rg) => cleanup(&rg, ctx).await,
        }
    })
    .await
    .or_else(|e| match e {
        kube::runtime::finalizer::Error::ApplyFailed(e)
        | kube::runtime::finalizer::Error::CleanupFailed(e) => Err(e),
        // A queued pass for a group already gone: nothing left to do.
        kube::runtime::finalizer::Error::RemoveFinalizer(kube::Error::Api(s)) if s.code == 404 => {
            Ok(Action::await_change())
        }
        other => Err(Error::Finalizer(other.to_string())),
    })
}

/// What one pass saw: the member kinds' caches and the observed objects.
struct Observed {
    /// A kind's cache serves every version of it.
    caches: HashMap<GroupKind, Arc<KindCache>>,
    /// As discovery answered for each version named (`None`: not served).
    scopes: HashMap<GroupVersionKind, Option<Scope>>,
    objects: Vec<Value>,
    /// Listed members the caches do not hold and that were not read:
    /// assumed absent until a dry run says otherwise.
    unseen: BTreeSet<ObjectKey>,
}

impl Observed {
    fn cache(&self, api_version: &str, kind: &str) -> Option<&Arc<KindCache>> {
        self.caches
            .get(&GroupKind::new(group_of(api_version), kind))
    }
}

/// The kinds a pass reads (named by the spec or recorded in status), and
/// the names the spec lists in the group's namespace, by kind (any version).
struct Wanted {
    kinds: BTreeSet<GroupVersionKind>,
    names: HashMap<GroupKind, Vec<String>>,
}

impl Wanted {
    fn of(rg: &ResourceGroup, namespace: &str) -> Wanted {
        let mut w = Wanted {
            kinds: BTreeSet::new(),
            names: HashMap::new(),
        };
        for r in &rg.spec.resources {
            let s = |p: &str| r.pointer(p).and_then(Value::as_str).map(str::to_string);
            let (Some(v), Some(k)) = (s("/apiVersion"), s("/kind")) else {
                continue;
            };
            let here = s("/metadata/namespace").is_none_or(|ns| ns == namespace);
            let gvk = GroupVersionKind::from_api_version(v, k);
            if let (Some(name), true) = (s("/metadata/name"), here) {
                w.names.entry(gvk.group_kind()).or_default().push(name);
            }
            w.kinds.insert(gvk);
        }
        for m in rg.status.iter().flat_map(|s| s.members.iter()) {
            w.kinds.insert(GroupVersionKind::from_api_version(
                m.api_version.as_str(),
                m.kind.as_str(),
            ));
        }
        w
    }
}

/// Reads the caches of every kind the spec names or the status records:
/// the objects that name this group (by index) and the object at each
/// listed member's name (someone else's, for the conflict check). Never
/// the rest of the namespace.
async fn observe(rg: &ResourceGroup, g: &GroupRef, ctx: &Context) -> Result<Observed> {
    let wanted = Wanted::of(rg, &g.namespace);
    let mut o = Observed {
        caches: HashMap::new(),
        scopes: HashMap::new(),
        objects: Vec::new(),
        unseen: BTreeSet::new(),
    };
    for gvk in wanted.kinds {
        if gvk.api_version() == API_VERSION && gvk.kind() == KIND {
            // A group of groups is refused by the plan; never watched.
            o.scopes.insert(gvk, Some(Scope::Namespaced));
            continue;
        }
        let cache = ctx.members.kind(gvk.api_version(), gvk.kind()).await?;
        let scope = cache.as_ref().map(|c| {
            if c.namespaced {
                Scope::Namespaced
            } else {
                Scope::Cluster
            }
        });
        o.scopes.insert(gvk.clone(), scope);
        if let Some(c) = cache {
            if !c.synced(SYNC_WAIT).await {
                return Err(Error::CacheNotSynced(gvk.kind().to_string()));
            }
            o.caches.insert(gvk.group_kind(), c);
        }
    }
    let keys = [
        GroupKey::ApplySet(applyset_id(&g.namespace, &g.name)),
        GroupKey::Owner(g.uid.clone()),
    ];
    for (kind, c) in o.caches.iter().filter(|(_, c)| c.namespaced) {
        let names = wanted.names.get(kind).map_or(&[][..], Vec::as_slice);
        o.objects
            .extend(group_objects(c, &keys, &g.namespace, names));
    }
    ctx.metrics.observed(o.objects.len());
    Ok(o)
}

/// The objects of one kind's cache that a group's pass sees, as JSON.
fn group_objects(
    c: &KindCache,
    keys: &[GroupKey],
    namespace: &str,
    names: &[String],
) -> Vec<Value> {
    let found: BTreeMap<Name, Arc<Member>> = {
        let store = c.read();
        let mut found: BTreeMap<_, _> = store
            .of_group(keys)
            .into_iter()
            .filter(|(n, _)| n.namespace == namespace)
            .collect();
        for name in names {
            let n = Name::new(namespace, name);
            if let Some(obj) = store.get(&n) {
                found.entry(n).or_insert(obj);
            }
        }
        found
    };
    found.values().map(|o| o.json()).collect()
}

/// The object as JSON with apiVersion and kind (list items lack them).
fn to_json(o: &DynamicObject, r: &kube::api::ApiResource) -> Value {
    let mut v = serde_json::to_value(o).unwrap_or(Value::Null);
    if let Some(m) = v.as_object_mut() {
        m.insert("apiVersion".into(), r.api_version.clone().into());
        m.insert("kind".into(), r.kind.clone().into());
    }
    v
}

/// What a pass does about listed members its caches do not hold (not
/// labelled: new, or someone else's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unlabelled {
    /// Assumed absent, the common case (a new member): no read. Each is
    /// dry-run before any write, and a dry run that finds an object there
    /// (or is refused) has the pass decided again with [`Unlabelled::Read`].
    Assumed,
    /// One read each: that decides between "create" and "conflict".
    Read,
}

async fn read_unlabelled(
    rg: &ResourceGroup,
    g: &GroupRef,
    observed: &mut Observed,
    ctx: &Context,
    mode: Unlabelled,
) -> Result<()> {
    let oracle = scope_oracle(&observed.scopes);
    let known: BTreeSet<ObjectKey> = observed.objects.iter().filter_map(ObjectKey::of).collect();
    let mut found = Vec::new();
    for (i, raw) in rg.spec.resources.iter().enumerate() {
        let Ok(m) = parse_member(i, raw, &g.namespace, &oracle, false) else {
            continue;
        };
        let Some(c) = observed.cache(&m.api_version, &m.kind) else {
            continue;
        };
        let Some(key) = ObjectKey::of(&m.object) else {
            continue;
        };
        if known.contains(&key) {
            continue;
        }
        if mode == Unlabelled::Assumed {
            observed.unseen.insert(key);
            continue;
        }
        let api: Api<DynamicObject> =
            Api::namespaced_with(ctx.client.clone(), &g.namespace, &c.resource);
        if let Some(obj) = api.get_opt(&m.name).await? {
            found.push(to_json(&obj, &c.resource));
        }
    }
    observed.objects.extend(found);
    Ok(())
}

fn scope_oracle(
    scopes: &HashMap<GroupVersionKind, Option<Scope>>,
) -> impl Fn(&str, &str) -> Option<Scope> + '_ {
    move |api_version: &str, kind: &str| {
        scopes
            .get(&GroupVersionKind::from_api_version(api_version, kind))
            .copied()
            .flatten()
    }
}

/// Waits (bounded) until the shared inventory has listed every kind the
/// policies read: a group validated against a partial inventory could be
/// admitted with a conflict the inventory would have shown.
pub async fn inventory_synced(cluster: &Cluster, within: Duration) -> Result<()> {
    let start = std::time::Instant::now();
    while !cluster.is_ready() {
        if start.elapsed() >= within {
            return Err(Error::InventoryNotReady);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

/// Every policy on every usable member, as findings for the plan, against
/// the shared inventory with this group's members in place.
async fn findings(
    rg: &ResourceGroup,
    g: &GroupRef,
    observed: &Observed,
    ctx: &Context,
) -> Result<Vec<GroupFinding>> {
    if !ctx.cluster.is_ready() {
        return Err(Error::InventoryNotReady);
    }
    let oracle = scope_oracle(&observed.scopes);
    let authorizer = ctx.authorizer.as_ref();
    validate_group(
        &ctx.cluster,
        g,
        &rg.spec,
        authorizer,
        &observed.objects,
        &oracle,
    )
    .await
    .ok_or(Error::ValidationDeadline(VALIDATION_DEADLINE))
}

/// What a pass decided, and from what.
struct Decided {
    g: GroupRef,
    observed: Observed,
    findings: Vec<GroupFinding>,
    plan: Plan,
}

impl Decided {
    /// The plan made from `objects` instead of what was observed (the
    /// validation's findings stand: they judged the same desired members).
    fn plan_on(&self, rg: &ResourceGroup, objects: &[Value]) -> Plan {
        plan_of(rg, &self.g, &self.observed, &self.findings, objects)
    }
}

fn plan_of(
    rg: &ResourceGroup,
    g: &GroupRef,
    observed: &Observed,
    findings: &[GroupFinding],
    objects: &[Value],
) -> Plan {
    let oracle = scope_oracle(&observed.scopes);
    plan(&PlanInput {
        group: g,
        spec: &rg.spec,
        previous: rg.status.as_ref(),
        observed: objects,
        findings,
        scopes: &oracle,
        now: chrono::Utc::now(),
    })
}

/// Observes, validates and plans one pass.
async fn decide(rg: &ResourceGroup, ctx: &Context, unlabelled: Unlabelled) -> Result<Decided> {
    let g = GroupRef::of(rg).map_err(|e| Error::Metadata(e.0))?;
    let mut observed = observe(rg, &g, ctx).await?;
    let findings = if g.deleting {
        vec![]
    } else {
        read_unlabelled(rg, &g, &mut observed, ctx, unlabelled).await?;
        findings(rg, &g, &observed, ctx).await?
    };
    let plan = plan_of(rg, &g, &observed, &findings, &observed.objects);
    Ok(Decided {
        g,
        observed,
        findings,
        plan,
    })
}

async fn apply(rg: &ResourceGroup, ctx: &Context) -> Result<Action> {
    let writer = Writer {
        namespace: rg.metadata.namespace.as_deref().unwrap_or(""),
        service_account: &rg.spec.service_account_name,
    };
    let client = ctx.as_writer(&writer)?;
    // Every apply is first tried as a server-side dry run (schema, RBAC of
    // the ServiceAccount, other admission webhooks): a group the API server
    // would refuse in part is not written at all. Then the applies, in
    // order; a refusal stops the pass (and the prune).
    let first = decide(rg, ctx, Unlabelled::Assumed).await?;
    let (d, refused) = match dry_run(&client, &first.observed, &first.plan).await {
        DryRun::Unseen => {
            let d = decide(rg, ctx, Unlabelled::Read).await?;
            let refused = dry_run(&client, &d.observed, &d.plan).await.refusal();
            (d, refused)
        }
        other => (first, other.refusal()),
    };
    let g = &d.g;
    tracing::debug!(group = %g.name, namespace = %g.namespace, generation = g.generation,
        apply = d.plan.apply.len(), prune = d.plan.prune.len(), "planned");
    // A dry run consumes no quota: the creates are counted against the
    // cached quotas before any write, so a group is not stored in part.
    let short = match refused {
        None => quota_shortfall(ctx, g, &d.observed, &d.plan).await?,
        Some(_) => None,
    };
    // Before any member: the finalizer, and the ApplySet's kinds as a
    // superset of what is written (KEP-3659).
    let patched = write_parent_metadata(rg, g, &d.plan, ctx).await?;
    let held = refused.is_some() || short.is_some();
    let w = if held {
        Writes {
            refused,
            ..Writes::default()
        }
    } else {
        write_members(&client, &d, ctx).await
    };
    let status = status_after(rg, &d, short.as_ref(), w, held);
    write_status(rg, g, &status, patched, ctx).await?;
    let drifted = status.members.iter().filter(|m| !m.drift.is_empty());
    ctx.metrics
        .set_drifted(&g.namespace, &g.name, drifted.count());
    unanswered(&status)?;
    let ready = status
        .conditions
        .iter()
        .any(|c| c.type_ == "Ready" && c.status == crate::group::crd::ConditionStatus::True);
    let mut after = requeue_after(ready);
    // A waitForReady group is due again when its wait times out, to say
    // so, even if no member changes meanwhile.
    if let Some(at) = d.plan.recheck_at {
        let until = (at - chrono::Utc::now()).to_std().unwrap_or_default();
        after = after.min(until + Duration::from_secs(1));
    }
    Ok(Action::requeue(after))
}

/// What a pass's writes of members did.
#[derive(Default)]
struct Writes {
    /// The members applied, in order.
    written: Vec<ObjectRef>,
    /// The API server's answers to those applies, as the caches hold
    /// objects.
    stored: Vec<Value>,
    pruned: usize,
    /// The write the API server refused (which stopped the pass).
    refused: Option<(ObjectRef, Error)>,
}

/// The planned applies in order, then (if all succeeded) the prunes.
async fn write_members(client: &As, d: &Decided, ctx: &Context) -> Writes {
    let (g, observed) = (&d.g, &d.observed);
    let mut w = Writes::default();
    for t in &d.plan.apply {
        match server_side_apply(client, observed, t, false).await {
            Ok((o, resource)) => w.stored.push(to_json(&super::index::trimmed(o), &resource)),
            Err(e) => {
                tracing::info!(group = %g.name, namespace = %g.namespace, member = %t.target.name, kind = %t.target.kind, error = %e, "member not applied");
                w.refused = Some((t.target.clone(), e));
                return w;
            }
        }
        ctx.metrics.wrote("apply");
        record(ctx, &t.object);
        w.written.push(t.target.clone());
    }
    for target in &d.plan.prune {
        if let Err(e) = delete(client, observed, target, false).await {
            w.refused = Some((target.clone(), e));
            return w;
        }
        ctx.metrics.wrote("prune");
        w.pruned += 1;
    }
    w
}

/// The status a pass leaves: the plan's, or where a quota or a refusal
/// stopped it. A pass that wrote members and pruned nothing is planned
/// again on the API server's answers, so members ready as soon as stored
/// are recorded Ready now, not by a second status write from the pass
/// their watch events wake (which then finds nothing to change).
fn status_after(
    rg: &ResourceGroup,
    d: &Decided,
    short: Option<&Shortfall>,
    w: Writes,
    dry_run: bool,
) -> ResourceGroupStatus {
    let previous = rg.status.as_ref();
    match (short, w.refused) {
        (Some(s), _) => {
            let g = &d.g;
            tracing::info!(group = %g.name, namespace = %g.namespace, quota = %s.quota, resource = %s.resource, "held by a ResourceQuota");
            let mut p = d.plan.clone();
            p.record_stop(previous, &Stop::Quota(s), &[], chrono::Utc::now());
            p.status
        }
        (None, Some((target, e))) => {
            let (reason, message) = refusal(&e);
            let stop = Stop::Refused {
                target: &target,
                reason,
                message: &message,
                dry_run,
            };
            let mut p = d.plan.clone();
            p.record_stop(previous, &stop, &w.written, chrono::Utc::now());
            p.status
        }
        (None, None) if !w.stored.is_empty() && w.pruned == 0 => d
            .plan_on(rg, &after_writes(&d.observed.objects, &w.stored))
            .settled_status()
            .unwrap_or_else(|| d.plan.status.clone()),
        (None, None) => d.plan.status.clone(),
    }
}

/// When a group that succeeded is looked at again unwoken. Member watches
/// wake the group on any change, so this is only a safety net; jittered so
/// that the groups a restart reconciled together do not come back together.
fn requeue_after(ready: bool) -> Duration {
    let base = if ready { 1800 } else { 300 };
    jittered(Duration::from_secs(base))
}

/// A group left invalid only because the authorizer did not answer is a
/// transient failure: validated again with the backoff of failures. Any
/// other invalidity waits for a change of the spec.
fn unanswered(status: &ResourceGroupStatus) -> Result<()> {
    match status.conditions.iter().find(|c| c.type_ == VALID) {
        Some(c) if c.reason == reason::AUTHORIZER_UNAVAILABLE => {
            Err(Error::Authorizer(c.message.clone()))
        }
        _ => Ok(()),
    }
}

async fn cleanup(rg: &ResourceGroup, ctx: &Context) -> Result<Action> {
    let Decided {
        g,
        observed,
        plan: p,
        ..
    } = decide(rg, ctx, Unlabelled::Read).await?;
    ctx.metrics.set_drifted(&g.namespace, &g.name, 0);
    write_status(rg, &g, &p.status, None, ctx).await?;
    // Deletion is done as the controller: the members belong to the group
    // being deleted (the garbage collector would remove them too), and the
    // ServiceAccount may already be gone with its namespace.
    match p.finalize {
        Some(Finalize::Delete(targets)) => {
            for t in &targets {
                delete(&As::itself(ctx.client.clone()), &observed, t, true).await?;
                ctx.metrics.wrote("delete");
            }
            Err(Error::Waiting(targets.len()))
        }
        Some(Finalize::Wait(targets)) => Err(Error::Waiting(targets.len())),
        Some(Finalize::Release(releases)) => {
            for r in &releases {
                let Some(c) = observed.cache(&r.target.api_version, &r.target.kind) else {
                    continue;
                };
                let api: Api<DynamicObject> =
                    Api::namespaced_with(ctx.client.clone(), &r.target.namespace, &c.resource);
                let patch: json_patch::Patch = serde_json::from_value(r.patch.clone())
                    .map_err(|e| Error::Finalizer(format!("release patch: {e}")))?;
                api.patch(
                    &r.target.name,
                    &PatchParams::default(),
                    &Patch::<()>::Json(patch),
                )
                .await?;
                ctx.metrics.wrote("release");
            }
            Err(Error::Waiting(releases.len()))
        }
        Some(Finalize::RemoveFinalizer) | None => Ok(Action::await_change()),
    }
}

/// The first cached ResourceQuota of the group's namespace that the
/// pass's creates would exceed (the members with no stored object).
async fn quota_shortfall(
    ctx: &Context,
    g: &GroupRef,
    observed: &Observed,
    p: &Plan,
) -> Result<Option<Shortfall>> {
    let Some(quotas) = &ctx.quotas else {
        return Ok(None);
    };
    let new: Vec<NewObject<'_>> = p
        .apply
        .iter()
        .filter(|d| d.target.uid.is_none())
        .filter_map(|d| {
            let c = observed.cache(&d.target.api_version, &d.target.kind)?;
            Some(NewObject {
                group: &c.resource.group,
                resource: &c.resource.plural,
                object: &d.object,
            })
        })
        .collect();
    if new.is_empty() {
        return Ok(None);
    }
    if !quotas.synced(SYNC_WAIT).await {
        return Err(Error::CacheNotSynced("ResourceQuota".into()));
    }
    Ok(shortfall(&quotas.in_namespace(&g.namespace), &new))
}

/// The admitted member goes into the shared inventory at once (as an
/// admitted write does), so a group validated next sees it.
fn record(ctx: &Context, object: &Value) {
    let Some(key) = ObjectKey::of(object) else {
        return;
    };
    let mut st = ctx.cluster.write();
    let st = &mut *st;
    if st.policies.reads_kind(&key.gk.group, &key.gk.kind) {
        st.pending
            .record(&mut st.inventory, object, ctx.pending_ttl);
    }
}

/// The outcome of a pass's dry runs.
enum DryRun {
    Passed,
    Refused(ObjectRef, Error),
    /// A member assumed absent exists after all, or was refused (perhaps
    /// as a conflict the caches could not show): decide again with reads.
    Unseen,
}

impl DryRun {
    fn refusal(self) -> Option<(ObjectRef, Error)> {
        match self {
            DryRun::Refused(target, e) => Some((target, e)),
            DryRun::Passed | DryRun::Unseen => None,
        }
    }
}

async fn dry_run(client: &As, observed: &Observed, p: &Plan) -> DryRun {
    for d in &p.apply {
        let unseen = ObjectKey::of(&d.object).is_some_and(|k| observed.unseen.contains(&k));
        match server_side_apply(client, observed, d, true).await {
            Ok((o, _)) if unseen && stored(&o) => return DryRun::Unseen,
            Ok(_) => {}
            Err(_) if unseen => return DryRun::Unseen,
            Err(e) => return DryRun::Refused(d.target.clone(), e),
        }
    }
    DryRun::Passed
}

/// A dry-run create answers with an object that has no resourceVersion
/// (nothing was stored); an update, with the stored object's.
fn stored(o: &DynamicObject) -> bool {
    o.metadata
        .resource_version
        .as_deref()
        .is_some_and(|rv| !rv.is_empty())
}

/// The object as the API server stored it (or would, in a dry run), and
/// the resource it was written through.
async fn server_side_apply(
    client: &As,
    observed: &Observed,
    d: &DesiredObject,
    dry_run: bool,
) -> Result<(DynamicObject, kube::api::ApiResource)> {
    let c = observed
        .cache(&d.target.api_version, &d.target.kind)
        .ok_or(Error::Metadata("kind in the cluster"))?;
    let o = client.apply_member(&c.resource, d, dry_run).await?;
    Ok((o, c.resource.clone()))
}

/// Deletes an owned object (only while it has its UID); `foreground`
/// keeps a workload until its Pods are gone.
async fn delete(client: &As, observed: &Observed, t: &ObjectRef, foreground: bool) -> Result<()> {
    let Some(c) = observed.cache(&t.api_version, &t.kind) else {
        return Ok(());
    };
    let dp = DeleteParams {
        propagation_policy: foreground.then_some(PropagationPolicy::Foreground),
        ..DeleteParams::default()
    };
    Ok(client.delete(&c.resource, t, dp).await?)
}

/// The group's KEP-3659 parent label and annotations (so `kubectl` sees it
/// as an ApplySet parent), and the finalizer if it lacks it, by one merge
/// patch only when they differ. The group's version after the patch, if
/// one was made.
async fn write_parent_metadata(
    rg: &ResourceGroup,
    g: &GroupRef,
    p: &Plan,
    ctx: &Context,
) -> Result<Option<String>> {
    let mut desired = p.applyset_parent_metadata(g);
    let stored =
        json!({"metadata": {"labels": rg.metadata.labels, "annotations": rg.metadata.annotations}});
    let add_finalizer = lacks_finalizer(rg);
    if !add_finalizer && !crate::group::diff::needs_apply(&desired, &stored) {
        return Ok(None);
    }
    if add_finalizer {
        // A merge patch replaces the whole list: the resourceVersion makes
        // it fail (409, retried) rather than drop a finalizer added since.
        let mut finalizers = rg.finalizers().to_vec();
        finalizers.push(FINALIZER.to_string());
        desired["metadata"]["finalizers"] = json!(finalizers);
        desired["metadata"]["resourceVersion"] = json!(rg.resource_version());
    }
    let api: Api<ResourceGroup> = Api::namespaced(ctx.client.clone(), &g.namespace);
    let patched = api
        .patch(&g.name, &PatchParams::default(), &Patch::Merge(&desired))
        .await?;
    ctx.metrics.wrote("parent");
    Ok(patched.metadata.resource_version)
}

/// Status through the status subresource, only when it changed: from the
/// stored one, or, while the store is behind this replica's last write of
/// it, from that write. `patched`: the group's version after this pass's
/// metadata patch.
async fn write_status(
    rg: &ResourceGroup,
    g: &GroupRef,
    status: &ResourceGroupStatus,
    patched: Option<String>,
    ctx: &Context,
) -> Result<()> {
    let version = rg.resource_version().unwrap_or_default();
    if rg.status.as_ref() == Some(status) || ctx.written.pending(&g.uid, &version, status) {
        return Ok(());
    }
    let api: Api<ResourceGroup> = Api::namespaced(ctx.client.clone(), &g.namespace);
    let body = json!({"apiVersion": API_VERSION, "kind": KIND, "status": status});
    api.patch_status(
        &g.name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&body),
    )
    .await?;
    ctx.metrics.wrote("status");
    let before = std::iter::once(version).chain(patched).collect();
    ctx.written.wrote(&g.uid, before, status);
    Ok(())
}

/// The reason and message a refused write leaves in status.
fn refusal(e: &Error) -> (&'static str, String) {
    match e {
        Error::Kube(kube::Error::Api(s)) if s.code == 403 => ("Forbidden", s.message.clone()),
        Error::Kube(kube::Error::Api(s)) => ("ApplyFailed", s.message.clone()),
        other => ("ApplyFailed", other.to_string()),
    }
}

/// `d` ± 20%, never in lockstep with other groups.
pub fn jittered(d: Duration) -> Duration {
    crate::cluster::backoff::spread(d)
}

#[cfg(test)]
#[path = "reconcile_tests.rs"]
mod tests;
