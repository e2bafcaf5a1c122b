//! A policy change during a load phase, as `serve --cluster-policies` makes
//! one when an InterlockPolicy object is applied: the whole set (the
//! bundled library plus the object) compiled outside the lock through the
//! same loader (`LoadedPolicies::with_objects`), then swapped in by
//! `Cluster::install`, the reload loop's own two steps. Each change is a
//! new generation of one object whose rule differs, on ConfigMaps (no
//! request of the load mix), so the answers stay as the pre-flight
//! expects them and the projection and indexes do not change.

use interlock::cluster::Cluster;
use interlock::policy::load::LoadedPolicies;
use interlock::policy::objects::{Ledger, ObjectDoc};
use interlock::policy::overrides::Overrides;
use serde_json::{json, Value as Json};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the reloads of one phase took.
#[derive(Debug, Default)]
pub struct Reloads {
    pub count: usize,
    /// Loading and compiling the set, outside the lock.
    pub compile: Duration,
    /// `Cluster::install`: the swap under the write lock.
    pub install: Duration,
    pub failures: usize,
}

fn object(generation: i64) -> ObjectDoc {
    ObjectDoc {
        uid: "bench-reload".into(),
        generation,
        doc: json!({
            "apiVersion": "interlock.dev/v1alpha1", "kind": "InterlockPolicy",
            "metadata": {"name": "bench-reload", "generation": generation},
            "spec": {
                "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                    "resources": ["configmaps"], "operations": ["CREATE", "UPDATE"]}]},
                "validations": [{
                    "expression": format!("object.metadata.name != 'reload-{generation}'"),
                    "message": "a name the bench reserves"
                }]
            }
        }),
        status: Json::Null,
    }
}

/// Reloads the policies of `cluster` every `every` until `stop`.
/// `LOAD_RELOAD_COMPILE_ONLY=1` compiles and never swaps in (to tell the
/// compile's cost on the shared cores from the swap's).
pub fn run(cluster: Arc<Cluster>, every: Duration, stop: Arc<AtomicBool>) -> Reloads {
    let swap = std::env::var("LOAD_RELOAD_COMPILE_ONLY").as_deref() != Ok("1");
    let mut ledger = Ledger::default();
    let mut out = Reloads::default();
    let mut generation = 0;
    loop {
        std::thread::sleep(every);
        if stop.load(Ordering::Relaxed) {
            return out;
        }
        generation += 1;
        let objects = BTreeMap::from([("bench-reload".to_string(), object(generation))]);
        let t = Instant::now();
        let loaded =
            LoadedPolicies::with_objects(&[], &Overrides::default(), &objects, &mut ledger);
        out.compile += t.elapsed();
        let t = Instant::now();
        match loaded.map(|(l, _)| {
            if swap {
                cluster.install(l, None)
            } else {
                Ok(false)
            }
        }) {
            Ok(Ok(_)) => out.count += 1,
            Ok(Err(e)) | Err(e) => {
                eprintln!("reload failed: {e}");
                out.failures += 1;
            }
        }
        out.install += t.elapsed();
    }
}
