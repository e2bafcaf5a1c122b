//! `interlock plan FILE...`: what the controller would do with each
//! ResourceGroup of the files, against the cluster of the current
//! kubeconfig, without writing anything.
//!
//! Decisions, and why:
//! - **The controller's own decision.** The policies' findings come from
//!   `group::validate::spec_findings` over the cluster state the controller
//!   keeps (the same policy loading, watchers and exceptions, the group's
//!   ServiceAccount asked about by `authorizer...check()`), and the members'
//!   fate from the pure `group::plan::plan`. Only the observation differs:
//!   one list per member kind by the group's part-of label and one read per
//!   member not found, instead of the controller's long-lived caches.
//! - **Dry runs as the ServiceAccount.** Each member the plan would write
//!   is applied with `dryRun=All` through the controller's impersonating
//!   client (`cluster::impersonate`), so schema, RBAC and other admission
//!   webhooks answer as they would; an update's changes are the fields in
//!   which the dry run's result differs from the stored object. Prunes are
//!   dry-run deletes. A refusal is recorded as the controller records it.
//! - **Conditions after the apply.** When every dry run passes, the plan is
//!   made again over the members as the dry runs say they would be stored:
//!   those are the conditions the group would settle on (`Ready` included,
//!   from the dry-run objects, which have no status yet).
//! - **Nothing is written**: no apply, no status, no parent metadata.

mod input;
pub mod output;

pub use input::{InputError, InputGroup};

use crate::cel::k8s_authz::Authorizer;
use crate::cluster::authz::SarAuthorizer;
use crate::cluster::impersonate::{impersonator, validate_group, As, VALIDATION_DEADLINE};
use crate::cluster::reload::{self, Sources, Supervisor};
use crate::cluster::{Cluster, ClusterOptions};
use crate::group::crd::{
    applyset_id, Condition, ConditionStatus, GroupFinding, ResourceGroup, API_VERSION, KIND,
    PART_OF_LABEL,
};
use crate::group::member::{parse_member, Scope};
use crate::group::plan::{plan, reason, GroupRef, ObjectRef, Plan, PlanInput, VALID};
use crate::group::preview::{
    action_of, after_apply, changed_fields, id_of, member_id, Action, FieldChange, ObjectId,
};
use crate::group::validate::Writer;
use crate::group::ResourceGroupSpec;
use crate::k8s::kind::{GroupKind, GroupVersionKind};
use crate::k8s::kinds::group_of;
use crate::policy::overrides::Overrides;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams};
use kube::Client;
use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long the cluster state may take to list every kind policies read.
const SYNC_DEADLINE: Duration = Duration::from_secs(60);
/// The uid a group not yet stored is planned with: its members' would-be
/// ownerReference, never the uid of a real object.
const NEW_GROUP_UID: &str = "00000000-0000-0000-0000-000000000000";

/// `plan`'s settings (from its flags).
#[derive(Debug, Clone, Default)]
pub struct PlanOptions {
    /// `-p` paths; empty: the bundled library.
    pub policies: Vec<PathBuf>,
    pub overrides: Overrides,
    /// The files with the groups.
    pub files: Vec<PathBuf>,
}

/// Why `plan` could not answer (exit status 2).
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    Input(Vec<InputError>),
    #[error("policies: {0}")]
    Policies(#[from] crate::policy::load::PolicyLoadError),
    #[error("no cluster to plan against ({0})")]
    NoCluster(String),
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("the cluster state did not sync within {0:?}")]
    NotSynced(Duration),
    #[error("ResourceGroup {0}: the validation took longer than {1:?}")]
    ValidationDeadline(String, Duration),
    #[error(transparent)]
    Impersonation(#[from] crate::cluster::impersonate::ImpersonationError),
}

/// The plan of every group of the files.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub groups: Vec<GroupPlan>,
}

impl Report {
    /// 0: every group would apply cleanly; 1: some group would be refused.
    pub fn exit_code(&self) -> i32 {
        i32::from(self.groups.iter().any(|g| g.refused))
    }
}

/// What the controller would do with one group.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupPlan {
    pub namespace: String,
    pub name: String,
    /// `file:line` of the group.
    pub source: String,
    /// No group of that name is stored yet.
    pub new: bool,
    /// Something would refuse it: a Deny finding, an unusable member, a
    /// conflict or a dry-run refusal.
    pub refused: bool,
    pub members: Vec<MemberPlan>,
    pub findings: Vec<GroupFinding>,
    pub conditions: Vec<Condition>,
}

/// What the controller would do with one member.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MemberPlan {
    pub action: Action,
    pub api_version: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    /// For an update: what the dry run changes.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<FieldChange>,
    /// Why it is refused, in conflict, or was refused by the dry run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Plans every group of `opts.files`.
pub async fn run(opts: &PlanOptions) -> Result<Report, PlanError> {
    let groups = input::read(&opts.files).map_err(PlanError::Input)?;
    let config = kube::Config::infer()
        .await
        .map_err(|e| PlanError::NoCluster(e.to_string()))?;
    let client = Client::try_from(config.clone())?;
    let sources = Sources {
        policies: opts.policies.clone(),
        overrides: opts.overrides.clone(),
        ..Sources::default()
    };
    let (cluster, kinds) = reload::initial(&sources, ClusterOptions::default())?;
    let cluster = Arc::new(cluster);
    let supervisor = Supervisor::start(cluster.clone(), Some(client.clone()), sources, kinds);
    let result = plan_all(&groups, &config, &client, &cluster).await;
    supervisor.shutdown().await;
    result
}

async fn plan_all(
    groups: &[InputGroup],
    config: &kube::Config,
    client: &Client,
    cluster: &Arc<Cluster>,
) -> Result<Report, PlanError> {
    wait_synced(cluster).await?;
    let authorizer: Arc<dyn Authorizer> = Arc::new(SarAuthorizer::new(
        client.clone(),
        tokio::runtime::Handle::current(),
    ));
    let ctx = Ctx {
        impersonator: impersonator(config, client)?,
        client,
        cluster,
        authorizer,
    };
    let mut out = Vec::new();
    for g in groups {
        let namespace = g
            .namespace
            .clone()
            .unwrap_or_else(|| config.default_namespace.clone());
        out.push(ctx.plan_group(g, &namespace).await?);
    }
    Ok(Report { groups: out })
}

async fn wait_synced(cluster: &Cluster) -> Result<(), PlanError> {
    let start = Instant::now();
    while !cluster.is_ready() {
        if start.elapsed() > SYNC_DEADLINE {
            return Err(PlanError::NotSynced(SYNC_DEADLINE));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

struct Ctx<'a> {
    /// Dry runs as a group's ServiceAccount go through it.
    impersonator: Client,
    client: &'a Client,
    cluster: &'a Arc<Cluster>,
    authorizer: Arc<dyn Authorizer>,
}

/// A member kind as the cluster serves it.
#[derive(Clone)]
struct Served {
    resource: ApiResource,
    namespaced: bool,
}

/// What one group's plan was made from.
struct Observed {
    /// How the cluster serves each kind (`None`: not at all).
    kinds: HashMap<GroupVersionKind, Option<Served>>,
    objects: Vec<Value>,
}

impl Observed {
    fn scope(&self, api_version: &str, kind: &str) -> Option<Scope> {
        if api_version == API_VERSION && kind == KIND {
            return Some(Scope::Namespaced);
        }
        let served = self
            .kinds
            .get(&GroupVersionKind::from_api_version(api_version, kind))?
            .as_ref()?;
        Some(if served.namespaced {
            Scope::Namespaced
        } else {
            Scope::Cluster
        })
    }

    /// The resource of a kind by API group (the version may differ).
    fn resource(&self, api_version: &str, kind: &str) -> Option<&ApiResource> {
        let group = group_of(api_version);
        self.kinds
            .iter()
            .find(|(k, _)| k.kind() == kind && k.group() == group)
            .and_then(|(_, s)| s.as_ref())
            .map(|s| &s.resource)
    }
}

/// The dry runs of one plan: the objects as they would be stored, and the
/// first refusal.
#[derive(Default)]
struct DryRun {
    written: Vec<Value>,
    removed: Vec<ObjectId>,
    refused: Option<(ObjectRef, &'static str, String)>,
}

impl Ctx<'_> {
    async fn plan_group(
        &self,
        input: &InputGroup,
        namespace: &str,
    ) -> Result<GroupPlan, PlanError> {
        let api: Api<ResourceGroup> = Api::namespaced(self.client.clone(), namespace);
        let stored = api.get_opt(&input.name).await?;
        let group = group_ref(stored.as_ref(), &input.spec, namespace, &input.name);
        let previous = stored.as_ref().and_then(|s| s.status.as_ref());
        let observed = self.observe(&input.spec, previous, &group).await?;
        let findings = self.findings(&input.spec, &group, &observed).await?;
        let oracle = |v: &str, k: &str| observed.scope(v, k);
        let now = chrono::Utc::now();
        let decide = |objects: &[Value]| {
            plan(&PlanInput {
                group: &group,
                spec: &input.spec,
                previous,
                observed: objects,
                findings: &findings,
                scopes: &oracle,
                now,
            })
        };
        let mut p = decide(&observed.objects);
        let dry = self.dry_run(&input.spec, &group, &observed, &p).await?;
        let members = members(&p, &observed.objects, &dry);
        let conditions = match &dry.refused {
            Some((target, why, message)) => {
                p.record_failure(previous, target, why, message, now);
                p.status.conditions.clone()
            }
            None if p.apply.is_empty() && p.prune.is_empty() => p.status.conditions.clone(),
            None => {
                let after = after_apply(&observed.objects, &dry.written, &dry.removed);
                decide(&after).status.conditions
            }
        };
        Ok(GroupPlan {
            namespace: namespace.to_string(),
            name: input.name.clone(),
            source: input.source.clone(),
            new: stored.is_none(),
            refused: refused(&p, &members),
            members,
            findings,
            conditions,
        })
    }

    /// Discovery of every kind the spec names or the status records, one
    /// list per namespaced kind of the objects carrying the group's part-of
    /// label, and one read of each member not found so (new, or someone
    /// else's: that decides "create" versus "conflict").
    async fn observe(
        &self,
        spec: &ResourceGroupSpec,
        previous: Option<&crate::group::ResourceGroupStatus>,
        g: &GroupRef,
    ) -> Result<Observed, PlanError> {
        let mut wanted: BTreeSet<GroupVersionKind> = spec
            .resources
            .iter()
            .filter_map(GroupVersionKind::of)
            .collect();
        wanted.extend(
            previous.iter().flat_map(|s| s.members.iter()).map(|m| {
                GroupVersionKind::from_api_version(m.api_version.as_str(), m.kind.as_str())
            }),
        );
        let mut o = Observed {
            kinds: HashMap::new(),
            objects: Vec::new(),
        };
        for kind in wanted {
            if kind.api_version() == API_VERSION && kind.kind() == KIND {
                continue;
            }
            let served = self.discover(&kind).await?;
            o.kinds.insert(kind, served);
        }
        let selector = format!("{PART_OF_LABEL}={}", applyset_id(&g.namespace, &g.name));
        let mut listed = BTreeSet::new();
        for served in o.kinds.values().flatten().filter(|s| s.namespaced) {
            if !listed.insert(GroupKind::new(
                served.resource.group.as_str(),
                served.resource.kind.as_str(),
            )) {
                continue;
            }
            let api: Api<DynamicObject> =
                Api::namespaced_with(self.client.clone(), &g.namespace, &served.resource);
            for obj in api.list(&ListParams::default().labels(&selector)).await? {
                o.objects.push(to_json(&obj, &served.resource));
            }
        }
        let found = self.read_unlabelled(spec, g, &o).await?;
        o.objects.extend(found);
        Ok(o)
    }

    async fn discover(&self, kind: &GroupVersionKind) -> Result<Option<Served>, PlanError> {
        let gvk = kube::api::GroupVersionKind::gvk(kind.group(), kind.version(), kind.kind());
        match kube::discovery::pinned_kind(self.client, &gvk).await {
            Ok((resource, caps)) => Ok(Some(Served {
                resource,
                namespaced: matches!(caps.scope, kube::discovery::Scope::Namespaced),
            })),
            Err(kube::Error::Discovery(_)) => Ok(None),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    async fn read_unlabelled(
        &self,
        spec: &ResourceGroupSpec,
        g: &GroupRef,
        o: &Observed,
    ) -> Result<Vec<Value>, PlanError> {
        let oracle = |v: &str, k: &str| o.scope(v, k);
        let known: BTreeSet<ObjectId> = o.objects.iter().filter_map(id_of).collect();
        let mut found = Vec::new();
        for (i, raw) in spec.resources.iter().enumerate() {
            let Ok(m) = parse_member(i, raw, &g.namespace, &oracle, false) else {
                continue;
            };
            let Some(resource) = o.resource(&m.api_version, &m.kind) else {
                continue;
            };
            if id_of(&m.object).is_some_and(|id| known.contains(&id)) {
                continue;
            }
            let api: Api<DynamicObject> =
                Api::namespaced_with(self.client.clone(), &g.namespace, resource);
            if let Some(obj) = api.get_opt(&m.name).await? {
                found.push(to_json(&obj, resource));
            }
        }
        Ok(found)
    }

    /// Every policy on every member, as the controller evaluates them.
    async fn findings(
        &self,
        spec: &ResourceGroupSpec,
        g: &GroupRef,
        o: &Observed,
    ) -> Result<Vec<GroupFinding>, PlanError> {
        let oracle = |v: &str, k: &str| o.scope(v, k);
        let authorizer = Some(&self.authorizer);
        validate_group(self.cluster, g, spec, authorizer, &o.objects, &oracle)
            .await
            .ok_or_else(|| {
                let name = format!("{}/{}", g.namespace, g.name);
                PlanError::ValidationDeadline(name, VALIDATION_DEADLINE)
            })
    }

    /// The plan's applies, then its prunes, as dry runs by the group's
    /// ServiceAccount, in the controller's order, up to the first refusal.
    async fn dry_run(
        &self,
        spec: &ResourceGroupSpec,
        g: &GroupRef,
        o: &Observed,
        p: &Plan,
    ) -> Result<DryRun, PlanError> {
        let mut out = DryRun::default();
        if p.apply.is_empty() && p.prune.is_empty() {
            return Ok(out);
        }
        let writer = Writer {
            namespace: &g.namespace,
            service_account: &spec.service_account_name,
        };
        let client = As::writer(self.impersonator.clone(), &writer)?;
        for d in &p.apply {
            let Some(resource) = o.resource(&d.target.api_version, &d.target.kind) else {
                continue;
            };
            match client.apply_member(resource, d, true).await {
                Ok(obj) => out.written.push(to_json(&obj, resource)),
                Err(e) => {
                    let (why, message) = refusal(&e);
                    out.refused = Some((d.target.clone(), why, message));
                    return Ok(out);
                }
            }
        }
        for t in &p.prune {
            let Some(resource) = o.resource(&t.api_version, &t.kind) else {
                continue;
            };
            match dry_run_delete(&client, resource, t).await {
                Ok(()) => out.removed.extend(id_of(&target_json(t))),
                Err(e) => {
                    let (why, message) = refusal(&e);
                    out.refused = Some((t.clone(), why, message));
                    return Ok(out);
                }
            }
        }
        Ok(out)
    }
}

/// The group as the plan sees it: the stored one's identity when it
/// exists (its generation moved on if the spec changed), else a new one.
fn group_ref(
    stored: Option<&ResourceGroup>,
    spec: &ResourceGroupSpec,
    namespace: &str,
    name: &str,
) -> GroupRef {
    let uid = stored.and_then(|s| s.metadata.uid.clone());
    let generation = stored.map_or(1, |s| {
        let g = s.metadata.generation.unwrap_or(0);
        if &s.spec == spec {
            g
        } else {
            g + 1
        }
    });
    GroupRef {
        namespace: namespace.to_string(),
        name: name.to_string(),
        uid: uid.unwrap_or_else(|| NEW_GROUP_UID.to_string()),
        generation,
        deleting: false,
    }
}

/// Each member of the plan's status with its action (and, for an update,
/// its changes; for a refused dry run, the refusal).
fn members(p: &Plan, observed: &[Value], dry: &DryRun) -> Vec<MemberPlan> {
    let stored: HashMap<ObjectId, &Value> = observed
        .iter()
        .filter_map(|v| Some((id_of(v)?, v)))
        .collect();
    let written: HashMap<ObjectId, &Value> = dry
        .written
        .iter()
        .filter_map(|v| Some((id_of(v)?, v)))
        .collect();
    let refused = dry
        .refused
        .as_ref()
        .map(|(t, _, m)| (id_of(&target_json(t)), m));
    p.status
        .members
        .iter()
        .map(|m| {
            let id = member_id(m);
            let before = stored.get(&id).copied();
            let action = action_of(m, before.is_some());
            let changes = match (action, before, written.get(&id)) {
                (Action::Update, Some(b), Some(a)) => changed_fields(b, a),
                _ => vec![],
            };
            let message = match &refused {
                Some((Some(r), why)) if *r == id => Some(format!("refused by the dry run: {why}")),
                _ => m.message.clone().filter(|_| shows_message(action)),
            };
            MemberPlan {
                action,
                api_version: m.api_version.clone(),
                kind: m.kind.clone(),
                namespace: m.namespace.clone(),
                name: m.name.clone(),
                changes,
                message,
            }
        })
        .collect()
}

/// Actions whose status message says something the action does not.
fn shows_message(action: Action) -> bool {
    matches!(action, Action::Conflict | Action::Refused | Action::Keep)
}

/// Refused: the group is invalid, a member conflicts, or a dry run failed.
fn refused(p: &Plan, members: &[MemberPlan]) -> bool {
    let invalid = p
        .status
        .conditions
        .iter()
        .any(|c| c.type_ == VALID && c.status == ConditionStatus::False);
    let failed = p.status.conditions.iter().any(|c| {
        c.status == ConditionStatus::False
            && matches!(
                c.reason.as_str(),
                "Forbidden" | "ApplyFailed" | reason::CONFLICT
            )
    });
    invalid || failed || members.iter().any(|m| m.action == Action::Conflict)
}

/// The reason and message a refused write leaves in status (as the
/// controller words it).
fn refusal(e: &kube::Error) -> (&'static str, String) {
    match e {
        kube::Error::Api(s) if s.code == 403 => ("Forbidden", s.message.clone()),
        kube::Error::Api(s) => ("ApplyFailed", s.message.clone()),
        other => ("ApplyFailed", other.to_string()),
    }
}

async fn dry_run_delete(
    client: &As,
    resource: &ApiResource,
    t: &ObjectRef,
) -> Result<(), kube::Error> {
    let dp = DeleteParams {
        dry_run: true,
        ..DeleteParams::default()
    };
    client.delete(resource, t, dp).await
}

fn target_json(t: &ObjectRef) -> Value {
    serde_json::json!({"apiVersion": t.api_version, "kind": t.kind,
        "metadata": {"namespace": t.namespace, "name": t.name}})
}

/// The object as JSON with apiVersion and kind (list items lack them).
fn to_json(o: &DynamicObject, r: &ApiResource) -> Value {
    let mut v = serde_json::to_value(o).unwrap_or(Value::Null);
    if let Some(m) = v.as_object_mut() {
        m.insert("apiVersion".into(), r.api_version.clone().into());
        m.insert("kind".into(), r.kind.clone().into());
    }
    v
}
