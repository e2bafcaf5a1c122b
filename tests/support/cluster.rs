//! A real control plane for integration tests, envtest style.
//!
//! [`TestCluster`] runs etcd and kube-apiserver (and optionally
//! kube-controller-manager with the garbage collector and namespace
//! controllers) as child processes on free loopback ports, in a temporary
//! directory holding their certificates, kubeconfig, data and logs.
//!
//! ```ignore
//! mod support;
//! use support::cluster::TestCluster;
//!
//! #[tokio::test]
//! async fn something() {
//!     let cluster = TestCluster::shared(); // one per test binary
//!     let ns = cluster.create_namespace("something");
//!     let client = cluster.client(); // inside a tokio runtime
//!     let out = cluster.kubectl(&["-n", &ns, "get", "configmaps"]);
//! }
//! ```
//!
//! The binaries come from `scripts/control-plane.sh` (built on first use and
//! cached outside the repository), or from `INTERLOCK_CONTROL_PLANE_DIR` when
//! that directory already holds them.
//!
//! Children die with the test process: each one is spawned with
//! `PR_SET_PDEATHSIG` from a thread that lives as long as the process, an
//! owned cluster kills them on drop, and the shared cluster is stopped (and its
//! directory removed) by an `atexit` hook, since statics are never dropped.
//!
//! Environment:
//! - `INTERLOCK_CONTROL_PLANE_DIR`: directory with the binaries.
//! - `INTERLOCK_CLUSTER_TIMEOUT_SECS`: how long a start may take (default 180).
//! - `INTERLOCK_KEEP_CLUSTER_DIR=1`: keep the temporary directory (logs, data).

use std::fmt::Write as _;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read as _, Write as _};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use base64::Engine as _;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose,
};

/// Binaries the harness needs in the control-plane directory.
const BINARIES: [&str; 5] = [
    "etcd",
    "etcdctl",
    "kube-apiserver",
    "kube-controller-manager",
    "kubectl",
];

/// How often readiness is polled.
const POLL: Duration = Duration::from_millis(100);

/// Attempts per component when its port turns out to be taken.
const PORT_ATTEMPTS: usize = 5;

/// What to start.
#[derive(Clone, Debug)]
pub struct Options {
    /// Also run kube-controller-manager with the garbagecollector and
    /// namespace controllers (cascading deletion, namespace cleanup).
    pub controller_manager: bool,
    /// kube-controller-manager's controllers act as their own
    /// ServiceAccounts of kube-system
    /// (`--use-service-account-credentials=true`, as kubeadm runs them)
    /// instead of as the admin user, so admission webhooks see the
    /// identities they see in a real cluster (the garbage collector as
    /// `system:serviceaccount:kube-system:generic-garbage-collector`).
    pub controller_service_accounts: bool,
    /// More kube-controller-manager controllers besides the garbage
    /// collector and namespace controllers, e.g.
    /// `clusterrole-aggregation-controller` (which fills the built-in
    /// `admin`, `edit` and `view` roles). Needs `controller_manager`.
    pub extra_controllers: Vec<String>,
    /// Extra kube-apiserver flags, e.g. `--watch-cache=false` or
    /// `--enable-aggregator-routing=true`.
    pub apiserver_args: Vec<String>,
    /// Addresses besides loopback at which clients reach kube-apiserver
    /// (the host's end of a veth pair, for a process in a network namespace
    /// of the test's own). When any is given, kube-apiserver binds every
    /// address (`--bind-address=0.0.0.0`, still advertising 127.0.0.1) and
    /// its serving certificate names them too. Empty (the default): loopback
    /// only.
    pub serving_addresses: Vec<Ipv4Addr>,
    /// How long the whole start may take before it fails.
    pub timeout: Duration,
    /// Fault injection for the harness's own tests: the first attempt of
    /// each component gets a port that is already taken.
    pub simulate_port_conflict: bool,
}

impl Default for Options {
    fn default() -> Self {
        let secs = std::env::var("INTERLOCK_CLUSTER_TIMEOUT_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(180);
        Options {
            controller_manager: false,
            controller_service_accounts: false,
            extra_controllers: Vec::new(),
            apiserver_args: Vec::new(),
            serving_addresses: Vec::new(),
            timeout: Duration::from_secs(secs),
            simulate_port_conflict: false,
        }
    }
}

/// One running component.
struct Proc {
    name: &'static str,
    child: Child,
}

/// A running etcd + kube-apiserver (+ kube-controller-manager).
pub struct TestCluster {
    /// The temporary directory; `None` once removed (or when kept).
    dir: Mutex<Option<tempfile::TempDir>>,
    path: PathBuf,
    bin_dir: PathBuf,
    kubeconfig: PathBuf,
    url: String,
    etcd_url: String,
    config: kube::Config,
    serving_ca_pem: String,
    /// Started components, stopped in reverse order.
    procs: Mutex<Vec<Proc>>,
    logs: Vec<(&'static str, PathBuf)>,
    /// kube-apiserver's flags, to start it again on the same port and etcd.
    apiserver_args: Vec<String>,
}

static SHARED: OnceLock<Result<TestCluster, String>> = OnceLock::new();

extern "C" fn stop_shared_at_exit() {
    if let Some(Ok(cluster)) = SHARED.get() {
        cluster.stop();
    }
}

impl TestCluster {
    /// The cluster shared by all tests of this test binary (with
    /// kube-controller-manager), started on first use. Isolate tests by
    /// namespace ([`TestCluster::create_namespace`]).
    ///
    /// Panics (in every test that asks) when the cluster cannot start.
    pub fn shared() -> &'static TestCluster {
        let result = SHARED.get_or_init(|| {
            let started = Self::try_start_with(Options {
                controller_manager: true,
                ..Options::default()
            });
            if started.is_ok() {
                // SAFETY: registers a plain extern "C" function without
                // arguments; it only touches 'static data.
                unsafe { libc::atexit(stop_shared_at_exit) };
            }
            started
        });
        match result {
            Ok(cluster) => cluster,
            Err(e) => panic!("the shared test cluster did not start:\n{e}"),
        }
    }

    /// A cluster of one's own (etcd and kube-apiserver), stopped on drop.
    pub fn start() -> TestCluster {
        Self::start_with(Options::default())
    }

    /// A cluster of one's own, stopped on drop. Panics with the components'
    /// logs when it does not start.
    pub fn start_with(options: Options) -> TestCluster {
        match Self::try_start_with(options) {
            Ok(c) => c,
            Err(e) => panic!("the test cluster did not start:\n{e}"),
        }
    }

    /// Like [`TestCluster::start_with`], with the failure as a message that
    /// includes the tails of the components' logs.
    pub fn try_start_with(options: Options) -> Result<TestCluster, String> {
        // Start on a thread of its own: it blocks on a private tokio runtime
        // and may be called from inside a test's runtime.
        thread::Builder::new()
            .name("test-cluster-start".into())
            .spawn(move || Starter::run(options))
            .map_err(|e| format!("cannot spawn the start thread: {e}"))?
            .join()
            .map_err(|_| "the start thread panicked".to_string())?
    }

    /// A client for the admin user. Call it inside a tokio runtime (the
    /// client's worker lives on the runtime it is made on, so make one per
    /// test rather than keeping one in a static).
    pub fn client(&self) -> kube::Client {
        kube::Client::try_from(self.config.clone())
            .unwrap_or_else(|e| panic!("cannot build a kube client: {e}"))
    }

    /// The admin client configuration.
    pub fn config(&self) -> kube::Config {
        self.config.clone()
    }

    /// The admin kubeconfig.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// `https://127.0.0.1:PORT` of the kube-apiserver.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// `http://127.0.0.1:PORT` of etcd.
    pub fn etcd_url(&self) -> &str {
        &self.etcd_url
    }

    /// PEM of the CA that signed the kube-apiserver's serving certificate.
    pub fn serving_ca_pem(&self) -> &str {
        &self.serving_ca_pem
    }

    /// The temporary directory (certificates, kubeconfig, data, logs).
    pub fn dir(&self) -> &Path {
        &self.path
    }

    /// Path of one of the control-plane binaries (`kubectl`, `etcdctl`, ...).
    pub fn bin(&self, name: &str) -> PathBuf {
        self.bin_dir.join(name)
    }

    /// Process ids of the running components, by name.
    pub fn pids(&self) -> Vec<(&'static str, u32)> {
        lock(&self.procs)
            .iter()
            .map(|p| (p.name, p.child.id()))
            .collect()
    }

    /// Runs the built kubectl as the admin user.
    pub fn kubectl(&self, args: &[&str]) -> Output {
        self.kubectl_with_stdin(args, None)
    }

    /// Runs the built kubectl as the admin user with `stdin` as its input
    /// (for `apply -f -`).
    pub fn kubectl_stdin(&self, args: &[&str], stdin: &str) -> Output {
        self.kubectl_with_stdin(args, Some(stdin))
    }

    fn kubectl_with_stdin(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let mut cmd = Command::new(self.bin("kubectl"));
        cmd.args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .env("KUBECACHEDIR", self.path.join("kubectl-cache"))
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run kubectl {args:?}: {e}"));
        if let Some(input) = stdin {
            let mut pipe = child.stdin.take().expect("kubectl stdin is piped");
            let input = input.to_owned();
            // Write from another thread so a large input cannot deadlock
            // against kubectl's output.
            let writer = thread::spawn(move || pipe.write_all(input.as_bytes()));
            let out = child
                .wait_with_output()
                .unwrap_or_else(|e| panic!("kubectl {args:?} failed to run: {e}"));
            if let Ok(Err(e)) = writer.join() {
                if e.kind() != io::ErrorKind::BrokenPipe {
                    panic!("cannot write kubectl {args:?} stdin: {e}");
                }
            }
            out
        } else {
            child
                .wait_with_output()
                .unwrap_or_else(|e| panic!("kubectl {args:?} failed to run: {e}"))
        }
    }

    /// Creates a namespace named `PREFIX-N-XXXX` (unique in this cluster and
    /// process) and returns its name.
    pub fn create_namespace(&self, prefix: &str) -> String {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let mut clean: String = prefix
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '-'
                }
            })
            .collect();
        clean.truncate(40);
        let clean = clean.trim_matches('-');
        let clean = if clean.is_empty() { "test" } else { clean };
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let salt = std::process::id()
            ^ (std::time::UNIX_EPOCH
                .elapsed()
                .unwrap_or_default()
                .subsec_nanos());
        let name = format!("{clean}-{n}-{:04x}", salt & 0xffff);
        let out = self.kubectl(&["create", "namespace", &name]);
        assert!(
            out.status.success(),
            "kubectl create namespace {name} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        name
    }

    /// The last `lines` lines of each component's log.
    pub fn log_tails(&self, lines: usize) -> String {
        log_tails(&self.logs, lines)
    }

    /// A guard that prints the components' log tails when the current test
    /// panics while it is alive (for the shared cluster, which is never
    /// dropped): `let _logs = cluster.logs_on_panic();`.
    pub fn logs_on_panic(&self) -> LogsOnPanic<'_> {
        LogsOnPanic { cluster: self }
    }

    /// Stops kube-apiserver (SIGKILL), leaves it down for `down`, then
    /// starts it again with the same flags (same port, certificates and
    /// etcd data) and waits until it is ready: an API server outage for
    /// the processes under test, with nothing lost.
    pub fn restart_apiserver(&self, down: Duration) {
        {
            let mut procs = lock(&self.procs);
            let p = procs
                .iter_mut()
                .find(|p| p.name == "kube-apiserver")
                .expect("kube-apiserver runs");
            let _ = p.child.kill();
            let _ = p.child.wait();
        }
        thread::sleep(down);
        let log = self.path.join("kube-apiserver.log");
        let child = spawn_logged(
            &self.bin_dir,
            &self.path,
            "kube-apiserver",
            &self.apiserver_args,
            &log,
        )
        .unwrap_or_else(|e| panic!("kube-apiserver did not start again: {e}"));
        {
            let mut procs = lock(&self.procs);
            let p = procs
                .iter_mut()
                .find(|p| p.name == "kube-apiserver")
                .expect("kube-apiserver was listed");
            p.child = child;
        }
        let deadline = Instant::now() + Duration::from_secs(180);
        loop {
            let out = self.kubectl(&["get", "--raw", "/readyz"]);
            if out.status.success() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "kube-apiserver not ready again after 180 s: {}\n{}",
                String::from_utf8_lossy(&out.stderr),
                self.log_tails(40)
            );
            thread::sleep(Duration::from_millis(250));
        }
    }

    /// Kills the components and removes the directory (unless kept).
    fn stop(&self) {
        // try_lock: this also runs from atexit, where another thread may
        // still hold a lock; PDEATHSIG covers that case.
        if let Ok(mut procs) = self.procs.try_lock() {
            while let Some(mut p) = procs.pop() {
                let _ = p.child.kill();
                let _ = p.child.wait();
            }
        }
        if let Ok(mut dir) = self.dir.try_lock() {
            if let Some(d) = dir.take() {
                if keep_dir() {
                    let kept = d.keep();
                    eprintln!("test cluster directory kept: {}", kept.display());
                }
            }
        }
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        if thread::panicking() {
            eprintln!(
                "test cluster in {} (logs):\n{}",
                self.path.display(),
                self.log_tails(40)
            );
        }
        self.stop();
    }
}

/// See [`TestCluster::logs_on_panic`].
pub struct LogsOnPanic<'a> {
    cluster: &'a TestCluster,
}

impl Drop for LogsOnPanic<'_> {
    fn drop(&mut self) {
        if thread::panicking() {
            eprintln!(
                "test cluster in {} (logs):\n{}",
                self.cluster.path.display(),
                self.cluster.log_tails(40)
            );
        }
    }
}

fn keep_dir() -> bool {
    std::env::var("INTERLOCK_KEEP_CLUSTER_DIR").is_ok_and(|v| v == "1" || v == "true")
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

// ---------------------------------------------------------------------------
// Starting
// ---------------------------------------------------------------------------

/// State while starting; on failure its drop kills what was started.
struct Starter {
    options: Options,
    deadline: Instant,
    dir: Option<tempfile::TempDir>,
    path: PathBuf,
    bin_dir: PathBuf,
    procs: Vec<Proc>,
    logs: Vec<(&'static str, PathBuf)>,
    apiserver_args: Vec<String>,
    rt: tokio::runtime::Runtime,
}

impl Drop for Starter {
    fn drop(&mut self) {
        while let Some(mut p) = self.procs.pop() {
            let _ = p.child.kill();
            let _ = p.child.wait();
        }
        if let Some(d) = self.dir.take() {
            if keep_dir() {
                let _ = d.keep();
            }
        }
    }
}

impl Starter {
    fn run(options: Options) -> Result<TestCluster, String> {
        // kube's rustls needs a process-wide provider; a second install fails
        // harmlessly.
        let _ = rustls::crypto::ring::default_provider().install_default();
        // May build the binaries first (many minutes, once): not part of the
        // start's timeout.
        let bin_dir = control_plane_dir()?;
        let deadline = Instant::now() + options.timeout;
        let dir = tempfile::Builder::new()
            .prefix("interlock-cluster-")
            .tempdir()
            .map_err(|e| format!("cannot create a temporary directory: {e}"))?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot build a tokio runtime: {e}"))?;
        let mut s = Starter {
            options,
            deadline,
            path: dir.path().to_path_buf(),
            dir: Some(dir),
            bin_dir,
            procs: Vec::new(),
            logs: Vec::new(),
            apiserver_args: Vec::new(),
            rt,
        };
        s.start().map_err(|e| {
            format!(
                "{e}\n(directory {}{})\n{}",
                s.path.display(),
                if keep_dir() {
                    ", kept"
                } else {
                    "; set INTERLOCK_KEEP_CLUSTER_DIR=1 to keep it"
                },
                log_tails(&s.logs, 40)
            )
        })
    }

    fn start(&mut self) -> Result<TestCluster, String> {
        let certs = Certs::write(&self.path.join("certs"), &self.options.serving_addresses)?;
        let etcd_url = self.start_etcd()?;
        let (url, kubeconfig, config) = self.start_apiserver(&certs, &etcd_url)?;
        if self.options.controller_manager {
            self.start_controller_manager(&kubeconfig)?;
        }
        Ok(TestCluster {
            dir: Mutex::new(self.dir.take()),
            path: self.path.clone(),
            bin_dir: self.bin_dir.clone(),
            kubeconfig,
            url,
            etcd_url,
            config,
            serving_ca_pem: certs.serving_ca_pem,
            procs: Mutex::new(std::mem::take(&mut self.procs)),
            logs: self.logs.clone(),
            apiserver_args: std::mem::take(&mut self.apiserver_args),
        })
    }

    /// Ports for one attempt to start a component; with
    /// `simulate_port_conflict`, the first attempt's first port is held by
    /// the returned listener until the attempt is over.
    fn ports<const N: usize>(
        &self,
        attempt: usize,
    ) -> Result<([u16; N], Option<TcpListener>), String> {
        let mut ports = free_ports::<N>()?;
        if !(self.options.simulate_port_conflict && attempt == 0) {
            return Ok((ports, None));
        }
        let taken = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .map_err(|e| format!("cannot bind a loopback port: {e}"))?;
        ports[0] = taken.local_addr().map_err(|e| e.to_string())?.port();
        Ok((ports, Some(taken)))
    }

    fn remaining(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }

    /// Spawns a component with its output appended to `NAME.log`.
    fn spawn(&mut self, name: &'static str, args: &[String]) -> Result<(), String> {
        let log = self.path.join(format!("{name}.log"));
        if !self.logs.iter().any(|(n, _)| *n == name) {
            self.logs.push((name, log.clone()));
        }
        let child = spawn_logged(&self.bin_dir, &self.path, name, args, &log)?;
        self.procs.push(Proc { name, child });
        Ok(())
    }

    /// If the last started component has exited: Ok(Some(port_conflict)).
    fn exited(&mut self) -> Result<Option<bool>, String> {
        let p = self
            .procs
            .last_mut()
            .ok_or_else(|| "no component started".to_string())?;
        match p.child.try_wait() {
            Ok(None) => Ok(None),
            Ok(Some(status)) => {
                let name = p.name;
                self.procs.pop();
                let log = self.path.join(format!("{name}.log"));
                let text = fs::read_to_string(&log).unwrap_or_default();
                // Only the last run counts (the log is appended to).
                let last = text.rsplit("=== ").next().unwrap_or("");
                let conflict = last.contains("address already in use");
                if conflict {
                    eprintln!("{name} exited ({status}): port taken, retrying on other ports");
                }
                Ok(Some(conflict))
            }
            Err(e) => Err(format!("cannot wait for {}: {e}", p.name)),
        }
    }

    /// Polls `ready` until it holds, the component exits or time runs out.
    /// Ok(true): ready; Ok(false): exited because of a port conflict.
    fn wait_ready(
        &mut self,
        name: &str,
        mut ready: impl FnMut(&mut Self) -> Result<(), String>,
    ) -> Result<bool, String> {
        loop {
            let last_err = match ready(self) {
                Ok(()) => return Ok(true),
                Err(e) => e,
            };
            match self.exited()? {
                None => {}
                Some(true) => return Ok(false),
                Some(false) => return Err(format!("{name} exited during start")),
            }
            if self.remaining().is_zero() {
                return Err(format!(
                    "{name} not ready after {:?} (last check: {last_err})",
                    self.options.timeout
                ));
            }
            thread::sleep(POLL);
        }
    }

    fn start_etcd(&mut self) -> Result<String, String> {
        for attempt in 0..PORT_ATTEMPTS {
            let ([client, peer], _taken) = self.ports::<2>(attempt)?;
            let data = self.path.join(format!("etcd-data-{attempt}"));
            let client_url = format!("http://127.0.0.1:{client}");
            let peer_url = format!("http://127.0.0.1:{peer}");
            let args = vec![
                "--name=default".to_string(),
                format!("--data-dir={}", data.display()),
                "--unsafe-no-fsync=true".into(),
                "--log-level=warn".into(),
                format!("--listen-client-urls={client_url}"),
                format!("--advertise-client-urls={client_url}"),
                format!("--listen-peer-urls={peer_url}"),
                format!("--initial-advertise-peer-urls={peer_url}"),
                format!("--initial-cluster=default={peer_url}"),
                // No periodic compaction by etcd itself (the default, stated
                // because tests that provoke 410 Gone compact by hand).
                "--auto-compaction-retention=0".into(),
            ];
            self.spawn("etcd", &args)?;
            let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, client));
            if self.wait_ready("etcd", |_| etcd_healthy(addr))? {
                return Ok(client_url);
            }
        }
        Err(format!("etcd: ports taken {PORT_ATTEMPTS} times in a row"))
    }

    fn start_apiserver(
        &mut self,
        certs: &Certs,
        etcd_url: &str,
    ) -> Result<(String, PathBuf, kube::Config), String> {
        let kubeconfig = self.path.join("kubeconfig");
        for attempt in 0..PORT_ATTEMPTS {
            let ([port], _taken) = self.ports::<1>(attempt)?;
            let url = format!("https://127.0.0.1:{port}");
            let d = &certs.dir;
            let mut args = vec![
                "--advertise-address=127.0.0.1".to_string(),
                if self.options.serving_addresses.is_empty() {
                    "--bind-address=127.0.0.1".into()
                } else {
                    "--bind-address=0.0.0.0".into()
                },
                format!("--secure-port={port}"),
                "--allow-privileged=true".into(),
                "--authorization-mode=RBAC".into(),
                format!("--cert-dir={}", self.path.join("apiserver-certs").display()),
                format!("--tls-cert-file={}", d.join("apiserver.crt").display()),
                format!(
                    "--tls-private-key-file={}",
                    d.join("apiserver.key").display()
                ),
                format!("--client-ca-file={}", d.join("client-ca.crt").display()),
                "--disable-admission-plugins=ServiceAccount".into(),
                format!("--etcd-servers={etcd_url}"),
                format!("--service-account-issuer={url}/"),
                format!("--service-account-key-file={}", d.join("sa.pub").display()),
                format!(
                    "--service-account-signing-key-file={}",
                    d.join("sa.key").display()
                ),
                "--service-cluster-ip-range=10.0.0.0/24".into(),
                // The default reconciler writes 127.0.0.1 into the
                // `kubernetes` Endpoints, which rejects loopback addresses,
                // and logs that failure every 10 seconds.
                "--endpoint-reconciler-type=none".into(),
            ];
            args.extend(self.options.apiserver_args.iter().cloned());
            write_kubeconfig(&kubeconfig, &url, certs)?;
            let config = self.rt.block_on(async {
                let kc = kube::config::Kubeconfig::read_from(&kubeconfig)
                    .map_err(|e| format!("cannot read {}: {e}", kubeconfig.display()))?;
                kube::Config::from_custom_kubeconfig(
                    kc,
                    &kube::config::KubeConfigOptions::default(),
                )
                .await
                .map_err(|e| format!("cannot load {}: {e}", kubeconfig.display()))
            })?;
            self.spawn("kube-apiserver", &args)?;
            let client = {
                let _guard = self.rt.enter();
                kube::Client::try_from(config.clone())
                    .map_err(|e| format!("cannot build a kube client: {e}"))?
            };
            if self.wait_ready("kube-apiserver", |s| {
                s.rt.block_on(get_text(&client, "/readyz?verbose"))
                    .map(drop)
            })? {
                self.apiserver_args = args;
                return Ok((url, kubeconfig, config));
            }
        }
        Err(format!(
            "kube-apiserver: ports taken {PORT_ATTEMPTS} times in a row"
        ))
    }

    fn start_controller_manager(&mut self, kubeconfig: &Path) -> Result<(), String> {
        let kc = kubeconfig.display().to_string();
        let mut controllers = vec![
            "garbage-collector-controller".to_string(),
            "namespace-controller".into(),
        ];
        controllers.extend(self.options.extra_controllers.iter().cloned());
        for attempt in 0..PORT_ATTEMPTS {
            let ([port], _taken) = self.ports::<1>(attempt)?;
            let args = vec![
                format!("--kubeconfig={kc}"),
                format!("--controllers={}", controllers.join(",")),
                "--leader-elect=false".into(),
                format!(
                    "--use-service-account-credentials={}",
                    self.options.controller_service_accounts
                ),
                "--bind-address=127.0.0.1".into(),
                format!("--secure-port={port}"),
            ];
            self.spawn("kube-controller-manager", &args)?;
            // Its own self-signed serving certificate: no verification.
            let mut config = kube::Config::new(
                format!("https://127.0.0.1:{port}")
                    .parse()
                    .map_err(|e| format!("bad url: {e}"))?,
            );
            config.accept_invalid_certs = true;
            let client = {
                let _guard = self.rt.enter();
                kube::Client::try_from(config).map_err(|e| format!("cannot build a client: {e}"))?
            };
            if self.wait_ready("kube-controller-manager", |s| {
                s.rt.block_on(get_text(&client, "/healthz")).map(drop)
            })? {
                return Ok(());
            }
        }
        Err(format!(
            "kube-controller-manager: ports taken {PORT_ATTEMPTS} times in a row"
        ))
    }
}

/// Spawns component `name` of `bin_dir` in `dir`, its output appended to
/// `log` after a line naming its flags.
fn spawn_logged(
    bin_dir: &Path,
    dir: &Path,
    name: &str,
    args: &[String],
    log: &Path,
) -> Result<Child, String> {
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| format!("cannot open {}: {e}", log.display()))?;
    let _ = writeln!(file, "=== {name} {}", args.join(" "));
    let err = file
        .try_clone()
        .map_err(|e| format!("cannot open {}: {e}", log.display()))?;
    let mut cmd = Command::new(bin_dir.join(name));
    cmd.args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::from(file))
        .stderr(Stdio::from(err));
    spawn_tied_to_process(cmd)
        .map_err(|e| format!("cannot start {}: {e}", bin_dir.join(name).display()))
}

async fn get_text(client: &kube::Client, path: &str) -> Result<String, String> {
    let req = http::Request::get(path)
        .body(Vec::new())
        .map_err(|e| e.to_string())?;
    tokio::time::timeout(Duration::from_secs(5), client.request_text(req))
        .await
        .map_err(|_| format!("GET {path} timed out"))?
        .map_err(|e| format!("GET {path}: {e}"))
}

/// etcd's `/health` over plain HTTP.
fn etcd_healthy(addr: SocketAddr) -> Result<(), String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(1))
        .map_err(|e| format!("connect {addr}: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(2)))
        .map_err(|e| e.to_string())?;
    s.write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .map_err(|e| format!("write {addr}: {e}"))?;
    let mut body = String::new();
    s.read_to_string(&mut body)
        .map_err(|e| format!("read {addr}: {e}"))?;
    let ok = body.starts_with("HTTP/1.0 200") || body.starts_with("HTTP/1.1 200");
    if ok && body.contains("\"health\":\"true\"") {
        return Ok(());
    }
    Err(format!(
        "/health answered {:?}",
        body.lines().last().unwrap_or("")
    ))
}

/// `N` distinct free loopback ports. Another process may take one before the
/// component binds it; callers retry on "address already in use".
fn free_ports<const N: usize>() -> Result<[u16; N], String> {
    let mut listeners = Vec::with_capacity(N);
    let mut ports = [0u16; N];
    // Holding every listener until all are bound keeps the ports distinct.
    for p in ports.iter_mut() {
        let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .map_err(|e| format!("cannot bind a loopback port: {e}"))?;
        *p = l.local_addr().map_err(|e| e.to_string())?.port();
        listeners.push(l);
    }
    Ok(ports)
}

/// Spawns `cmd` so that it receives SIGKILL when this process dies.
///
/// `PR_SET_PDEATHSIG` fires when the *thread* that forked the child exits,
/// and test threads end with their test; so every child is forked by one
/// thread that lives until the process ends.
pub fn spawn_tied_to_process(mut cmd: Command) -> io::Result<Child> {
    type Request = (Command, mpsc::Sender<io::Result<Child>>);
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<Request>>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Request>();
        // The sender is in a static and never dropped, so this thread runs
        // until the process exits.
        let _ = thread::Builder::new()
            .name("test-cluster-spawner".into())
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    let _ = reply.send(cmd.spawn());
                }
            });
        Mutex::new(tx)
    });
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    // SAFETY: the closure runs between fork and exec and only makes
    // async-signal-safe system calls (prctl, getppid).
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ) != 0
            {
                return Err(io::Error::last_os_error());
            }
            // The parent may have died before prctl took effect.
            if libc::getppid() != parent {
                return Err(io::Error::other("parent exited"));
            }
            Ok(())
        });
    }
    let (tx, rx) = mpsc::channel();
    lock(spawner)
        .send((cmd, tx))
        .map_err(|_| io::Error::other("the spawner thread is gone"))?;
    rx.recv()
        .map_err(|_| io::Error::other("the spawner thread is gone"))?
}

/// The control-plane binaries: `INTERLOCK_CONTROL_PLANE_DIR` when it already
/// holds them, otherwise whatever `scripts/control-plane.sh` prints (it builds
/// them on first use and returns at once when they are cached).
pub fn control_plane_dir() -> Result<PathBuf, String> {
    static DIR: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    DIR.get_or_init(|| {
        if let Some(dir) = std::env::var_os("INTERLOCK_CONTROL_PLANE_DIR") {
            let dir = PathBuf::from(dir);
            if has_binaries(&dir) {
                return Ok(dir);
            }
        }
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/control-plane.sh");
        eprintln!(
            "test cluster: running {} (builds the control plane when it is not cached)",
            script.display()
        );
        let out = Command::new(&script)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .output()
            .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
        if !out.status.success() {
            return Err(format!(
                "{} failed ({}); its error is printed above",
                script.display(),
                out.status
            ));
        }
        let stdout = String::from_utf8_lossy(&out.stdout);
        let dir = PathBuf::from(stdout.lines().last().unwrap_or("").trim());
        if !has_binaries(&dir) {
            return Err(format!(
                "{} printed {:?}, which does not hold {BINARIES:?}",
                script.display(),
                dir
            ));
        }
        Ok(dir)
    })
    .clone()
}

fn has_binaries(dir: &Path) -> bool {
    BINARIES.iter().all(|b| dir.join(b).is_file())
}

fn log_tails(logs: &[(&'static str, PathBuf)], lines: usize) -> String {
    let mut out = String::new();
    for (name, path) in logs {
        let text = fs::read_to_string(path).unwrap_or_else(|e| format!("(cannot read: {e})"));
        let all: Vec<&str> = text.lines().collect();
        let tail = &all[all.len().saturating_sub(lines)..];
        let _ = writeln!(
            out,
            "----- {name}: last {} lines of {} -----",
            tail.len(),
            path.display()
        );
        for l in tail {
            let _ = writeln!(out, "{l}");
        }
    }
    out
}

// ---------------------------------------------------------------------------
// Certificates and kubeconfig
// ---------------------------------------------------------------------------

struct Certs {
    dir: PathBuf,
    serving_ca_pem: String,
    admin_cert_pem: String,
    admin_key_pem: String,
}

impl Certs {
    /// Client CA, serving CA and serving certificate, admin client
    /// certificate (CN=admin, O=system:masters), service-account key pair.
    /// The serving certificate names loopback, the `kubernetes` Service and
    /// `extra` addresses.
    fn write(dir: &Path, extra: &[Ipv4Addr]) -> Result<Certs, String> {
        fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let e = |e: rcgen::Error| format!("certificate generation failed: {e}");

        let client_ca = ca("interlock-test-client-ca").map_err(e)?;
        let serving_ca = ca("interlock-test-serving-ca").map_err(e)?;

        let mut names = vec![
            "127.0.0.1".to_string(),
            "::1".into(),
            "localhost".into(),
            "10.0.0.1".into(),
            "kubernetes".into(),
            "kubernetes.default".into(),
            "kubernetes.default.svc".into(),
            "kubernetes.default.svc.cluster.local".into(),
        ];
        names.extend(extra.iter().map(Ipv4Addr::to_string));
        let mut serving = CertificateParams::new(names).map_err(e)?;
        serving.distinguished_name = dn("kube-apiserver", None);
        serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        serving.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        let serving_key = KeyPair::generate().map_err(e)?;
        let serving_cert = serving.signed_by(&serving_key, &serving_ca).map_err(e)?;

        let mut admin = CertificateParams::new(Vec::<String>::new()).map_err(e)?;
        admin.distinguished_name = dn("admin", Some("system:masters"));
        admin.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        admin.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        let admin_key = KeyPair::generate().map_err(e)?;
        let admin_cert = admin.signed_by(&admin_key, &client_ca).map_err(e)?;

        let sa = KeyPair::generate().map_err(e)?;

        let files = [
            ("client-ca.crt", client_ca.pem()),
            ("serving-ca.crt", serving_ca.pem()),
            ("apiserver.crt", serving_cert.pem()),
            ("apiserver.key", serving_key.serialize_pem()),
            ("admin.crt", admin_cert.pem()),
            ("admin.key", admin_key.serialize_pem()),
            ("sa.key", sa.serialize_pem()),
            ("sa.pub", sa.public_key_pem()),
        ];
        for (name, pem) in &files {
            let path = dir.join(name);
            fs::write(&path, pem).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        }
        Ok(Certs {
            dir: dir.to_path_buf(),
            serving_ca_pem: serving_ca.pem(),
            admin_cert_pem: admin_cert.pem(),
            admin_key_pem: admin_key.serialize_pem(),
        })
    }
}

fn dn(cn: &str, org: Option<&str>) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, cn);
    if let Some(o) = org {
        dn.push(DnType::OrganizationName, o);
    }
    dn
}

fn ca(cn: &str) -> Result<CertifiedIssuer<'static, KeyPair>, rcgen::Error> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.distinguished_name = dn(cn, None);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    CertifiedIssuer::self_signed(params, KeyPair::generate()?)
}

fn write_kubeconfig(path: &Path, url: &str, certs: &Certs) -> Result<(), String> {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let text = format!(
        "apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: {url}
    certificate-authority-data: {ca}
users:
- name: admin
  user:
    client-certificate-data: {cert}
    client-key-data: {key}
contexts:
- name: test
  context:
    cluster: test
    user: admin
    namespace: default
current-context: test
",
        ca = b64(&certs.serving_ca_pem),
        cert = b64(&certs.admin_cert_pem),
        key = b64(&certs.admin_key_pem),
    );
    let mut f = File::create(path).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    f.write_all(text.as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}
