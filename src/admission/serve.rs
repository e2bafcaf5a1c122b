//! `interlock serve`: the cluster state (policies reloaded from files,
//! inventory from watches or files) behind the TLS webhook.

use super::claims::Claims;
use super::{Engine, EngineOptions};
use crate::cluster::authz::SarAuthorizer;
use crate::cluster::prereq::{self, Access, Need};
use crate::cluster::reload::{self, Sources, Supervisor};
use crate::cluster::{ClusterOptions, Companion};
use crate::k8s::kind::GroupVersionKind;
use crate::server::ServeOptions;
use std::sync::Arc;

/// Serves until a shutdown signal; `companion` (the continuous audit) runs
/// beside admission over the same cluster state.
pub async fn run(
    args: ServeOptions,
    options: EngineOptions,
    cluster_options: ClusterOptions,
    sources: Sources,
    mut claims: Option<super::claims::ClaimOptions>,
    companion: Option<Arc<dyn Companion>>,
    webhook_rules: Option<String>,
) -> anyhow::Result<()> {
    // `sources` brings the overrides and the cluster's policy objects; the
    // files come with the server's options.
    let sources = Sources {
        policies: args.policy.clone(),
        inventory: args.inventory.clone(),
        allow_empty: args.allow_empty,
        ..sources
    };
    if sources.objects.is_some() && !sources.inventory.is_empty() {
        anyhow::bail!("--cluster-policies needs a cluster, not --inventory files");
    }
    let (cluster, kinds) = reload::initial(&sources, cluster_options)?;
    let cluster = Arc::new(cluster);
    let client = if sources.inventory.is_empty() {
        Some(connect().await?)
    } else {
        None
    };
    let prerequisites = match &client {
        Some((client, config)) => {
            if let Some(c) = claims.as_mut().filter(|c| !c.namespace_given) {
                c.namespace = prereq::default_namespace(client, config).await;
            }
            let mut needs = needs(&kinds, claims.as_ref());
            if let Some(o) = &sources.objects {
                needs.extend(crate::cluster::policy_objects::needs(client, o));
            }
            cluster.set_prerequisites_met(false);
            let (client, cluster) = (client.clone(), cluster.clone());
            Some(tokio::spawn(async move {
                prereq::wait(&client, &cluster, &needs).await
            }))
        }
        None => None,
    };
    let client = client.map(|(c, _)| c);
    let task = match (&companion, &client) {
        (Some(c), Some(client)) => Some(c.start(cluster.clone(), client.clone())),
        (Some(_), None) => anyhow::bail!("--audit needs a cluster to audit, not --inventory files"),
        (None, _) => None,
    };
    // Claims need the API server: not when serving from files.
    let claims = client
        .clone()
        .zip(claims)
        .map(|(c, o)| Arc::new(Claims::new(c, o, tokio::runtime::Handle::current())));
    // The policies' `authorizer...check()` asks the API server: not when
    // serving from files (it stays an evaluation error, as offline).
    let authorizer = client
        .clone()
        .map(|c| Arc::new(SarAuthorizer::new(c, tokio::runtime::Handle::current())));
    let rules = match (&client, webhook_rules) {
        (Some(c), Some(name)) => Some(tokio::spawn(super::webhook_rules::run(
            c.clone(),
            cluster.clone(),
            name,
        ))),
        (None, Some(_)) => {
            anyhow::bail!("--sync-webhook-rules needs a cluster, not --inventory files")
        }
        (_, None) => None,
    };
    let supervisor = Supervisor::start(cluster.clone(), client, sources, kinds);
    let mut engine = Engine::over(cluster.clone(), options);
    if let Some(a) = authorizer {
        let metrics = a.metrics().clone();
        engine = engine.with_authorizer(a, metrics);
    }
    if let Some(c) = companion {
        engine = engine.with_companion(c);
    }
    let (engine, sweep) = match claims {
        Some(c) => (
            engine.with_claims(c.clone()),
            Some(tokio::spawn(c.sweep_forever(cluster))),
        ),
        None => (engine, None),
    };
    let served = crate::server::run(args, Arc::new(engine)).await;
    for t in [task, rules].into_iter().flatten() {
        t.abort();
    }
    for t in [sweep, prerequisites].into_iter().flatten() {
        t.abort();
    }
    supervisor.shutdown().await;
    served
}

async fn connect() -> anyhow::Result<(kube::Client, kube::Config)> {
    let config = kube::Config::infer().await.map_err(no_cluster)?;
    let client = kube::Client::try_from(config.clone()).map_err(no_cluster)?;
    Ok((client, config))
}

fn no_cluster(e: impl std::fmt::Display) -> anyhow::Error {
    anyhow::anyhow!("no cluster to watch ({e}); give --inventory PATH to serve from files")
}

/// What `serve` needs of the cluster: to list and watch the kinds its
/// policies read and, with claims, its namespace and the claims' verbs on
/// Leases there (manifests/base/rbac.yaml, `interlock-claims`).
fn needs(kinds: &[GroupVersionKind], claims: Option<&super::claims::ClaimOptions>) -> Vec<Need> {
    let mut needs = prereq::watching(kinds);
    if let Some(c) = claims {
        needs.push(Need::Namespace(c.namespace.clone()));
        for verb in ["create", "get", "list", "update", "delete"] {
            needs.push(Need::Access(
                Access::new(verb, "coordination.k8s.io", "leases").in_namespace(&c.namespace),
            ));
        }
    }
    needs
}
