//! Policies and `--inventory` files into the cluster state: loaded and
//! compiled outside the lock, swapped in inside it, and reloaded when the
//! files change. [`Supervisor`] owns the watchers and the reload loop of a
//! long-running process and shuts them down.

use super::policy_objects::{self, Feeds, ObjectOptions};
use super::watch::Watchers;
use super::Cluster;
use crate::inventory::{Inventory, Prepared, Source};
use crate::k8s::kind::GroupVersionKind;
use crate::manifest::{self, LoadOptions};
use crate::policy::load::{LoadedPolicies, PolicyLoadError};
use crate::policy::objects::{Ledger, ObjectDoc};
use crate::policy::overrides::Overrides;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use serde_json::Value as Json;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;

/// What /metrics shows of policy loading (handles share their values).
#[derive(Clone, Default)]
pub struct ReloadMetrics {
    loaded: Gauge,
    failures: Counter,
}

impl ReloadMetrics {
    /// Registers `policies_loaded` and `policy_reload_failures`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "policies_loaded",
            "Policies serving now (the last set that loaded)",
            self.loaded.clone(),
        );
        registry.register(
            "policy_reload_failures",
            "Policy file changes refused (the previous policies kept serving)",
            self.failures.clone(),
        );
    }

    pub(super) fn loaded(&self, n: usize) {
        self.loaded.set(i64::try_from(n).unwrap_or(i64::MAX));
    }
}

/// The policies of `-p` paths, or the bundled library when none; an
/// empty set is refused unless `allow_empty`.
pub fn load(sources: &Sources) -> Result<LoadedPolicies, PolicyLoadError> {
    let loaded = LoadedPolicies::from_paths_with(&sources.policies, &sources.overrides)?;
    refuse_empty(loaded, sources)
}

/// [`load`] with the cluster's InterlockPolicy objects beside the files;
/// also the status each object should have.
fn load_with_objects(
    sources: &Sources,
    objects: &BTreeMap<String, ObjectDoc>,
    ledger: &mut Ledger,
) -> Result<(LoadedPolicies, BTreeMap<String, Json>), PolicyLoadError> {
    let (loaded, statuses) =
        LoadedPolicies::with_objects(&sources.policies, &sources.overrides, objects, ledger)?;
    Ok((refuse_empty(loaded, sources)?, statuses))
}

fn refuse_empty(
    loaded: LoadedPolicies,
    sources: &Sources,
) -> Result<LoadedPolicies, PolicyLoadError> {
    if loaded.policies.is_empty() && !sources.allow_empty {
        let paths: Vec<String> = sources
            .policies
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        return Err(PolicyLoadError::Empty(paths.join(", ")));
    }
    Ok(loaded)
}

impl Cluster {
    /// Swaps in `loaded` (and `objects`, prepared for it, when given):
    /// indexes reconciled to its declarations, the projection changed, a
    /// re-list requested when the policies read more than is kept. Returns
    /// whether the projection changed.
    pub fn install(
        &self,
        loaded: LoadedPolicies,
        objects: Option<Vec<(Prepared, Source)>>,
    ) -> Result<bool, PolicyLoadError> {
        self.update(|st| {
            st.inventory.set_indexes(&loaded.indexes)?;
            let changed = *st.inventory.projection() != loaded.projection;
            st.inventory.set_projection(loaded.projection);
            // The cluster's exceptions come from their watcher, not the files.
            let exceptions = std::mem::take(&mut st.policies.cluster_exceptions);
            st.policies = loaded.policies;
            st.policies.cluster_exceptions = exceptions;
            self.reloads.loaded(st.policies.len());
            if changed {
                self.relist_all();
            }
            for (p, source) in objects.into_iter().flatten() {
                st.inventory.insert(p, Some(source));
            }
            Ok(changed)
        })
    }
}

/// Reads objects from files, each projected for `shape` on the thread that
/// parsed it (`serve --inventory`), so the parsed files are never all in
/// memory at once.
pub fn prepare_files(
    shape: &Inventory,
    paths: &[PathBuf],
) -> Result<Vec<(Prepared, Source)>, PolicyLoadError> {
    let (prepared, errors) = manifest::load_paths_map(paths, &LoadOptions::default(), |d| {
        (shape.prepare(&d.value), Source::of(&d))
    });
    if let Some(e) = errors.first() {
        return Err(PolicyLoadError::Inventory(e.to_string()));
    }
    prepared
        .into_iter()
        .map(|(p, s)| {
            p.map(|p| (p, s.clone()))
                .map_err(|e| PolicyLoadError::Inventory(format!("{}:{}: {e}", s.file, s.line)))
        })
        .collect()
}

/// Loads objects from files into an inventory.
pub fn inventory_from_files(
    inventory: &mut Inventory,
    paths: &[PathBuf],
) -> Result<(), PolicyLoadError> {
    for (p, source) in prepare_files(inventory, paths)? {
        inventory.insert(p, Some(source));
    }
    Ok(())
}

/// Where a long-running process takes its policies and inventory from.
#[derive(Debug, Clone, Default)]
pub struct Sources {
    /// `-p` paths; empty: the bundled library (never reloaded).
    pub policies: Vec<PathBuf>,
    /// `--inventory` paths; empty: watch the cluster.
    pub inventory: Vec<PathBuf>,
    /// Accept a policy set with no policy (otherwise refused: a webhook
    /// that enforces nothing should be a decision, not an accident).
    pub allow_empty: bool,
    /// `--disable` and `--action`.
    pub overrides: Overrides,
    /// `--cluster-policies`: InterlockPolicy objects beside the files.
    pub objects: Option<ObjectOptions>,
}

impl Sources {
    /// The files whose changes reload the policies: the `-p` paths (the
    /// bundled library never changes) and the `--policy-config` file.
    pub fn reloaded_files(&self) -> Vec<PathBuf> {
        self.policies
            .iter()
            .chain(&self.overrides.config)
            .cloned()
            .collect()
    }
}

/// Builds the cluster state from `sources`: policies loaded, `--inventory`
/// files read (then ready at once) or nothing yet (ready once watched).
pub fn initial(
    sources: &Sources,
    options: super::ClusterOptions,
) -> Result<(Cluster, Vec<GroupVersionKind>), PolicyLoadError> {
    let loaded = load(sources)?;
    tracing::info!(policies = loaded.policies.len(), "policies loaded");
    let kinds = loaded.kinds();
    let mut inventory = loaded.inventory()?;
    if !sources.inventory.is_empty() {
        inventory_from_files(&mut inventory, &sources.inventory)?;
    }
    let cluster = Cluster::new(loaded.policies, inventory, options);
    if !sources.inventory.is_empty() {
        cluster.set_ready(true);
    }
    Ok((cluster, kinds))
}

/// The watchers, the policy reload loop and the watch of the cluster's
/// exceptions of one process.
pub struct Supervisor {
    task: Option<JoinHandle<()>>,
    exceptions: Option<JoinHandle<()>>,
    /// The policy objects' watch, Lease campaign and status writer.
    objects: Vec<JoinHandle<()>>,
}

impl Supervisor {
    /// Starts watching `kinds` (when there is a client) and reloading the
    /// policy files of `sources`.
    pub fn start(
        cluster: Arc<Cluster>,
        client: Option<kube::Client>,
        sources: Sources,
        kinds: Vec<GroupVersionKind>,
    ) -> Supervisor {
        let exceptions = client.clone().map(|c| {
            let wide = sources.overrides.exception_namespace().to_string();
            tokio::spawn(super::exceptions::watch(c, cluster.clone(), wide))
        });
        let (objects, feeds) = match (client.clone(), sources.objects.clone()) {
            (Some(c), Some(o)) => {
                // Not ready before the objects are in force (or while the
                // kind is not served: the flag says they are wanted).
                cluster.hold(&policy_objects::kind());
                let (tasks, feeds) = policy_objects::start(c, cluster.clone(), o);
                (tasks, Some(feeds))
            }
            _ => (Vec::new(), None),
        };
        let mut watchers = client.map(|c| Watchers::new(c, cluster.clone()));
        if let Some(w) = &mut watchers {
            w.set_kinds(&kinds);
        }
        let task = tokio::spawn(reload_loop(cluster, sources, watchers, feeds));
        Supervisor {
            task: Some(task),
            exceptions,
            objects,
        }
    }

    /// Stops the reload loop and every watcher.
    pub async fn shutdown(mut self) {
        let tasks = [self.task.take(), self.exceptions.take()]
            .into_iter()
            .flatten()
            .chain(std::mem::take(&mut self.objects));
        for task in tasks {
            task.abort();
            let _ = task.await;
        }
    }
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        for task in self
            .task
            .iter()
            .chain(&self.exceptions)
            .chain(&self.objects)
        {
            task.abort();
        }
    }
}

/// The contents of every file under `paths`, by path. Symlinks are
/// followed (kubelet swaps a ConfigMap's files through `..data`), and a
/// symlink cycle ends the walk of that branch instead of looping.
fn fingerprint(paths: &[PathBuf]) -> HashMap<PathBuf, Vec<u8>> {
    let files = paths
        .iter()
        .flat_map(|p| walkdir::WalkDir::new(p).follow_links(true))
        .flatten()
        .filter(|e| !e.file_type().is_dir());
    files
        .filter_map(|e| Some((e.path().to_path_buf(), std::fs::read(e.path()).ok()?)))
        .collect()
}

/// Polls the policy files (kubelet swaps ConfigMap files through a symlink,
/// so contents are compared, not events watched) and follows the policy
/// objects' snapshots. A set that does not compile is rejected and the
/// previous one keeps serving.
async fn reload_loop(
    cluster: Arc<Cluster>,
    sources: Sources,
    mut watchers: Option<Watchers>,
    mut feeds: Option<Feeds>,
) {
    let watched = sources.reloaded_files();
    let mut last = fingerprint(&watched);
    let mut ledger = Ledger::default();
    let mut objects_in_force = false;
    loop {
        tokio::select! {
            () = tokio::time::sleep(Duration::from_secs(3)), if !watched.is_empty() => {
                let now = fingerprint(&watched);
                if now == last {
                    continue;
                }
                last = now;
            }
            listed = next_snapshot(&mut feeds) => if !listed { continue },
        }
        let snapshot = feeds.as_ref().and_then(|f| f.specs.borrow().clone());
        let outcome = tokio::task::block_in_place(|| match &snapshot {
            Some(objects) => {
                let (loaded, statuses) = load_with_objects(&sources, objects, &mut ledger)?;
                let installed = install_loaded(&cluster, &sources, loaded)?;
                // Only a set in force is reported as such.
                if let Some(f) = &feeds {
                    f.desired.send_replace(Arc::new(statuses));
                }
                Ok(installed)
            }
            None => reload(&cluster, &sources),
        });
        match outcome {
            Ok((kinds, changed)) => {
                tracing::info!(
                    projection_changed = changed,
                    objects = snapshot.as_ref().map(|s| s.len()),
                    "policies reloaded"
                );
                if let Some(w) = &mut watchers {
                    w.set_kinds(&kinds);
                }
                if snapshot.is_some() && !objects_in_force {
                    objects_in_force = true;
                    cluster.synced(&policy_objects::kind());
                }
            }
            Err(e) => {
                cluster.reloads.failures.inc();
                tracing::error!(error = %e, "policy change rejected; the previous policies keep serving")
            }
        }
    }
}

/// Waits for a new snapshot of the policy objects (forever without them);
/// false when the watch has ended.
async fn next_snapshot(feeds: &mut Option<Feeds>) -> bool {
    match feeds {
        Some(f) => {
            if f.specs.changed().await.is_err() {
                *feeds = None;
                return false;
            }
            true
        }
        None => std::future::pending().await,
    }
}

/// One reload: everything slow happens before the swap.
fn reload(
    cluster: &Cluster,
    sources: &Sources,
) -> Result<(Vec<GroupVersionKind>, bool), PolicyLoadError> {
    install_loaded(cluster, sources, load(sources)?)
}

/// Swaps in policies loaded outside the lock.
fn install_loaded(
    cluster: &Cluster,
    sources: &Sources,
    loaded: LoadedPolicies,
) -> Result<(Vec<GroupVersionKind>, bool), PolicyLoadError> {
    let kinds = loaded.kinds();
    let projection_changed = cluster.read(|st| *st.inventory.projection() != loaded.projection);
    // Stored file objects lack what the new policies read: read them again
    // (watched kinds re-list instead).
    let objects = if projection_changed && !sources.inventory.is_empty() {
        Some(prepare_files(&loaded.inventory()?, &sources.inventory)?)
    } else {
        None
    };
    let changed = cluster.install(loaded, objects)?;
    Ok((kinds, changed))
}

#[cfg(test)]
#[path = "reload_tests.rs"]
mod tests;
