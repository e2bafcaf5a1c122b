//! `interlock controller` as a child process of a test, killed on drop,
//! with its admin endpoint's metrics and readiness at hand.

use super::cluster::TestCluster;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running `interlock controller`, killed (SIGKILL, as a crash) on drop.
pub struct Controller {
    child: Child,
    admin: u16,
    log: PathBuf,
}

impl Drop for Controller {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Controller {
    /// Starts `interlock controller ARGS` against `cluster`, its log in
    /// `dir`, and waits until it is ready.
    pub fn start(cluster: &TestCluster, dir: &Path, args: &[&str]) -> Controller {
        Controller::start_as(cluster.kubeconfig(), dir, args)
    }

    /// [`Controller::start`] with another kubeconfig (one that impersonates
    /// the controller's ServiceAccount, to test its RBAC).
    pub fn start_as(kubeconfig: &Path, dir: &Path, args: &[&str]) -> Controller {
        let c = Controller::spawn_as(kubeconfig, dir, args);
        c.wait_ready();
        c
    }

    /// Starts `interlock controller ARGS` without waiting for readiness
    /// (to watch it stay unready).
    pub fn spawn_as(kubeconfig: &Path, dir: &Path, args: &[&str]) -> Controller {
        let admin = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
        let log = dir.join(format!("controller-{admin}.log"));
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_interlock"));
        cmd.arg("controller")
            .args(args)
            .args(["--admin-addr", &format!("127.0.0.1:{admin}")])
            .env("KUBECONFIG", kubeconfig)
            .env("RUST_LOG", "info,interlock=debug")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log file"));
        let child = super::cluster::spawn_tied_to_process(cmd).expect("start interlock controller");
        Controller { child, admin, log }
    }

    /// Whether `/readyz` answers 200 now.
    pub fn ready(&self) -> bool {
        matches!(self.get("/readyz"), Some((200, _)))
    }

    /// Whether the process is still running (it did not exit on its own).
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    fn get(&self, path: &str) -> Option<(u16, String)> {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.admin)).ok()?;
        write!(s, "GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").ok()?;
        let mut out = String::new();
        s.read_to_string(&mut out).ok()?;
        let code = out.split_whitespace().nth(1)?.parse().ok()?;
        let body = out.split("\r\n\r\n").nth(1).unwrap_or("").to_string();
        Some((code, body))
    }

    pub fn wait_ready(&self) {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(60) {
            if matches!(self.get("/readyz"), Some((200, _))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        panic!("the controller did not become ready:\n{}", self.log());
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// A counter of the admin endpoint, summed over its labels.
    pub fn counter(&self, name: &str) -> u64 {
        let (_, body) = self.get("/metrics").expect("metrics");
        body.lines()
            .filter(|l| l.starts_with(name))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum()
    }

    pub fn writes(&self) -> u64 {
        self.counter("interlock_controller_writes_total")
    }

    /// Reconciles that ran, successful or not.
    pub fn passes(&self) -> u64 {
        self.counter("interlock_controller_reconciles_total")
            + self.counter("interlock_controller_reconcile_errors_total")
    }
}

/// Installs the ResourceGroup CRD of manifests/base and waits until it is
/// served.
pub fn install_resource_group_crd(c: &TestCluster) {
    let crd = Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests/base/crd-resourcegroup.yaml");
    let crd = crd.display().to_string();
    for args in [
        vec!["apply", "-f", crd.as_str()],
        vec![
            "wait",
            "--for=condition=Established",
            "crd/resourcegroups.interlock.dev",
            "--timeout=60s",
        ],
    ] {
        let out = c.kubectl(&args);
        assert!(
            out.status.success(),
            "kubectl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Every log file of a folder of replicas, read now and joined, for a
/// failure message.
pub fn logs_in(dir: &Path) -> String {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n----\n")
}
