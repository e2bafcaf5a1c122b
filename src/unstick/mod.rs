//! `interlock unstick`: objects stuck in deletion, who is expected to remove
//! each finalizer, whether that controller looks alive, and what still
//! blocks it; `--clear` removes exactly one finalizer, guarded by the
//! object's resourceVersion. Read-only unless `--clear ... --yes`.
//!
//! A front-end over the API (kube and k8s/ only): the runbook is
//! docs/finalizers.md, the rules it states are in [`explain`].
//!
//! Exit codes: 0 nothing stuck / finalizer cleared; 1 stuck objects listed;
//! 2 usage or API error; 3 clear refused (object changed since the given
//! resourceVersion, finalizer not on it, or it is not being deleted).

pub mod explain;

use crate::k8s::kind::NamespacedName;
use chrono::Utc;
use explain::Remover;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use kube::discovery::{verbs, ApiCapabilities, ApiResource, Discovery, Scope};
use kube::Client;
use serde::Serialize;
use serde_json::Value as Json;
use std::collections::{BTreeMap, HashMap};

/// What `interlock unstick` is asked (the command line's flags, parsed).
#[derive(Debug, Clone)]
pub struct UnstickOptions {
    /// Only this namespace (and the Namespace object itself).
    pub namespace: Option<String>,
    /// Every namespace, and cluster-scoped objects.
    pub all_namespaces: bool,
    /// Only deletions older than this (90s, 15m, 1h30m, 2d).
    pub older_than: String,
    /// Output format.
    pub output: String,
    /// Remove this finalizer from TARGET (with --yes).
    pub clear: Option<String>,
    /// Confirm --clear: without it nothing is written.
    pub yes: bool,
    /// The resourceVersion the clear is for (as listed); default: the
    /// current one. If the object changed since, the clear is refused.
    pub resource_version: Option<String>,
    /// Namespace of the Interlock controller's leader-election Lease.
    pub lease_namespace: String,
    /// Name of the Interlock controller's leader-election Lease.
    pub lease_name: String,
    /// KIND/NAME of the object to clear (kind, plural or singular name).
    pub target: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Usage(String),
    #[error("the API server: {0}")]
    Kube(#[from] kube::Error),
    #[error("refused: {0}")]
    Refused(String),
}

impl Error {
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Usage(_) | Error::Kube(_) => 2,
            Error::Refused(_) => 3,
        }
    }
}

/// One finalizer of a stuck object.
#[derive(Debug, Serialize)]
pub struct Finalizer {
    pub name: String,
    pub remover: Remover,
    /// `running (...)`, `controller not running (...)` or `unknown`.
    pub controller_status: String,
}

/// One object stuck in deletion.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Stuck {
    pub api_version: String,
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
    pub resource_version: String,
    pub deleting_for_seconds: i64,
    pub finalizers: Vec<Finalizer>,
    /// What still holds it: dependents, namespace contents, conditions.
    pub blocked_by: Vec<String>,
}

/// Runs the command; the exit code as documented above.
pub async fn run(args: &UnstickOptions) -> Result<i32, Error> {
    let client = Client::try_default().await?;
    match (&args.clear, &args.target) {
        (Some(f), Some(t)) => clear(&client, args, f, t).await,
        (None, Some(_)) => Err(Error::Usage("a TARGET is only taken with --clear".into())),
        _ => {
            let older = crate::k8s::duration::parse(&args.older_than)
                .map_err(|e| Error::Usage(format!("--older-than: {e}")))?
                .as_secs();
            let stuck = list(&client, args, older as i64).await?;
            print(args, &stuck);
            Ok(i32::from(!stuck.is_empty()))
        }
    }
}

fn print(args: &UnstickOptions, stuck: &[Stuck]) {
    if args.output == "json" {
        let body = serde_json::json!({"stuck": stuck});
        println!(
            "{}",
            serde_json::to_string_pretty(&body).unwrap_or_default()
        );
        return;
    }
    if stuck.is_empty() {
        println!("nothing stuck in deletion longer than {}", args.older_than);
        return;
    }
    for s in stuck {
        let ns = s
            .namespace
            .as_deref()
            .map(|n| format!(" -n {n}"))
            .unwrap_or_default();
        println!(
            "{}/{}{ns}: deleting for {} (resourceVersion {})",
            s.kind,
            s.name,
            explain::human_age(s.deleting_for_seconds),
            s.resource_version
        );
        for f in &s.finalizers {
            println!(
                "  finalizer {}: removed by {} ({}); {}; waits for: {}",
                f.name,
                f.remover.controller,
                f.remover.source,
                f.controller_status,
                f.remover.waits_for
            );
        }
        for b in &s.blocked_by {
            println!("  blocked by: {b}");
        }
    }
}

/// The resources to look in: every listable kind discovery serves.
async fn resources(client: &Client) -> Result<Vec<(ApiResource, ApiCapabilities)>, Error> {
    let discovery = Discovery::new(client.clone()).run().await?;
    Ok(discovery
        .groups()
        .flat_map(|g| g.recommended_resources())
        .filter(|(_, caps)| caps.supports_operation(verbs::LIST))
        .collect())
}

async fn list(client: &Client, args: &UnstickOptions, older: i64) -> Result<Vec<Stuck>, Error> {
    let now = Utc::now();
    let only_ns = if args.all_namespaces {
        None
    } else {
        Some(
            args.namespace
                .clone()
                .unwrap_or_else(|| client.default_namespace().to_string()),
        )
    };
    let mut stuck = Vec::new();
    // Dependents that hold an owner's foreground deletion, by owner uid.
    let mut blocking: HashMap<String, Vec<String>> = HashMap::new();
    // What is left in each namespace, by kind.
    let mut contents: HashMap<String, BTreeMap<String, usize>> = HashMap::new();
    for (ar, caps) in resources(client).await? {
        let namespaced = matches!(caps.scope, Scope::Namespaced);
        // With -n, the only cluster-scoped object of interest is the
        // Namespace itself.
        if only_ns.is_some() && !namespaced && ar.kind != "Namespace" {
            continue;
        }
        let api: Api<DynamicObject> = match (&only_ns, namespaced) {
            (Some(ns), true) => Api::namespaced_with(client.clone(), ns, &ar),
            _ => Api::all_with(client.clone(), &ar),
        };
        let items = match api.list_metadata(&ListParams::default()).await {
            Ok(l) => l.items,
            // A kind this user may not list (or an aggregated API that is
            // down) leaves the others worth listing.
            Err(e) => {
                tracing::warn!(kind = %ar.kind, group = %ar.group, error = %e, "cannot list; skipped");
                continue;
            }
        };
        for item in items {
            let meta = serde_json::to_value(&item.metadata).unwrap_or(Json::Null);
            let name = item.metadata.name.clone().unwrap_or_default();
            let namespace = item.metadata.namespace.clone();
            if ar.kind == "Namespace" {
                if let Some(ns) = &only_ns {
                    if &name != ns {
                        continue;
                    }
                }
            }
            if let Some(ns) = &namespace {
                *contents
                    .entry(ns.clone())
                    .or_default()
                    .entry(ar.kind.clone())
                    .or_default() += 1;
            }
            for r in item.metadata.owner_references.iter().flatten() {
                if r.block_owner_deletion == Some(true) {
                    blocking
                        .entry(r.uid.clone())
                        .or_default()
                        .push(format!("{}/{name}", ar.kind));
                }
            }
            let Some(age) = explain::deleting_for(&meta, now) else {
                continue;
            };
            if age < older {
                continue;
            }
            let mut finalizers: Vec<String> = item.metadata.finalizers.clone().unwrap_or_default();
            if ar.kind == "Namespace" {
                finalizers.extend(namespace_finalizers(client, &name).await);
            }
            stuck.push((ar.clone(), meta, name, namespace, age, finalizers));
        }
    }
    let mut leases: HashMap<NamespacedName, String> = HashMap::new();
    let mut out = Vec::new();
    for (ar, meta, name, namespace, age, finalizers) in stuck {
        let mut reports = Vec::new();
        for f in finalizers {
            let mut remover = explain::remover(&f, &meta);
            let lease = if f == explain::INTERLOCK_FINALIZER {
                Some(NamespacedName::new(
                    args.lease_namespace.as_str(),
                    args.lease_name.as_str(),
                ))
            } else {
                remover.lease.map(|(n, l)| NamespacedName::new(n, l))
            };
            remover.lease = None;
            let controller_status = match lease {
                Some(key) => {
                    if !leases.contains_key(&key) {
                        let s = liveness(client, &key.namespace, &key.name).await;
                        leases.insert(key.clone(), s);
                    }
                    leases[&key].clone()
                }
                None => "unknown".into(),
            };
            reports.push(Finalizer {
                name: f,
                remover,
                controller_status,
            });
        }
        let uid = meta.get("uid").and_then(Json::as_str).unwrap_or_default();
        let mut blocked_by: Vec<String> = blocking
            .get(uid)
            .into_iter()
            .flatten()
            .map(|d| format!("dependent {d} (blockOwnerDeletion)"))
            .collect();
        if ar.kind == "Namespace" {
            if let Some(kinds) = contents.get(&name) {
                let left: Vec<String> = kinds.iter().map(|(k, n)| format!("{n} {k}")).collect();
                blocked_by.push(format!("namespace still holds {}", left.join(", ")));
            }
        }
        out.push(Stuck {
            api_version: ar.api_version.clone(),
            kind: ar.kind.clone(),
            namespace,
            name,
            resource_version: meta
                .get("resourceVersion")
                .and_then(Json::as_str)
                .unwrap_or_default()
                .to_string(),
            deleting_for_seconds: age,
            finalizers: reports,
            blocked_by,
        });
    }
    Ok(out)
}

/// `spec.finalizers` of a Namespace (not in metadata, so not in the list).
async fn namespace_finalizers(client: &Client, name: &str) -> Vec<String> {
    let api: Api<Namespace> = Api::all(client.clone());
    match api.get_opt(name).await {
        Ok(Some(ns)) => ns.spec.and_then(|s| s.finalizers).unwrap_or_default(),
        _ => vec![],
    }
}

/// Whether the controller holding Lease `ns/name` renewed it within its
/// duration: the only liveness signal the API shows for any controller.
async fn liveness(client: &Client, ns: &str, name: &str) -> String {
    let api: Api<Lease> = Api::namespaced(client.clone(), ns);
    let spec = match api.get_opt(name).await {
        Ok(Some(l)) => l.spec.unwrap_or_default(),
        Ok(None) => return format!("controller not running (no Lease {ns}/{name})"),
        Err(e) => return format!("unknown (cannot read Lease {ns}/{name}: {e})"),
    };
    let Some(renewed) = spec.renew_time else {
        return format!("controller not running (Lease {ns}/{name} never renewed)");
    };
    let now = k8s_openapi::jiff::Timestamp::now();
    let ago = (now - renewed.0).get_seconds();
    let duration = i64::from(spec.lease_duration_seconds.unwrap_or(15));
    if ago <= duration {
        format!("running (Lease {ns}/{name} renewed {}s ago)", ago.max(0))
    } else {
        format!(
            "controller not running (Lease {ns}/{name} last renewed {} ago)",
            explain::human_age(ago)
        )
    }
}

/// Finds the resource of `kind` (Kind, plural or singular, any case).
async fn resolve(client: &Client, kind: &str) -> Result<(ApiResource, ApiCapabilities), Error> {
    let k = kind.to_ascii_lowercase();
    resources(client)
        .await?
        .into_iter()
        .find(|(ar, _)| ar.kind.to_ascii_lowercase() == k || ar.plural == k)
        .ok_or_else(|| Error::Usage(format!("the cluster serves no kind '{kind}'")))
}

async fn clear(
    client: &Client,
    args: &UnstickOptions,
    finalizer: &str,
    target: &str,
) -> Result<i32, Error> {
    let (kind, name) = target
        .split_once('/')
        .filter(|(k, n)| !k.is_empty() && !n.is_empty())
        .ok_or_else(|| Error::Usage(format!("'{target}': expected KIND/NAME")))?;
    if finalizer == explain::NAMESPACE_FINALIZER {
        return Err(Error::Usage(
            "the namespace finalizer is in spec.finalizers and only the namespace controller \
             should remove it: delete what the namespace still holds instead (docs/finalizers.md)"
                .into(),
        ));
    }
    let (ar, caps) = resolve(client, kind).await?;
    let api: Api<DynamicObject> = if matches!(caps.scope, Scope::Namespaced) {
        let ns = args
            .namespace
            .clone()
            .unwrap_or_else(|| client.default_namespace().to_string());
        Api::namespaced_with(client.clone(), &ns, &ar)
    } else {
        Api::all_with(client.clone(), &ar)
    };
    let obj = api.get(name).await?;
    let meta = serde_json::to_value(&obj.metadata).unwrap_or(Json::Null);
    let what = format!("{}/{name}", ar.kind);
    if obj.metadata.deletion_timestamp.is_none() {
        return Err(Error::Refused(format!(
            "{what} is not being deleted; unstick only clears finalizers of stuck deletions"
        )));
    }
    let finalizers = obj.metadata.finalizers.clone().unwrap_or_default();
    let Some(index) = finalizers.iter().position(|f| f == finalizer) else {
        return Err(Error::Refused(format!(
            "{what} does not carry finalizer {finalizer} (it has: {})",
            finalizers.join(", ")
        )));
    };
    let current = obj.metadata.resource_version.clone().unwrap_or_default();
    let rv = args.resource_version.clone().unwrap_or(current);
    let remover = explain::remover(finalizer, &meta);
    let others: Vec<&String> = finalizers.iter().filter(|f| *f != finalizer).collect();
    println!(
        "{what}: clearing finalizer {finalizer} (expected remover: {})",
        remover.controller
    );
    println!(
        "clearing means: {}",
        explain::clearing_means(finalizer, &remover)
    );
    if others.is_empty() {
        println!("no other finalizer holds it: the API server deletes it at once");
    } else {
        let others: Vec<&str> = others.iter().map(|s| s.as_str()).collect();
        println!("it still holds: {}", others.join(", "));
    }
    if !args.yes {
        println!("nothing changed: add --yes to clear");
        return Err(Error::Usage("--clear needs --yes".into()));
    }
    let patch: json_patch::Patch =
        serde_json::from_value(explain::clear_patch(finalizer, index, &rv))
            .map_err(|e| Error::Usage(format!("internal: clear patch: {e}")))?;
    match api.patch(name, &PatchParams::default(), &Patch::<()>::Json(patch)).await {
        Ok(_) => {
            tracing::info!(object = %what, finalizer, resource_version = %rv, "finalizer cleared");
            println!("cleared {finalizer} from {what}");
            Ok(0)
        }
        // A failed `test` op is 422; 409 is a conflict on the write itself.
        Err(kube::Error::Api(s)) if s.code == 422 || s.code == 409 => Err(Error::Refused(format!(
            "{what} changed since resourceVersion {rv} ({}): list it again and re-check before clearing",
            s.message
        ))),
        Err(e) => Err(e.into()),
    }
}

/// The command line's entry: runs on its own runtime, prints the error.
pub fn main(args: &UnstickOptions) -> i32 {
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("interlock: cannot start the runtime: {e}");
            return 2;
        }
    };
    match rt.block_on(run(args)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("interlock unstick: {e}");
            e.exit_code()
        }
    }
}
