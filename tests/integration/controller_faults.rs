//! The controller SIGKILLed at random moments while 50 groups converge,
//! against the real control plane: a crash costs latency, never
//! correctness. At the end every group is Ready at its generation; no
//! member is missing, duplicated or owned by the wrong group; the groups a
//! policy denies wrote nothing; and a minute passes without a write.
//! The kill times come from a recorded seed (printed; set
//! `INTERLOCK_FAULT_SEED` to replay a run).

use crate::support;

use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use support::cluster::TestCluster;
use support::controller::Controller;
use support::rng::Rng;
use support::tenant::*;

const GROUPS: usize = 50;
const MEMBERS: usize = 4;
const DENIED: usize = 3;
const KILLS: usize = 10;

fn config_map(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": name}})
}

/// A Deployment the bundled `disallow-latest-tag` denies.
fn latest(name: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "app", "image": "nginx:latest",
                                  "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}}}})
}

fn group(ns: &str, name: &str, resources: Vec<Value>) -> Value {
    json!({"apiVersion": "interlock.dev/v1alpha1", "kind": "ResourceGroup",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"serviceAccountName": "deployer", "resources": resources}})
}

fn items(c: &TestCluster, ns: &str, what: &str) -> Vec<Value> {
    let out = c.kubectl(&["get", "-n", ns, what, "-o", "json"]);
    let list: Value = serde_json::from_str(&ok(&out, what)).expect("kubectl json");
    list["items"].as_array().cloned().unwrap_or_default()
}

fn ready_at_generation(rg: &Value) -> bool {
    let generation = &rg["metadata"]["generation"];
    rg["status"]["observedGeneration"] == *generation
        && rg["status"]["conditions"].as_array().is_some_and(|cs| {
            cs.iter().any(|c| {
                c["type"] == "Ready"
                    && c["status"] == "True"
                    && c["observedGeneration"] == *generation
            })
        })
}

/// The name of the group that controls `o`, if exactly one does.
fn controlling_group(o: &Value) -> Option<String> {
    let owners: Vec<&Value> = o["metadata"]["ownerReferences"]
        .as_array()?
        .iter()
        .filter(|r| r["controller"] == true)
        .collect();
    match owners[..] {
        [r] if r["kind"] == "ResourceGroup" => r["name"].as_str().map(str::to_string),
        _ => None,
    }
}

#[test]
fn fifty_groups_converge_through_ten_sigkills_and_then_write_nothing() {
    let seed = std::env::var("INTERLOCK_FAULT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x36_5eed_u64);
    println!("controller fault test: seed {seed}");
    let c = TestCluster::start();
    let _logs = c.logs_on_panic();
    support::controller::install_resource_group_crd(&c);
    let dir = tempfile::tempdir().expect("tempdir");
    let ns = namespace_with_deployer(
        &c,
        "faults",
        &[
            all_verbs("", &["configmaps"]),
            all_verbs("apps", &["deployments"]),
        ],
    );
    let group_of = |g: usize| {
        let members = (0..MEMBERS).map(|m| config_map(&format!("g{g}-m{m}")));
        group(&ns, &format!("g{g}"), members.collect())
    };
    let denied = (0..DENIED).map(|d| {
        let members = vec![
            config_map(&format!("denied{d}-cfg")),
            latest(&format!("denied{d}-web")),
        ];
        group(&ns, &format!("denied{d}"), members)
    });
    let apply = |groups: Vec<Value>| {
        let list = json!({"apiVersion": "v1", "kind": "List", "items": groups});
        ok(
            &c.kubectl_stdin(&["apply", "-f", "-"], &list.to_string()),
            "groups",
        );
    };
    apply(denied.collect());

    // Each round: a controller starts, a batch of new groups arrives once
    // it reconciles, and it is SIGKILLed at a random moment of their
    // convergence (mid-pass, between a member's dry run and its write,
    // between writes and status).
    let mut rng = Rng(seed);
    let per_round = GROUPS / KILLS;
    for kill in 0..KILLS {
        let ctl = Controller::start(&c, dir.path(), &["--no-leader-election"]);
        apply(
            (kill * per_round..(kill + 1) * per_round)
                .map(group_of)
                .collect(),
        );
        // A batch converges in about a tenth of a second here: the kill
        // falls within it (the count printed below shows where).
        let after = Duration::from_millis(rng.below(120) as u64);
        std::thread::sleep(after);
        drop(ctl); // SIGKILL
        let stored = items(&c, &ns, "configmaps").len();
        println!("kill {kill} after {after:?}: {stored} ConfigMaps stored");
    }
    let ctl = Controller::start(&c, dir.path(), &["--no-leader-election"]);

    let start = Instant::now();
    loop {
        let rgs = items(&c, &ns, "resourcegroups");
        let waiting: Vec<&str> = rgs
            .iter()
            .filter(|rg| {
                rg["metadata"]["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with('g'))
            })
            .filter(|rg| !ready_at_generation(rg))
            .filter_map(|rg| rg["metadata"]["name"].as_str())
            .collect();
        if waiting.is_empty() && rgs.len() == GROUPS + DENIED {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(180),
            "not Ready: {waiting:?}\n{}",
            ctl.log()
        );
        std::thread::sleep(Duration::from_millis(500));
    }

    // Every member once, owned by its own group; nothing of a denied group.
    let mut by_group: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for cm in items(&c, &ns, "configmaps") {
        let name = cm["metadata"]["name"].as_str().unwrap_or("").to_string();
        if name == "kube-root-ca.crt" {
            continue;
        }
        let owner =
            controlling_group(&cm).unwrap_or_else(|| format!("(no single group owns {name})"));
        by_group.entry(owner).or_default().push(name);
    }
    let mut want: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for g in 0..GROUPS {
        let mut names: Vec<String> = (0..MEMBERS).map(|m| format!("g{g}-m{m}")).collect();
        names.sort();
        want.insert(format!("g{g}"), names);
    }
    for names in by_group.values_mut() {
        names.sort();
    }
    assert_eq!(by_group, want, "ConfigMaps by controlling group");
    assert!(
        items(&c, &ns, "deployments").is_empty(),
        "a denied member was applied"
    );
    for rg in items(&c, &ns, "resourcegroups") {
        if rg["metadata"]["name"]
            .as_str()
            .is_some_and(|n| n.starts_with("denied"))
        {
            let valid = rg["status"]["conditions"]
                .as_array()
                .and_then(|cs| cs.iter().find(|c| c["type"] == "Valid").cloned())
                .unwrap_or(Value::Null);
            assert_eq!(valid["reason"], "PolicyViolation", "{rg:#}");
        }
    }

    // Converged means quiet: no write in the following minute.
    let writes = ctl.writes();
    std::thread::sleep(Duration::from_secs(60));
    assert_eq!(
        ctl.writes(),
        writes,
        "writes in the minute after convergence\n{}",
        ctl.log()
    );
}
