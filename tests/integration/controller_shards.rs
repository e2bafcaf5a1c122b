//! `interlock controller --shards` as three replicas against the real
//! control plane: every group is reconciled by the one replica that holds
//! its namespace's shard Lease; when that replica is killed (SIGKILL, no
//! release), its shards are taken over and a change to one of its groups
//! converges; no group is ever reconciled by two live replicas.

use crate::controller_replicas::{apply_group, config_map, tenant, wait_condition};
use crate::support;

use interlock::controller::shards::{lease_name, shard_of};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};
use support::cluster::TestCluster;
use support::controller::Controller;

const SHARDS: u16 = 4;
const LEASE: &str = "interlock-controller";
const GROUPS: usize = 8;

/// Holder of each shard's Lease ("" if free or absent).
fn holders(c: &TestCluster, ns: &str) -> Vec<String> {
    (0..SHARDS)
        .map(|i| {
            let out = c.kubectl(&[
                "get",
                "-n",
                ns,
                &format!("lease/{}", lease_name(LEASE, i)),
                "-o",
                "jsonpath={.spec.holderIdentity}",
            ]);
            String::from_utf8_lossy(&out.stdout).trim().to_string()
        })
        .collect()
}

/// The namespaces of the groups a replica planned a pass of, from its log
/// (one group per namespace here).
fn planned(ctl: &Controller) -> BTreeSet<String> {
    plain(&ctl.log())
        .lines()
        .filter(|l| l.contains(" planned "))
        .filter_map(|l| {
            let ns = l.split(" namespace=").nth(1)?;
            Some(ns.split_whitespace().next()?.to_string())
        })
        .collect()
}

/// The log without its colours (ANSI escapes `ESC [ ... m`).
fn plain(log: &str) -> String {
    let mut out = String::with_capacity(log.len());
    let mut chars = log.chars();
    while let Some(ch) = chars.next() {
        if ch == '\u{1b}' {
            chars.by_ref().find(|c| *c == 'm');
        } else {
            out.push(ch);
        }
    }
    out
}

fn wait<T: std::fmt::Debug>(
    what: &str,
    limit: Duration,
    logs: &dyn Fn() -> String,
    mut f: impl FnMut() -> (bool, T),
) -> T {
    let start = Instant::now();
    loop {
        let (done, v) = f();
        if done {
            return v;
        }
        assert!(
            start.elapsed() < limit,
            "{what}: still {v:?}\nlogs:\n{}",
            logs()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[test]
fn three_replicas_share_the_groups_by_shard_and_take_over_a_dead_ones() {
    // A cluster of its own: no other controller may reconcile these groups.
    let own = TestCluster::start();
    let c = &own;
    let _logs = c.logs_on_panic();
    support::controller::install_resource_group_crd(c);
    let dir = tempfile::tempdir().expect("tempdir");
    let lease_ns = c.create_namespace("shards");
    let shards = SHARDS.to_string();
    let replica = |identity: &str| {
        Controller::start(
            c,
            dir.path(),
            &[
                "--lease-namespace",
                &lease_ns,
                "--lease-name",
                LEASE,
                "--identity",
                identity,
                "--shards",
                &shards,
                "--lease-duration",
                "9s",
            ],
        )
    };
    let mut replicas: BTreeMap<String, Controller> = ["r0", "r1", "r2"]
        .into_iter()
        .map(|id| (id.to_string(), replica(id)))
        .collect();
    let all_logs = || crate::support::controller::logs_in(dir.path());
    wait(
        "every shard held",
        Duration::from_secs(120),
        &all_logs,
        || {
            let h = holders(c, &lease_ns);
            (h.iter().all(|id| replicas.contains_key(id)), h)
        },
    );

    let namespaces: Vec<String> = (0..GROUPS).map(|_| tenant(c, "shard")).collect();
    for ns in &namespaces {
        apply_group(c, ns, "g", json!([config_map("m", json!({"k": "v1"}))]));
    }
    for ns in &namespaces {
        wait_condition(c, ns, "g", "Ready", "True", all_logs);
    }

    // Each group was reconciled by exactly one replica: the holder of its
    // namespace's shard.
    let holder = holders(c, &lease_ns);
    let by_replica: BTreeMap<String, BTreeSet<String>> = replicas
        .iter()
        .map(|(id, r)| (id.clone(), planned(r)))
        .collect();
    for ns in &namespaces {
        let who: Vec<&String> = by_replica
            .iter()
            .filter(|(_, seen)| seen.contains(ns))
            .map(|(id, _)| id)
            .collect();
        let owner = &holder[usize::from(shard_of(ns, SHARDS))];
        assert_eq!(
            who,
            vec![owner],
            "{ns} (shard {}) reconciled by {who:?}, holders {holder:?}\n{}",
            shard_of(ns, SHARDS),
            all_logs()
        );
    }
    for (id, r) in &replicas {
        let wrote = r.writes();
        assert_eq!(
            wrote > 0,
            !by_replica[id].is_empty(),
            "{id} wrote {wrote} for groups {:?}",
            by_replica[id]
        );
    }

    // Kill (SIGKILL: no release) a replica that reconciled groups.
    let victim = by_replica
        .iter()
        .max_by_key(|(_, seen)| seen.len())
        .map(|(id, _)| id.clone())
        .expect("a replica");
    let victims_groups = by_replica[&victim].clone();
    let target = victims_groups.iter().next().expect("a group").clone();
    drop(replicas.remove(&victim));
    apply_group(
        c,
        &target,
        "g",
        json!([config_map("m", json!({"k": "v2"}))]),
    );
    // A bound on correctness, generous: the lease expires (9 s), a
    // survivor's next attempt takes it (every 3 s, 6 s for one that holds
    // shards), then one pass.
    let start = Instant::now();
    wait(
        "the dead replica's group converges",
        Duration::from_secs(30),
        &all_logs,
        || {
            let out = c.kubectl(&[
                "get",
                "-n",
                &target,
                "configmap/m",
                "-o",
                "jsonpath={.data.k}",
            ]);
            let v = String::from_utf8_lossy(&out.stdout).to_string();
            (v == "v2", v)
        },
    );
    wait_condition(c, &target, "g", "Ready", "True", all_logs);
    eprintln!("taken over and converged in {:?}", start.elapsed());

    // The dead replica's other shards, each taken over in its turn.
    let after = wait(
        "every shard held by a live replica",
        Duration::from_secs(60),
        &all_logs,
        || {
            let h = holders(c, &lease_ns);
            (h.iter().all(|id| replicas.contains_key(id)), h)
        },
    );
    // Their groups' passes, woken by the takeover, done.
    for ns in &namespaces {
        wait_condition(c, ns, "g", "Ready", "True", all_logs);
    }
    // Survivors: each group by one of them at most, and only the groups
    // of shards it holds (the dead replica's moved to exactly one).
    let seen: BTreeMap<&String, BTreeSet<String>> =
        replicas.iter().map(|(id, r)| (id, planned(r))).collect();
    for ns in &namespaces {
        let who: Vec<&&String> = seen
            .iter()
            .filter(|(_, s)| s.contains(ns))
            .map(|(id, _)| id)
            .collect();
        assert!(who.len() <= 1, "{ns} reconciled by {who:?}\n{}", all_logs());
        if let Some(id) = who.first() {
            assert_eq!(
                &after[usize::from(shard_of(ns, SHARDS))],
                **id,
                "{ns} by a replica that does not hold its shard"
            );
        }
    }
    let took_over = seen
        .iter()
        .find(|(_, s)| s.contains(&target))
        .map(|(id, _)| *id);
    assert!(took_over.is_some(), "a survivor reconciled {target}");
}
