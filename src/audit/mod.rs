//! `interlock audit`: what is already in the cluster, evaluated once.
//!
//! Admission sees writes; it never sees what was stored before a policy
//! existed, or an object that became wrong when one it references changed.
//! The one-shot audit lists the cluster of the current kubeconfig once and
//! evaluates every object exactly as `check` evaluates a manifest: an
//! offline CREATE (empty uid, so policies that only warn at admission deny
//! here) by a fixed auditor identity, against an inventory of everything
//! listed, with `check`'s report formats and exit codes.
//!
//! Decisions:
//! - A plain paginated list per kind ([`list`]), not the cluster module's
//!   watchers: watchers keep only the fields policies *read* of the kinds
//!   they read, and never end; an audit also needs the whole objects of the
//!   kinds policies *match*, and ends once everything is listed.
//! - Objects evaluated are kept compressed until the inventory is complete
//!   (as `check` does), so a lookup never misses an object listed later.
//! - Every object's source is the file [`SOURCE_FILE`], line 0: the JSON
//!   shape of `check` stays as it is, and the object itself is named in
//!   each result.
//! - `--namespace` narrows what is evaluated and reported, never what is
//!   listed: lookups of a tenant's objects may read other namespaces (a host
//!   claimed twice), as they do at admission.

pub mod list;
pub mod live;
pub mod policy_report;
pub mod write;

use crate::inventory::{Inventory, ObjectKey, Source};
use crate::k8s::kind::GroupKind;
use crate::policy::load::{LoadedPolicies, PolicyLoadError};
use crate::policy::{PolicySet, Request};
use crate::report::{
    Evaluated, Finding, InputError, ObjectRef, RelatedObject, Report, SourceLocation,
};
use rayon::prelude::*;
use serde_json::Value as Json;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;

/// The identity the audit's requests are made as: `check`'s auditor, so a
/// policy that exempts the auditor does so in both.
pub const USER: &str = crate::policy::OFFLINE_USER;

/// The `source.file` of every result: the object came from the cluster.
pub const SOURCE_FILE: &str = "cluster";

#[derive(Debug, Clone, Default)]
pub struct AuditOptions {
    /// Policy files or folders; empty: the bundled library.
    pub policies: Vec<PathBuf>,
    /// Evaluate and report only the objects of these namespaces (a
    /// Namespace counts as in itself); empty: every object, cluster-scoped
    /// ones included.
    pub namespaces: Vec<String>,
    /// Record passing (policy, object) pairs for JUnit.
    pub record_evaluated: bool,
    /// Also store the results as PolicyReports (one per namespace in
    /// scope; a ClusterPolicyReport without `namespaces`), writing only
    /// those that changed.
    pub write_reports: bool,
    /// `--report-format`: PolicyReport, OpenReports, or what the cluster
    /// serves.
    pub report_format: policy_report::FormatChoice,
    /// `--disable` and `--action`.
    pub overrides: crate::policy::overrides::Overrides,
}

impl AuditOptions {
    /// Is an object of `namespace` (empty: cluster-scoped) reported?
    fn in_scope(&self, namespace: &str) -> bool {
        self.namespaces.is_empty() || self.namespaces.iter().any(|n| n == namespace)
    }
}

/// Why the audit could not reach the cluster at all (each is an input
/// error of the report: exit status 2).
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("cannot start the runtime: {0}")]
    Runtime(#[from] std::io::Error),
    #[error("cannot connect to the cluster of the current kubeconfig: {0}")]
    Client(#[source] kube::Error),
    #[error("cannot discover the kinds the cluster serves: {0}")]
    Discovery(#[source] kube::Error),
}

/// Audits the cluster of the current kubeconfig (a CLI call: it runs its
/// own runtime for the listing, then evaluates on every core).
pub fn run(opts: &AuditOptions) -> Report {
    let loaded = match LoadedPolicies::from_paths_with(&opts.policies, &opts.overrides) {
        Ok(l) => l,
        Err(e) => return failed(policy_errors(e, opts)),
    };
    let snapshot = match Snapshot::new(&loaded, opts) {
        Ok(s) => s,
        Err(e) => return failed(policy_errors(e, opts)),
    };
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return failed(vec![cluster_error(AuditError::from(e).to_string())]),
    };
    let listed = rt.block_on(async {
        let client = kube::Client::try_default()
            .await
            .map_err(AuditError::Client)?;
        let snapshot = list::list_cluster(&client, &loaded.policies, snapshot).await?;
        let wide = opts.overrides.exception_namespace();
        let exceptions = crate::cluster::exceptions::list(&client, wide).await;
        Ok::<_, AuditError>((client, snapshot, exceptions))
    });
    let (client, mut snapshot, exceptions) = match listed {
        Ok(l) => l,
        Err(e) => return failed(vec![cluster_error(crate::cluster::api_error::explain(&e))]),
    };
    let mut policies = loaded.policies;
    match exceptions {
        Ok((list, ignored)) => {
            policies.cluster_exceptions = list.into();
            snapshot
                .notices
                .extend(ignored.into_iter().map(cluster_error));
        }
        Err(e) => snapshot.errors.push(cluster_error(format!(
            "cannot list InterlockExceptions: {e}"
        ))),
    }
    let namespaces = snapshot.namespaces.clone();
    let mut report = evaluate(&policies, snapshot, opts);
    // A partial listing would clear results that still hold: write only
    // what a complete audit found.
    if opts.write_reports && report.errors.is_empty() {
        let written = rt.block_on(async {
            let format =
                opts.report_format.resolve(&client).await.map_err(|e| {
                    format!("cannot tell which report kinds the cluster serves: {e}")
                })?;
            let mut reports = policy_report::policy_reports(&report, &namespaces, format);
            if !opts.namespaces.is_empty() {
                // Cluster-scoped objects were not audited.
                reports.retain(|r| r["metadata"]["namespace"].is_string());
            }
            let w = write::write_reports(&client, format, &reports)
                .await
                .map_err(|e| e.to_string())?;
            Ok::<_, String>(format!(
                "{}s: {} written, {} unchanged",
                format.kind(false),
                w.written,
                w.unchanged
            ))
        });
        match written {
            Ok(notice) => report.notices.push(cluster_error(notice)),
            Err(e) => report.errors.push(cluster_error(e)),
        }
        report.sort();
    }
    report
}

/// Whether `v` is an `authorizer...check()` that nobody could answer
/// rather than a violation: a stored object has no requesting user (its
/// writer is gone, and the audit's own identity is not it), so what the
/// policy asks is not a question about this object. Admission and the
/// controller ask kube-apiserver; the audit reports such a result as not
/// evaluable, never as a violation.
pub(crate) fn not_evaluable(v: &crate::policy::Verdict) -> bool {
    v.message.contains(crate::cel::k8s_authz::UNAVAILABLE)
}

/// A verdict on `object` as a result of the report; `name` gives the
/// apiVersion of related objects (the inventory keys them by group).
pub(crate) fn finding(
    v: crate::policy::Verdict,
    object: &ObjectRef,
    name: impl Fn(&ObjectKey) -> ObjectRef,
) -> Finding {
    Finding {
        policy: v.policy,
        binding: v.binding,
        action: v.action,
        object: object.clone(),
        message: v.message,
        source: SourceLocation::at(SOURCE_FILE, 0),
        related: v
            .related
            .iter()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .map(|k| RelatedObject {
                object: name(k),
                source: None,
            })
            .collect(),
        reason: v.reason,
    }
}

fn failed(errors: Vec<InputError>) -> Report {
    let mut r = Report {
        errors,
        ..Report::default()
    };
    r.sort();
    r
}

fn cluster_error(message: String) -> InputError {
    InputError {
        file: SOURCE_FILE.into(),
        line: None,
        column: None,
        message,
    }
}

/// Policy errors as input errors; `file:line: message` is split back into
/// its place when it has one.
fn policy_errors(e: PolicyLoadError, opts: &AuditOptions) -> Vec<InputError> {
    let origin = if opts.policies.is_empty() {
        "<bundled library>".to_string()
    } else {
        opts.policies
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let messages = match e {
        PolicyLoadError::Policies(v) => v,
        other => vec![other.to_string()],
    };
    messages
        .into_iter()
        .map(|m| {
            let mut parts = m.splitn(3, ':');
            match (
                parts.next(),
                parts.next().map(str::parse::<usize>),
                parts.next(),
            ) {
                (Some(file), Some(Ok(line)), Some(rest)) => InputError {
                    file: file.into(),
                    line: Some(line),
                    column: None,
                    message: rest.trim_start().into(),
                },
                _ => InputError {
                    file: origin.clone(),
                    line: None,
                    column: None,
                    message: m,
                },
            }
        })
        .collect()
}

/// One object to evaluate: its reference and its JSON, compressed until
/// every kind is listed.
struct Item {
    object: ObjectRef,
    body: Box<[u8]>,
}

/// What was listed: the inventory lookups read (projected as the policies
/// need) and the objects to evaluate.
pub struct Snapshot {
    inventory: Inventory,
    items: Vec<Item>,
    /// The apiVersion each (group, kind) was listed at, to name related
    /// objects (the inventory keys objects by group and kind only).
    api_versions: HashMap<GroupKind, String>,
    scope: AuditOptions,
    /// The namespaces listed that are in scope (each gets a PolicyReport).
    namespaces: BTreeSet<String>,
    pub errors: Vec<InputError>,
    pub notices: Vec<InputError>,
}

impl Snapshot {
    pub fn new(loaded: &LoadedPolicies, opts: &AuditOptions) -> Result<Snapshot, PolicyLoadError> {
        Ok(Snapshot {
            inventory: loaded.inventory()?,
            items: Vec::new(),
            api_versions: HashMap::new(),
            scope: opts.clone(),
            namespaces: BTreeSet::new(),
            errors: Vec::new(),
            notices: Vec::new(),
        })
    }

    /// Adds one listed object: to the inventory when some policy `read`s
    /// its kind, to the objects to evaluate when some policy may `match`
    /// it and it is in scope.
    pub fn add(&mut self, mut object: Json, read: bool, matched: bool) {
        // Bookkeeping, never the object's state; large on every object.
        if let Some(meta) = object.get_mut("metadata").and_then(Json::as_object_mut) {
            meta.remove("managedFields");
        }
        let field = |p: &str| object.pointer(p).and_then(Json::as_str).unwrap_or("");
        let (api_version, kind) = (field("/apiVersion"), field("/kind"));
        let (namespace, name) = (field("/metadata/namespace"), field("/metadata/name"));
        let group = crate::k8s::kinds::group_of(api_version);
        self.api_versions
            .entry(GroupKind::new(group, kind))
            .or_insert_with(|| api_version.to_string());
        let is_namespace = group.is_empty() && kind == "Namespace";
        let scope_ns = if is_namespace { name } else { namespace };
        if is_namespace && self.scope.in_scope(name) {
            self.namespaces.insert(name.to_string());
        }
        if matched && self.scope.in_scope(scope_ns) {
            let object_ref = ObjectRef {
                api_version: api_version.to_string(),
                kind: kind.to_string(),
                namespace: (!namespace.is_empty()).then(|| namespace.to_string()),
                name: name.to_string(),
            };
            // Serialising a `serde_json::Value` cannot fail (string keys only).
            let json = serde_json::to_vec(&object).unwrap_or_default();
            self.items.push(Item {
                object: object_ref,
                body: lz4_flex::block::compress_prepend_size(&json).into_boxed_slice(),
            });
        }
        if !read {
            return;
        }
        match self.inventory.prepare(&object) {
            Ok(p) => {
                let source = Source {
                    file: SOURCE_FILE.into(),
                    line: 0,
                };
                // A key expression that fails on one live object is worth
                // knowing, but it is not the auditor's input error: a
                // notice, so one odd object does not fail every audit.
                for e in self.inventory.insert(p, Some(source)) {
                    self.notices.push(cluster_error(e.to_string()));
                }
            }
            Err(e) => tracing::warn!(api_version, kind, namespace, name, error = %e,
                "listed object not added to the inventory"),
        }
    }

    /// How many objects are to be evaluated.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    fn object_ref(&self, key: &ObjectKey) -> ObjectRef {
        let api_version = self
            .api_versions
            .get(&key.gk)
            .cloned()
            .unwrap_or_else(|| key.gk.group.to_string());
        ObjectRef {
            api_version,
            kind: key.gk.kind.to_string(),
            namespace: (!key.namespace.is_empty()).then(|| key.namespace.to_string()),
            name: key.name.to_string(),
        }
    }
}

/// Evaluates every object of `snapshot` against `policies`, as `check`
/// evaluates a manifest's objects.
pub fn evaluate(policies: &PolicySet, snapshot: Snapshot, opts: &AuditOptions) -> Report {
    let mut report = Report {
        objects: snapshot.items.len(),
        policies: policies.len(),
        policy_names: policies.policies.iter().map(|p| p.name.clone()).collect(),
        errors: snapshot.errors.clone(),
        notices: snapshot.notices.clone(),
        ..Report::default()
    };
    let source = SourceLocation::at(SOURCE_FILE, 0);
    type PerObject = (Vec<Finding>, Vec<Evaluated>, Vec<String>);
    let per_object: Vec<PerObject> = snapshot
        .items
        .par_iter()
        .map(|it| {
            // The bytes were compressed from serde_json's own output.
            let value: Option<Json> = lz4_flex::block::decompress_size_prepended(&it.body)
                .ok()
                .and_then(|b| serde_json::from_slice(&b).ok());
            let Some(mut request) = value.as_ref().and_then(|v| Request::create(v, USER)) else {
                return (vec![], vec![], vec![]);
            };
            // The cluster's object: validationActions, not checkActions.
            request.live = true;
            let verdicts = policies.evaluate(&request, &snapshot.inventory).verdicts;
            let (unevaluable, verdicts): (Vec<_>, Vec<_>) =
                verdicts.into_iter().partition(not_evaluable);
            let findings = verdicts
                .into_iter()
                .map(|v| finding(v, &it.object, |k| snapshot.object_ref(k)))
                .collect();
            let mut unevaluable: Vec<String> = unevaluable.into_iter().map(|v| v.policy).collect();
            unevaluable.sort();
            unevaluable.dedup();
            // JUnit lists a test case only where a policy applies.
            let evaluated = if opts.record_evaluated {
                policies
                    .applying_to(&request, &snapshot.inventory)
                    .map(|p| Evaluated {
                        policy: p.name.clone(),
                        object: it.object.clone(),
                        source: source.clone(),
                    })
                    .collect()
            } else {
                vec![]
            };
            (findings, evaluated, unevaluable)
        })
        .collect();
    let mut unevaluable: BTreeMap<String, usize> = BTreeMap::new();
    for (findings, evaluated, policies) in per_object {
        report.results.extend(findings);
        report.evaluated.extend(evaluated);
        for p in policies {
            *unevaluable.entry(p).or_default() += 1;
        }
    }
    report
        .notices
        .extend(unevaluable.into_iter().map(|(policy, n)| {
            cluster_error(format!(
                "policy {policy}: not evaluable in audit for {n} object(s): it calls authorizer...check(), and a stored object has no requesting user to ask about (admission and the controller ask kube-apiserver); not counted as violations"
            ))
        }));
    if report.errors.is_empty() && policies.is_empty() {
        report.errors.push(InputError {
            file: "<policies>".into(),
            line: None,
            column: None,
            message: "no policies were loaded: nothing was audited".into(),
        });
    }
    report.sort();
    report
}

#[cfg(test)]
mod tests;
