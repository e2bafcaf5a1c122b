//! `interlock serve`: the cluster state (policies reloaded from files,
//! inventory from watches or files) behind the TLS webhook.

use super::{Engine, EngineOptions};
use crate::cluster::reload::{self, Sources, Supervisor};
use crate::cluster::ClusterOptions;
use crate::policy::overrides::Overrides;
use crate::server::ServeArgs;
use std::sync::Arc;

pub async fn run(
    args: ServeArgs,
    options: EngineOptions,
    cluster_options: ClusterOptions,
    overrides: Overrides,
) -> anyhow::Result<()> {
    let sources = Sources {
        policies: args.policy.clone(),
        inventory: args.inventory.clone(),
        allow_empty: args.allow_empty,
        overrides,
    };
    let (cluster, kinds) = reload::initial(&sources, cluster_options)?;
    let cluster = Arc::new(cluster);
    let client = if sources.inventory.is_empty() {
        Some(kube::Client::try_default().await.map_err(|e| {
            anyhow::anyhow!("no cluster to watch ({e}); give --inventory PATH to serve from files")
        })?)
    } else {
        None
    };
    let supervisor = Supervisor::start(cluster.clone(), client, sources, kinds);
    let engine = Arc::new(Engine::over(cluster, options));
    let served = crate::server::run(args, engine).await;
    supervisor.shutdown().await;
    served
}
