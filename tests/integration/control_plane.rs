//! The test control plane itself: versions, kubectl and the kube client on
//! the same cluster, the garbage collector, 410 Gone, and the harness's
//! promises (logs on failure, children stopped on drop and on process death).

use crate::support;

use std::os::unix::process::ExitStatusExt as _;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, PostParams, WatchEvent,
    WatchParams,
};
use serde_json::json;
use support::cluster::{Options, TestCluster};

fn stdout(out: &std::process::Output) -> String {
    assert!(
        out.status.success(),
        "command failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test]
async fn kubectl_and_apiserver_report_v1_36() {
    let cluster = TestCluster::shared();
    let _logs = cluster.logs_on_panic();

    let out = stdout(&cluster.kubectl(&["version", "-o", "json"]));
    let v: serde_json::Value = serde_json::from_str(&out).expect("kubectl version -o json");
    let client_version = v["clientVersion"]["gitVersion"].as_str().unwrap_or("");
    let server_version = v["serverVersion"]["gitVersion"].as_str().unwrap_or("");
    assert!(client_version.starts_with("v1.36."), "kubectl: {out}");
    assert!(server_version.starts_with("v1.36."), "apiserver: {out}");
    assert_eq!(v["serverVersion"]["minor"], "36", "{out}");

    // The apiserver's /version through the kube client agrees.
    let info = cluster
        .client()
        .apiserver_version()
        .await
        .expect("GET /version");
    assert_eq!(info.git_version, server_version);
    assert_eq!((info.major.as_str(), info.minor.as_str()), ("1", "36"));
}

#[tokio::test]
async fn kubectl_writes_what_the_client_reads() {
    let cluster = TestCluster::shared();
    let _logs = cluster.logs_on_panic();
    let ns = cluster.create_namespace("kubectl-writes");

    stdout(&cluster.kubectl(&[
        "-n",
        &ns,
        "create",
        "configmap",
        "from-args",
        "--from-literal=colour=blue",
    ]));
    let manifest = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-stdin\n  namespace: {ns}\ndata:\n  shape: round\n"
    );
    let applied = stdout(&cluster.kubectl_stdin(&["apply", "-f", "-"], &manifest));
    assert!(
        applied.contains("configmap/from-stdin created"),
        "{applied}"
    );

    let api: Api<ConfigMap> = Api::namespaced(cluster.client(), &ns);
    let a = api.get("from-args").await.expect("get from-args");
    let b = api.get("from-stdin").await.expect("get from-stdin");
    assert_eq!(
        a.data.unwrap_or_default().get("colour").map(String::as_str),
        Some("blue")
    );
    assert_eq!(
        b.data.unwrap_or_default().get("shape").map(String::as_str),
        Some("round")
    );

    // Namespaces isolate: another namespace does not see them.
    let other = cluster.create_namespace("kubectl-writes");
    assert_ne!(other, ns);
    let other_api: Api<ConfigMap> = Api::namespaced(cluster.client(), &other);
    assert!(other_api.get_opt("from-args").await.expect("get").is_none());
}

#[tokio::test]
async fn owner_deletion_cascades_to_the_dependent() {
    let cluster = TestCluster::shared();
    let _logs = cluster.logs_on_panic();
    let ns = cluster.create_namespace("cascade");
    let api: Api<ConfigMap> = Api::namespaced(cluster.client(), &ns);

    let owner: ConfigMap = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "owner"}, "data": {"role": "owner"}
    }))
    .expect("owner");
    let owner = api
        .create(&PostParams::default(), &owner)
        .await
        .expect("create owner");
    let uid = owner.metadata.uid.clone().expect("owner uid");
    let dependent: ConfigMap = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {
            "name": "dependent",
            "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": uid}]
        },
        "data": {"role": "dependent"}
    }))
    .expect("dependent");
    api.create(&PostParams::default(), &dependent)
        .await
        .expect("create dependent");

    api.delete("owner", &DeleteParams::background())
        .await
        .expect("delete owner");
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        if api
            .get_opt("dependent")
            .await
            .expect("get dependent")
            .is_none()
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the garbage collector did not delete the dependent within 90s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(api.get_opt("owner").await.expect("get owner").is_none());
}

/// The namespace controller empties and removes a deleted namespace.
#[tokio::test]
async fn a_deleted_namespace_goes_away_with_its_contents() {
    let cluster = TestCluster::shared();
    let _logs = cluster.logs_on_panic();
    let ns = cluster.create_namespace("doomed");
    stdout(&cluster.kubectl(&["-n", &ns, "create", "configmap", "inside"]));
    stdout(&cluster.kubectl(&["delete", "namespace", &ns, "--wait=false"]));

    let namespaces: Api<Namespace> = Api::all(cluster.client());
    let deadline = Instant::now() + Duration::from_secs(90);
    while namespaces
        .get_opt(&ns)
        .await
        .expect("get namespace")
        .is_some()
    {
        assert!(
            Instant::now() < deadline,
            "namespace {ns} still exists 90s after its deletion"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let inside: Api<ConfigMap> = Api::namespaced(cluster.client(), &ns);
    assert!(inside.get_opt("inside").await.expect("get").is_none());
}

/// The first event of a watch from `resource_version`, within 15 s.
async fn first_watch_event<K>(api: &Api<K>, resource_version: &str) -> WatchEvent<K>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let stream = api
        .watch(&WatchParams::default().timeout(10), resource_version)
        .await
        .expect("the watch request itself is accepted (200)");
    let mut stream = Box::pin(stream);
    tokio::time::timeout(Duration::from_secs(15), stream.next())
        .await
        .expect("an event within 15s")
        .expect("the stream yields an event")
        .expect("a decodable event")
}

fn assert_gone<K>(event: &WatchEvent<K>) {
    match event {
        WatchEvent::Error(status) => {
            assert_eq!(status.code, 410, "{status:?}");
            assert_eq!(status.reason, "Expired", "{status:?}");
        }
        other => panic!("expected an ERROR event with 410 Gone, got {other:?}"),
    }
}

/// With the watch cache (the default), a watch from a resourceVersion older
/// than the cache's window gets 410 Gone. The window of a built-in type opens
/// when the apiserver starts, near revision 1, so "1" is not too old for
/// ConfigMaps on a fresh cluster; a custom resource's cache starts when its CRD
/// is established, so "1" is too old for it.
#[tokio::test]
async fn watch_from_resource_version_1_is_gone() {
    let cluster = TestCluster::shared();
    let _logs = cluster.logs_on_panic();
    let ns = cluster.create_namespace("gone");
    let crd = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.harness.interlock.dev}
spec:
  group: harness.interlock.dev
  names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
";
    stdout(&cluster.kubectl_stdin(&["apply", "-f", "-"], crd));
    stdout(&cluster.kubectl(&[
        "wait",
        "--for=condition=Established",
        "crd/widgets.harness.interlock.dev",
        "--timeout=60s",
    ]));
    let gvk = GroupVersionKind::gvk("harness.interlock.dev", "v1", "Widget");
    let api: Api<DynamicObject> =
        Api::namespaced_with(cluster.client(), &ns, &ApiResource::from_gvk(&gvk));

    // The cache of a new resource may still be filling: it answers 429 then.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match api.list(&Default::default()).await {
            Err(kube::Error::Api(s)) if s.code == 429 && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("list widgets: {e}"),
            Ok(_) => break,
        }
    }
    assert_gone(&first_watch_event(&api, "1").await);
}

/// Without the watch cache, watches are served by etcd: a watch from "1"
/// works until etcd compacts past it, and gets 410 Gone afterwards. The same
/// cluster then shows that dropping an owned cluster stops its processes and
/// removes its directory.
#[tokio::test]
async fn compaction_gives_410_without_watch_cache_and_drop_stops_the_cluster() {
    let cluster = TestCluster::start_with(Options {
        apiserver_args: vec!["--watch-cache=false".into()],
        ..Options::default()
    });
    let logs = cluster.logs_on_panic();
    let pids = cluster.pids();
    let names: Vec<&str> = pids.iter().map(|(n, _)| *n).collect();
    assert_eq!(names, ["etcd", "kube-apiserver"]);
    for (name, pid) in &pids {
        assert!(alive(*pid), "{name} ({pid}) should run");
    }
    assert_eq!(
        stdout(&cluster.kubectl(&["get", "--raw", "/readyz"])).trim(),
        "ok"
    );

    let api: Api<ConfigMap> = Api::namespaced(cluster.client(), "default");
    let probe: ConfigMap = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "probe"}
    }))
    .expect("probe");
    api.create(&PostParams::default(), &probe)
        .await
        .expect("create probe");
    match first_watch_event(&api, "1").await {
        WatchEvent::Added(cm) => assert_eq!(cm.metadata.name.as_deref(), Some("probe")),
        other => panic!("before compaction, expected the probe's ADDED event, got {other:?}"),
    }

    let list = api.list(&Default::default()).await.expect("list");
    let revision = list
        .metadata
        .resource_version
        .expect("list resourceVersion");
    let compacted = Command::new(cluster.bin("etcdctl"))
        .args(["--endpoints", cluster.etcd_url(), "compaction", &revision])
        .output()
        .expect("run etcdctl");
    assert!(
        stdout(&compacted).contains(&format!("compacted revision {revision}")),
        "{compacted:?}"
    );
    assert_gone(&first_watch_event(&api, "1").await);

    let dir = cluster.dir().to_path_buf();
    assert!(dir.join("kube-apiserver.log").is_file());
    drop(logs);
    drop(cluster);
    for (name, pid) in &pids {
        assert!(!alive(*pid), "{name} ({pid}) still runs after drop");
    }
    assert!(!dir.exists(), "{} was not removed", dir.display());
}

#[test]
fn a_failed_start_names_the_component_and_shows_its_log() {
    let err = match TestCluster::try_start_with(Options {
        apiserver_args: vec!["--no-such-flag".into()],
        ..Options::default()
    }) {
        Ok(_) => panic!("kube-apiserver accepted --no-such-flag"),
        Err(e) => e,
    };
    assert!(err.contains("kube-apiserver exited during start"), "{err}");
    assert!(err.contains("unknown flag: --no-such-flag"), "{err}");
    assert!(err.contains("----- etcd: last"), "{err}");
}

/// Env var that turns this test's process into the helper that starts a
/// cluster and dies by SIGKILL without dropping anything.
const ORPHAN_ROLE: &str = "INTERLOCK_TEST_ORPHAN_PIDS_FILE";

#[test]
fn children_die_with_the_test_process() {
    if let Some(file) = std::env::var_os(ORPHAN_ROLE) {
        // Helper role (in a child process of the real test): start a cluster,
        // leak it, report the pids, and die the hardest way.
        let cluster = TestCluster::start();
        let pids: Vec<String> = cluster.pids().iter().map(|(_, p)| p.to_string()).collect();
        let report = format!("{}\n{}", cluster.dir().display(), pids.join(" "));
        std::fs::write(&file, report).expect("write pids");
        std::mem::forget(cluster);
        // SAFETY: sends SIGKILL to this very process.
        unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
        unreachable!("SIGKILL did not kill the helper");
    }

    let tmp = tempfile::tempdir().expect("tempdir");
    let file = tmp.path().join("pids");
    let exe = std::env::current_exe().expect("current exe");
    let out = Command::new(exe)
        .args([
            "--exact",
            "control_plane::children_die_with_the_test_process",
            "--nocapture",
        ])
        .env(ORPHAN_ROLE, &file)
        .output()
        .expect("run the helper");
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGKILL),
        "the helper should die by SIGKILL: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let pids = std::fs::read_to_string(&file).unwrap_or_else(|e| {
        panic!(
            "the helper wrote no pids ({e}); it exited {}:\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let (dir, pids) = pids.split_once('\n').expect("dir and pids");
    let pids: Vec<u32> = pids
        .split_whitespace()
        .map(|p| p.parse().expect("pid"))
        .collect();
    assert_eq!(pids.len(), 2, "etcd and kube-apiserver");
    let deadline = Instant::now() + Duration::from_secs(10);
    while pids.iter().any(|p| alive(*p)) {
        assert!(
            Instant::now() < deadline,
            "children {pids:?} outlived their SIGKILLed parent"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // Nothing ran the helper's cleanup: remove its directory here.
    std::fs::remove_dir_all(dir).expect("remove the helper's cluster directory");
}

/// Whether a process runs (zombies count as dead).
fn alive(pid: u32) -> bool {
    let stat = match std::fs::read_to_string(Path::new("/proc").join(pid.to_string()).join("stat"))
    {
        Ok(s) => s,
        Err(_) => return false,
    };
    // pid (comm) STATE ...; comm may contain spaces, so split after ')'.
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next());
    !matches!(state, Some("Z") | Some("X") | None)
}

#[test]
fn taken_ports_are_retried() {
    let cluster = TestCluster::start_with(Options {
        controller_manager: true,
        simulate_port_conflict: true,
        ..Options::default()
    });
    let names: Vec<&str> = cluster.pids().iter().map(|(n, _)| *n).collect();
    assert_eq!(names, ["etcd", "kube-apiserver", "kube-controller-manager"]);
    for name in names {
        let log = std::fs::read_to_string(cluster.dir().join(format!("{name}.log")))
            .expect("component log");
        let runs = log.matches(&format!("=== {name} ")).count();
        assert_eq!(runs, 2, "{name} should have started twice:\n{log}");
        assert!(log.contains("address already in use"), "{log}");
    }
    assert_eq!(
        stdout(&cluster.kubectl(&["get", "--raw", "/readyz"])).trim(),
        "ok"
    );
}
