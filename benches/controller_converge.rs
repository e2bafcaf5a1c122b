//! The ResourceGroup controller against the real control plane: N groups of
//! M members from empty to all Ready, then a steady state.
//!
//! ```text
//! cargo bench --bench controller_converge -- --groups 1000 --members 5 --steady 120
//! cargo bench --bench controller_converge -- --groups 1000 --namespaces 100
//! cargo bench --bench controller_converge -- --groups 10000 --restart
//! ```
//!
//! The groups go round-robin into `--namespaces` namespaces (default one).
//!
//! Reports: time to converge; API requests the controller made per group
//! (kube-apiserver's `apiserver_request_total` for the kinds it touches,
//! minus the bench's own creates); the controller's CPU and peak memory;
//! and its writes during the steady state (target: zero). Under
//! `cargo test --all-targets` (no `--bench`) it is a smoke run of 3 groups
//! that checks convergence and zero steady-state writes, not speed.
//!
//! `--restart`: after the steady state the controller is killed (SIGKILL)
//! and started again over the converged groups; reports the time until it
//! has passed every group once (each pass decides a group, and finds it
//! Ready), its writes (target: zero) and the API requests meanwhile.
//!
//! `--audit`: kube-apiserver writes an audit log, and the requests of the
//! convergence (and of the restart) are also counted by who made them
//! (the controller, kubectl, the control plane's own components), which
//! `apiserver_request_total` cannot say.
//!
//! `INTERLOCK_BENCH_BIN=path` runs that `interlock` binary instead of the
//! one built with the bench: an A/B of two builds under one bench, or a
//! profiler's wrapper script.

#[path = "support/audit_log.rs"]
mod audit_log;
#[path = "../tests/support/cluster.rs"]
#[allow(dead_code)]
mod cluster;

use audit_log::AuditLog;
use cluster::{Options, TestCluster};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Opts {
    groups: usize,
    members: usize,
    namespaces: usize,
    steady: u64,
    restart: bool,
    audit: bool,
    smoke: bool,
}

fn parse_args() -> Opts {
    let all: Vec<String> = std::env::args().skip(1).collect();
    let smoke = !all.iter().any(|a| a == "--bench");
    let mut o = Opts {
        groups: if smoke { 3 } else { 1000 },
        members: 5,
        namespaces: 1,
        steady: if smoke { 4 } else { 120 },
        restart: false,
        audit: false,
        smoke,
    };
    let mut it = all.into_iter();
    while let Some(a) = it.next() {
        let mut num = || it.next().and_then(|v| v.parse::<usize>().ok());
        match a.as_str() {
            "--groups" => o.groups = num().unwrap_or(o.groups),
            "--members" => o.members = num().unwrap_or(o.members),
            "--namespaces" => o.namespaces = num().unwrap_or(o.namespaces).max(1),
            "--steady" => o.steady = num().unwrap_or(o.steady as usize) as u64,
            "--restart" => o.restart = true,
            "--audit" => o.audit = true,
            _ => {}
        }
    }
    o
}

fn kubectl_ok(c: &TestCluster, args: &[&str], stdin: Option<&str>) {
    let out = match stdin {
        Some(s) => c.kubectl_stdin(args, s),
        None => c.kubectl(args),
    };
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The resources the controller touches.
const TOUCHED: [&str; 5] = [
    "resourcegroups",
    "configmaps",
    "services",
    "serviceaccounts",
    "leases",
];

/// kube-apiserver's request counts for the resources the controller
/// touches, by verb.
fn requests(c: &TestCluster) -> BTreeMap<String, f64> {
    let out = c.kubectl(&["get", "--raw", "/metrics"]);
    let text = String::from_utf8_lossy(&out.stdout);
    let mut by_verb = BTreeMap::new();
    for line in text
        .lines()
        .filter(|l| l.starts_with("apiserver_request_total{"))
    {
        let touched = TOUCHED
            .iter()
            .any(|r| line.contains(&format!("resource=\"{r}\"")));
        if !touched {
            continue;
        }
        let verb = line
            .split("verb=\"")
            .nth(1)
            .and_then(|v| v.split('"').next())
            .unwrap_or("?")
            .to_string();
        let n: f64 = line
            .rsplit(' ')
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        *by_verb.entry(verb).or_insert(0.0) += n;
    }
    by_verb
}

fn delta(after: &BTreeMap<String, f64>, before: &BTreeMap<String, f64>) -> BTreeMap<String, f64> {
    after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0.0)))
        .filter(|(_, v)| *v > 0.0)
        .collect()
}

/// Services are headless (the test cluster's service CIDR is a /24, and
/// ClusterIPs would run out after about 250 Services) and select nothing
/// (no workload here could become Ready without a Deployment controller).
fn member(i: usize, j: usize) -> Value {
    match j % 3 {
        0 => {
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("g{i}-cm{j}")},
                    "data": {"k": format!("v{j}")}})
        }
        1 => {
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": format!("g{i}-svc{j}")},
                    "spec": {"clusterIP": "None", "ports": [{"name": format!("p{j}"), "port": 80 + j as i64}]}})
        }
        _ => {
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": format!("g{i}-sa{j}")}})
        }
    }
}

fn spawn_controller(c: &TestCluster, admin: u16, log: &Path) -> Child {
    let bin = std::env::var_os("INTERLOCK_BENCH_BIN")
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_interlock").into());
    let mut cmd = Command::new(bin);
    cmd.args([
        "controller",
        "--no-leader-election",
        "--admin-addr",
        &format!("127.0.0.1:{admin}"),
    ])
    .env("KUBECONFIG", c.kubeconfig())
    .stdout(Stdio::null())
    .stderr(std::fs::File::create(log).expect("log"));
    // SAFETY: prctl is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    cmd.spawn().expect("start the controller")
}

fn writes(admin: u16) -> u64 {
    metric(admin, "interlock_controller_writes_total")
}

/// The sum of a counter's series on the controller's admin endpoint (0
/// while it does not answer).
fn metric(admin: u16, name: &str) -> u64 {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", admin)) else {
        return 0;
    };
    let _ = write!(s, "GET /metrics HTTP/1.0\r\n\r\n");
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.lines()
        .filter(|l| l.starts_with(name))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// A restart over converged groups: the controller killed, started again,
/// and timed until it has passed every group once; then a pause as long as
/// `settle` for passes that would write late.
fn restart(
    c: &TestCluster,
    mut child: Child,
    o: &Opts,
    admin: u16,
    log: &Path,
    audit: Option<&AuditLog>,
) {
    let _ = child.kill();
    let _ = child.wait();
    let before = requests(c);
    let audit_from = audit.map_or(0, AuditLog::mark);
    let start = Instant::now();
    let mut child = spawn_controller(c, admin, log);
    let limit = Duration::from_secs(60 + o.groups as u64 / 10);
    let mut passes = 0;
    // The peak while the caches list, before any pass is done.
    let mut listed = None;
    while start.elapsed() < limit {
        passes = metric(admin, "interlock_controller_reconciles_total");
        if passes > 0 && listed.is_none() {
            listed = Some((start.elapsed(), usage(child.id()).1));
        }
        if passes >= o.groups as u64 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let decided = start.elapsed();
    let (cpu, rss) = usage(child.id());
    std::thread::sleep(Duration::from_secs(10));
    let settled = memory(child.id());
    let restart_writes = writes(admin);
    let made = delta(&requests(c), &before);
    let _ = child.kill();
    let _ = child.wait();
    println!(
        "  restart: every group passed  {passes}/{} in {:.1} s",
        o.groups,
        decided.as_secs_f64()
    );
    println!("  restart: writes              {restart_writes}  (to 10 s after)");
    println!("  restart: controller CPU      {cpu:.1} s, peak RSS {rss:.0} MiB");
    if let Some((at, peak)) = listed {
        println!(
            "  restart: first pass done     at {:.1} s, peak RSS until then {peak:.0} MiB",
            at.as_secs_f64()
        );
    }
    println!("  restart: 10 s after          {settled}");
    println!("  restart: API requests        {made:?}");
    if let Some(a) = audit {
        print_audited(&a.count_since(audit_from, &TOUCHED), o.groups);
    }
    assert!(
        passes >= o.groups as u64,
        "only {passes} of {} groups passed after the restart",
        o.groups
    );
}

/// The audit log's counts, and the controller's own per group (the
/// requests with no user agent: kube's client sends none).
fn print_audited(by: &BTreeMap<String, usize>, groups: usize) {
    let own: usize = by
        .iter()
        .filter(|(k, _)| k.contains(" []"))
        .map(|(_, n)| n)
        .sum();
    println!(
        "  audit: the controller's own requests / group  {:.2}",
        own as f64 / groups.max(1) as f64
    );
    for (k, n) in by {
        println!("    {n:>8}  {k}");
    }
}

/// (CPU seconds, peak RSS in MiB) of a process, from /proc.
fn usage(pid: u32) -> (f64, f64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are fields 14 and 15 (11 and 12 after the comm).
    let cpu = (ticks(11) + ticks(12)) / 100.0;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    (cpu, kib(&status, "VmHWM:") / 1024.0)
}

/// Where a process's resident memory is now: anonymous (heap, stacks)
/// and file-backed (the binary's pages), and its threads.
fn memory(pid: u32) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    format!(
        "resident {:.0} MiB: anonymous {:.0} MiB, file {:.0} MiB; {} threads",
        kib(&status, "VmRSS:") / 1024.0,
        kib(&status, "RssAnon:") / 1024.0,
        kib(&status, "RssFile:") / 1024.0,
        kib(&status, "Threads:")
    )
}

/// A process's resident memory now, in MiB.
fn resident(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    kib(&status, "VmRSS:") / 1024.0
}

fn kib(status: &str, field: &str) -> f64 {
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        .unwrap_or(0.0)
}

/// The machine's load averages (it is shared: other work skews timings).
fn load_average() -> String {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    text.split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Groups Ready at their generation, in every namespace.
fn ready_count(c: &TestCluster) -> usize {
    let out = c.kubectl(&["get", "resourcegroups", "-A", "-o", "json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    v["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|g| g["status"]["observedGeneration"] == g["metadata"]["generation"])
        .filter(|g| {
            g["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
        .count()
}

/// A namespace with ServiceAccount `deployer`, allowed to manage the
/// members' kinds.
fn tenant(c: &TestCluster, ns: &str) {
    kubectl_ok(c, &["create", "namespace", ns], None);
    let rbac = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "deployer", "namespace": ns}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "deployer", "namespace": ns},
         "rules": [{"apiGroups": [""], "resources": ["configmaps", "services", "serviceaccounts"], "verbs": ["*"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "deployer", "namespace": ns},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "deployer"},
         "subjects": [{"kind": "ServiceAccount", "name": "deployer", "namespace": ns}]}]});
    kubectl_ok(c, &["apply", "-f", "-"], Some(&rbac.to_string()));
}

fn main() {
    let o = parse_args();
    let audit_dir = tempfile::tempdir().expect("tempdir");
    let audit = o.audit.then(|| AuditLog::new(audit_dir.path()));
    let c = TestCluster::start_with(Options {
        controller_manager: true,
        apiserver_args: audit
            .as_ref()
            .map_or(vec![], |a| a.apiserver_args(audit_dir.path())),
        ..Options::default()
    });
    let crd = Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests/base/crd-resourcegroup.yaml");
    kubectl_ok(&c, &["apply", "-f", &crd.display().to_string()], None);
    kubectl_ok(
        &c,
        &[
            "wait",
            "--for=condition=Established",
            "crd/resourcegroups.interlock.dev",
            "--timeout=60s",
        ],
        None,
    );
    let namespaces: Vec<String> = (0..o.namespaces).map(|i| format!("bench-{i}")).collect();
    for ns in &namespaces {
        tenant(&c, ns);
    }

    let admin = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port")
        .port();
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("controller.log");
    let load_before = load_average();
    let mut child = spawn_controller(&c, admin, &log);
    let before = requests(&c);
    let audit_from = audit.as_ref().map_or(0, AuditLog::mark);
    let start = Instant::now();
    let groups: Vec<Value> = (0..o.groups)
        .map(|i| {
            json!({"apiVersion": "interlock.dev/v1alpha1", "kind": "ResourceGroup",
                   "metadata": {"name": format!("g{i}"), "namespace": namespaces[i % namespaces.len()]},
                   "spec": {"serviceAccountName": "deployer",
                            "resources": (0..o.members).map(|j| member(i, j)).collect::<Vec<_>>()}})
        })
        .collect();
    for chunk in groups.chunks(200) {
        let list = json!({"apiVersion": "v1", "kind": "List", "items": chunk});
        kubectl_ok(&c, &["create", "-f", "-"], Some(&list.to_string()));
    }
    let limit = Duration::from_secs(60 + o.groups as u64 * 2);
    let mut ready = 0;
    let mut polls = 0;
    while start.elapsed() < limit {
        ready = ready_count(&c);
        polls += 1;
        if ready == o.groups {
            break;
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    let converge = start.elapsed();
    let converged_requests = delta(&requests(&c), &before);
    let audited = audit.as_ref().map(|a| a.count_since(audit_from, &TOUCHED));
    let (cpu, rss) = usage(child.id());
    let rss_converged = resident(child.id());
    let converged_memory = memory(child.id());
    let steady_writes_before = writes(admin);
    let steady_requests_before = requests(&c);
    std::thread::sleep(Duration::from_secs(o.steady));
    let steady_writes = writes(admin) - steady_writes_before;
    let steady_requests = delta(&requests(&c), &steady_requests_before);
    let (cpu_after, _) = usage(child.id());
    let rss_steady = resident(child.id());
    let load_after = load_average();

    let total: f64 = converged_requests.values().sum();
    // The bench's own requests: one POST per group, one LIST per poll.
    let controller_requests = total - o.groups as f64 - polls as f64;
    println!(
        "controller_converge: {} groups x {} members in {} namespace(s)",
        o.groups, o.members, o.namespaces
    );
    println!("  ready                  {ready}/{}", o.groups);
    println!("  time to converge       {:.1} s", converge.as_secs_f64());
    println!(
        "  API requests / group   {:.1}  (by verb: {converged_requests:?})",
        controller_requests / o.groups as f64
    );
    if let Some(by) = &audited {
        print_audited(by, o.groups);
    }
    println!(
        "  controller CPU         {cpu:.1} s to converge, {:.2} s in {} s steady",
        cpu_after - cpu,
        o.steady
    );
    println!(
        "  CPU per group          {:.4} s",
        cpu / o.groups.max(1) as f64
    );
    println!(
        "  controller peak RSS    {rss:.0} MiB  (resident {rss_converged:.0} MiB when converged, {rss_steady:.0} MiB after the steady state)"
    );
    println!("  when converged         {converged_memory}");
    println!("  steady-state writes    {steady_writes}  (API requests: {steady_requests:?})");
    println!("  machine load (1/5/15)  {load_before} at start, {load_after} at end");
    if ready != o.groups {
        let out = c.kubectl(&[
            "get",
            "resourcegroups",
            "-A",
            "-o",
            "jsonpath={.items[*].status.conditions}",
        ]);
        panic!(
            "only {ready} of {} groups became Ready: {}\n{}",
            o.groups,
            String::from_utf8_lossy(&out.stdout),
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    }
    if o.smoke {
        assert_eq!(steady_writes, 0, "a converged cluster gets no write");
    }
    if o.restart {
        restart(&c, child, &o, admin, &log, audit.as_ref());
        println!(
            "  machine load (1/5/15)  {} after the restart",
            load_average()
        );
    } else {
        let _ = child.kill();
        let _ = child.wait();
    }
}
