//! `interlock serve`: policies and inventory behind the TLS webhook, with
//! policy files reloaded when they change.

use super::{live, Engine, EngineOptions};
use crate::inventory::projection::Projection;
use crate::inventory::Inventory;
use crate::manifest::{self, LoadOptions};
use crate::policy::PolicySet;
use crate::server::ServeArgs;
use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Compiles the policies of `-p` paths, or the bundled library, into
/// `inventory`; any error fails the whole set. Returns the set and the
/// projection it needs.
fn compile(
    paths: &[PathBuf],
    inventory: &mut Inventory,
) -> Result<(PolicySet, Projection), String> {
    let loaded = if paths.is_empty() {
        crate::bundled::documents()
    } else {
        manifest::load_paths(paths, &LoadOptions::default())
    };
    if !loaded.errors.is_empty() {
        let errs: Vec<String> = loaded.errors.iter().map(|e| e.to_string()).collect();
        return Err(errs.join("\n"));
    }
    let (set, errors) = PolicySet::compile_documents(loaded.documents, inventory);
    if !errors.is_empty() {
        let errs: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        return Err(errs.join("\n"));
    }
    let projection = set.projection(inventory);
    Ok((set, projection))
}

pub async fn run(args: ServeArgs, options: EngineOptions) -> anyhow::Result<()> {
    let mut inventory = Inventory::new();
    let (policies, projection) = compile(&args.policy, &mut inventory)
        .map_err(|e| anyhow::anyhow!("policies do not load:\n{e}"))?;
    inventory.set_projection(projection);
    tracing::info!(policies = policies.len(), "policies loaded");
    let kinds = policies.kinds_read();
    let from_files = !args.inventory.is_empty();
    if from_files {
        super::inventory_from_files(&mut inventory, &args.inventory)
            .map_err(|e| anyhow::anyhow!("--inventory: {e}"))?;
    }
    let engine = Arc::new(Engine::new(policies, inventory, options));
    let watched: Arc<Mutex<BTreeSet<(String, String)>>> = Arc::default();
    let client = if from_files {
        engine.set_ready(true);
        None
    } else {
        let client = kube::Client::try_default().await.map_err(|e| {
            anyhow::anyhow!("no cluster to watch ({e}); give --inventory PATH to serve from files")
        })?;
        watched
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(kinds.iter().cloned());
        let (c, e) = (client.clone(), engine.clone());
        tokio::spawn(async move {
            if let Err(err) = live::run(c, e, kinds).await {
                tracing::error!(error = %err, "inventory watchers stopped");
            }
        });
        Some(client)
    };
    tokio::spawn(reload_loop(
        args.policy.clone(),
        args.inventory.clone(),
        engine.clone(),
        client,
        watched,
    ));
    crate::server::run(args, engine).await
}

fn fingerprint(paths: &[PathBuf]) -> HashMap<PathBuf, Vec<u8>> {
    let mut out = HashMap::new();
    let mut stack: Vec<PathBuf> = paths.to_vec();
    while let Some(p) = stack.pop() {
        if p.is_dir() {
            if let Ok(rd) = std::fs::read_dir(&p) {
                stack.extend(rd.flatten().map(|e| e.path()));
            }
        } else if let Ok(b) = std::fs::read(&p) {
            out.insert(p, b);
        }
    }
    out
}

/// Polls the policy files (kubelet swaps ConfigMap files through a symlink,
/// so contents are compared, not events watched). A set that does not
/// compile is rejected and the previous one keeps serving.
async fn reload_loop(
    paths: Vec<PathBuf>,
    inventory_files: Vec<PathBuf>,
    engine: Arc<Engine>,
    client: Option<kube::Client>,
    watched: Arc<Mutex<BTreeSet<(String, String)>>>,
) {
    if paths.is_empty() {
        return;
    }
    let mut last = fingerprint(&paths);
    loop {
        tokio::time::sleep(Duration::from_secs(3)).await;
        let now = fingerprint(&paths);
        if now == last {
            continue;
        }
        last = now;
        let result = engine.update(|st| {
            compile(&paths, &mut st.inventory).map(|(set, projection)| {
                let kinds = set.kinds_read();
                st.policies = set;
                let changed = *st.inventory.projection() != projection;
                st.inventory.set_projection(projection);
                if changed && client.is_some() {
                    engine.relist_all();
                }
                if changed && !inventory_files.is_empty() {
                    // Stored objects lack what the new policies read: load
                    // them again (watched kinds re-list below).
                    if let Err(e) = super::inventory_from_files(&mut st.inventory, &inventory_files)
                    {
                        tracing::error!(error = %e, "--inventory files could not be read again");
                    }
                }
                (kinds, changed)
            })
        });
        match result {
            Ok((kinds, changed)) => {
                tracing::info!(projection_changed = changed, "policies reloaded");
                let new: Vec<(String, String)> = {
                    let mut w = watched.lock().unwrap_or_else(|p| p.into_inner());
                    kinds.into_iter().filter(|k| w.insert(k.clone())).collect()
                };
                if let (Some(c), false) = (&client, new.is_empty()) {
                    let (c, e) = (c.clone(), engine.clone());
                    tokio::spawn(async move {
                        if let Err(err) = live::run(c, e, new).await {
                            tracing::error!(error = %err, "watchers for new kinds stopped");
                        }
                    });
                }
            }
            Err(e) => {
                tracing::error!(error = %e, "policy change rejected; the previous policies keep serving")
            }
        }
    }
}
