//! Flag groups of commands, flattened into [`super::flags`]: parsed here
//! and handed to the library as its plain options (`UnstickOptions`,
//! `EvalOptions`, `Boundary`, `ClaimOptions`, the continuous audit's `LiveOptions`).

use clap::Args;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::admission::boundary::{Boundary, DEFAULT_CONTROLLER};
use crate::admission::claims::ClaimOptions;
use crate::audit::live::{LiveAudit, LiveOptions};
use crate::cluster::Companion;
use crate::k8s::duration::parse as parse_duration;
use crate::server::options::{
    DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_CONNECTIONS_PER_SOURCE,
};

/// Mirrors a library enum as a clap `ValueEnum` (same variants, same help)
/// and converts it.
macro_rules! value_enum {
    ($(#[$m:meta])* $name:ident => $lib:ty { $($(#[$vm:meta])* $v:ident,)+ }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
        pub enum $name {
            $($(#[$vm])* $v,)+
        }

        impl From<$name> for $lib {
            fn from(v: $name) -> Self {
                match v {
                    $($name::$v => <$lib>::$v,)+
                }
            }
        }
    };
}

value_enum! {
    /// An output format of `interlock check`.
    OutputFormatArg => crate::check::OutputFormat {
        /// Grouped by file, one line per finding, for people.
        Human,
        /// The JSON document of the command-line contract (docs/usage.md).
        Json,
        /// SARIF 2.1.0, for GitHub code scanning and other SARIF viewers.
        Sarif,
        /// JUnit XML, for CI test reports.
        Junit,
    }
}

value_enum! {
    /// `--report-format`: a format, or whichever the cluster serves.
    ReportFormatArg => crate::audit::policy_report::FormatChoice {
        /// OpenReports when the cluster serves it, else PolicyReport.
        Auto,
        #[value(name = "policyreport")]
        PolicyReport,
        #[value(name = "openreports")]
        OpenReports,
    }
}

value_enum! {
    /// An output format of `interlock test`.
    TestFormatArg => crate::check::policy_test::TestFormat {
        /// One line per case, failures under it, a count at the end.
        Human,
        /// `{"cases": [...], "passed": N, "failed": N, "errors": [...]}`.
        Json,
        /// JUnit XML: a test suite per policy, a test case per case file.
        Junit,
    }
}

value_enum! {
    /// What happens to a write across the boundary.
    MemberWritesArg => crate::admission::boundary::Mode {
        /// Refuse it (403).
        Deny,
        /// Admit it with a kubectl warning (a gradual rollout).
        Warn,
        /// No boundary.
        Off,
    }
}

/// A duration flag that was a number of seconds before it took Go
/// durations: a bare number still means seconds, anything else goes
/// through the one duration parser.
fn parse_seconds_or_duration(s: &str) -> Result<Duration, crate::k8s::duration::DurationError> {
    match s.parse::<u64>() {
        Ok(secs) => Ok(Duration::from_secs(secs)),
        Err(_) => parse_duration(s),
    }
}

value_enum! {
    /// Log output format.
    LogFormatArg => crate::server::LogFormat {
        /// JSON when stderr is not a terminal (a container), text otherwise.
        Auto,
        /// One JSON object per line.
        Json,
        /// Human-readable text.
        Text,
    }
}

#[derive(Args, Debug, Clone)]
pub struct UnstickArgs {
    /// Only this namespace (and the Namespace object itself).
    #[arg(short = 'n', long, conflicts_with = "all_namespaces")]
    pub namespace: Option<String>,
    /// Every namespace, and cluster-scoped objects.
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
    /// Only deletions older than this (90s, 15m, 1h30m, 2d).
    #[arg(long, default_value = "5m")]
    pub older_than: String,
    /// Output format.
    #[arg(short, long, default_value = "human", value_parser = ["human", "json"])]
    pub output: String,
    /// Remove this finalizer from TARGET (with --yes).
    #[arg(long, value_name = "FINALIZER", requires = "target")]
    pub clear: Option<String>,
    /// Confirm --clear: without it nothing is written.
    #[arg(long)]
    pub yes: bool,
    /// The resourceVersion the clear is for (as listed); default: the
    /// current one. If the object changed since, the clear is refused.
    #[arg(long, value_name = "RV", requires = "clear")]
    pub resource_version: Option<String>,
    /// Namespace of the Interlock controller's leader-election Lease.
    #[arg(long, default_value = "interlock-system")]
    pub lease_namespace: String,
    /// Name of the Interlock controller's leader-election Lease.
    #[arg(long, default_value = "interlock-controller")]
    pub lease_name: String,
    /// KIND/NAME of the object to clear (kind, plural or singular name).
    pub target: Option<String>,
}

impl From<UnstickArgs> for crate::unstick::UnstickOptions {
    fn from(a: UnstickArgs) -> Self {
        crate::unstick::UnstickOptions {
            namespace: a.namespace,
            all_namespaces: a.all_namespaces,
            older_than: a.older_than,
            output: a.output,
            clear: a.clear,
            yes: a.yes,
            resource_version: a.resource_version,
            lease_namespace: a.lease_namespace,
            lease_name: a.lease_name,
            target: a.target,
        }
    }
}

#[derive(Args, Debug, Clone, Default)]
pub struct EvalArgs {
    /// The CEL expression.
    #[arg(
        short,
        long,
        allow_hyphen_values = true,
        required_unless_present_any = ["validation", "interactive"]
    )]
    pub expr: Option<String>,
    /// Read expressions from standard input, one a line, with the context
    /// loaded once (:help lists the commands).
    #[arg(short, long, conflicts_with_all = ["expr", "validation"])]
    pub interactive: bool,
    /// Evaluate in this policy's context: its variables, params and
    /// indexes, with `request` made from --object as admission sends it.
    #[arg(long, conflicts_with_all = ["request", "namespace_object", "strict"])]
    pub policy: Option<PathBuf>,
    /// With --policy: evaluate spec.validations[N].expression (and its
    /// message when it fails) instead of --expr.
    #[arg(long, requires = "policy", conflicts_with = "expr")]
    pub validation: Option<usize>,
    /// With --policy: the request's operation (CREATE, UPDATE or DELETE;
    /// a DELETE sends --old-object, or --object, as oldObject).
    #[arg(long, requires = "policy", default_value = "CREATE", value_parser = ["CREATE", "UPDATE", "DELETE"])]
    pub operation: String,
    /// With --policy: the requesting user.
    #[arg(long, requires = "policy", default_value = crate::policy::OFFLINE_USER)]
    pub user: String,
    /// With --policy: the user's groups (repeatable; default system:authenticated).
    #[arg(long = "group", requires = "policy")]
    pub groups: Vec<String>,
    /// With --policy: the subresource (status, scale, ...).
    #[arg(long, requires = "policy", default_value = "")]
    pub subresource: String,
    /// With --policy: a dry-run request.
    #[arg(long, requires = "policy")]
    pub dry_run: bool,
    /// The `object` variable (JSON or YAML file).
    #[arg(long)]
    pub object: Option<PathBuf>,
    /// The `oldObject` variable.
    #[arg(long)]
    pub old_object: Option<PathBuf>,
    /// The `params` variable.
    #[arg(long)]
    pub params: Option<PathBuf>,
    /// The `namespaceObject` variable.
    #[arg(long)]
    pub namespace_object: Option<PathBuf>,
    /// The `request` variable.
    #[arg(long)]
    pub request: Option<PathBuf>,
    /// Objects the inventory functions can find (files or folders).
    #[arg(long)]
    pub inventory: Vec<PathBuf>,
    /// Exactly kube-apiserver's environment (what a ValidatingAdmissionPolicy gets).
    #[arg(long)]
    pub strict: bool,
}

impl From<EvalArgs> for crate::eval::EvalOptions {
    fn from(a: EvalArgs) -> Self {
        crate::eval::EvalOptions {
            expr: a.expr,
            interactive: a.interactive,
            policy: a.policy,
            validation: a.validation,
            operation: a.operation,
            user: a.user,
            groups: a.groups,
            subresource: a.subresource,
            dry_run: a.dry_run,
            object: a.object,
            old_object: a.old_object,
            params: a.params,
            namespace_object: a.namespace_object,
            request: a.request,
            inventory: a.inventory,
            strict: a.strict,
        }
    }
}

/// `serve`'s claim flags.
#[derive(Debug, Clone, Args)]
pub struct ClaimArgs {
    /// Namespace of the claim Leases that arbitrate unique keys between
    /// replicas (the webhook's own; default interlock-system, or outside a
    /// cluster without it the kubeconfig context's namespace).
    #[arg(long, env = "POD_NAMESPACE")]
    pub claims_namespace: Option<String>,
    /// How long a claim that no stored object holds is kept (covers a
    /// write admitted but not yet seen by the watch).
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = crate::k8s::duration::parse)]
    pub claim_grace: Duration,
    /// Do not claim unique keys on the API server (one replica only: two
    /// replicas may then both admit a duplicate written at the same time).
    #[arg(long)]
    pub no_claims: bool,
}

impl ClaimArgs {
    /// The options, or `None` when claims are off.
    pub fn options(&self) -> Option<ClaimOptions> {
        (!self.no_claims).then(|| ClaimOptions {
            namespace: self
                .claims_namespace
                .clone()
                .unwrap_or_else(|| crate::cluster::prereq::DEFAULT_NAMESPACE.into()),
            namespace_given: self.claims_namespace.is_some(),
            grace: self.claim_grace,
            timeout: Duration::from_secs(2),
        })
    }
}

/// `interlock serve` flags of the boundary.
#[derive(Args, Debug, Clone)]
pub struct BoundaryArgs {
    /// Writes to ResourceGroup members by anyone but the controller:
    /// refused (deny), admitted with a warning (warn), or not looked at (off).
    #[arg(long, value_enum, default_value = "deny")]
    pub member_writes: MemberWritesArg,
    /// The Interlock controller's own user (repeatable).
    #[arg(long = "boundary-controller", default_value = DEFAULT_CONTROLLER)]
    pub controllers: Vec<String>,
    /// Break-glass: a user (`NAME`, `PREFIX*`) or group (`group:NAME`) that
    /// may write members (repeatable).
    #[arg(long = "boundary-exempt")]
    pub exempt: Vec<String>,
}

impl BoundaryArgs {
    pub fn config(&self) -> Boundary {
        Boundary {
            mode: self.member_writes.into(),
            controllers: self.controllers.clone(),
            exempt: self.exempt.clone(),
        }
    }
}

/// The flags of `serve` and `controller` that turn the audit on.
#[derive(Debug, Clone, Args)]
pub struct AuditArgs {
    /// Audit what is stored in the cluster, continuously: objects evaluated
    /// again when they or what their policies read change, results as
    /// PolicyReports and interlock_audit_* metrics (docs/audit.md).
    #[arg(long)]
    pub audit: bool,
    /// Time between full audit passes (every object, changed or not): a
    /// Go duration (`1h`, `1m30s`), or a number of seconds.
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "1h",
        value_parser = parse_seconds_or_duration,
        requires = "audit"
    )]
    pub audit_interval: Duration,
    /// The audit's report kinds: policyreport (wgpolicyk8s.io/v1alpha2),
    /// openreports (openreports.io/v1alpha1), or auto: OpenReports when
    /// the cluster serves it, else PolicyReport.
    #[arg(long, value_enum, default_value = "auto", requires = "audit")]
    pub audit_report_format: ReportFormatArg,
    /// Also audit the cluster's own ValidatingAdmissionPolicies and their
    /// bindings (with their params) against what is stored: kube-apiserver
    /// judges an object only when it is written. Needs list on both kinds
    /// and on each paramKind they name (docs/audit.md).
    #[arg(long, requires = "audit")]
    pub audit_cluster_vaps: bool,
}

impl AuditArgs {
    /// The audit to run, when `--audit` is given.
    pub fn companion(&self) -> Option<Arc<dyn Companion>> {
        self.audit.then(|| {
            Arc::new(LiveAudit::new(LiveOptions {
                full_interval: self.audit_interval.max(Duration::from_secs(1)),
                report_format: self.audit_report_format.into(),
                cluster_vaps: self.audit_cluster_vaps,
                ..LiveOptions::default()
            })) as Arc<dyn Companion>
        })
    }
}

/// Where `serve` and the controller take policies from beside `-p` files
/// or the bundled library (docs/policy-kind.md, "Policies in the cluster").
#[derive(Args, Debug, Clone, Default)]
pub struct ClusterPolicyArgs {
    /// Also load the cluster's InterlockPolicy objects (the CRD must be
    /// installed: not ready until it is served) and keep them in force as
    /// they change. An object replaces a bundled policy of its name; one
    /// named like a `-p` file policy is refused.
    #[arg(long)]
    pub cluster_policies: bool,
    /// Also load the tenants' InterlockNamespacePolicy objects (the CRD
    /// must be installed): each judges only objects of its own namespace
    /// and reads only its own namespace. Needs --cluster-policies.
    #[arg(long, requires = "cluster_policies")]
    pub namespace_policies: bool,
}

impl ClusterPolicyArgs {
    /// The options, when the objects are wanted; the holder of `lease` (by
    /// `identity`) writes their statuses, none when None.
    pub fn options(
        self,
        lease: Option<String>,
        identity: String,
    ) -> Option<crate::cluster::policy_objects::ObjectOptions> {
        self.cluster_policies
            .then_some(crate::cluster::policy_objects::ObjectOptions {
                lease_name: lease,
                identity,
                namespaced: self.namespace_policies,
            })
    }
}

#[derive(Args, Debug, Clone, Default)]
pub struct OverrideArgs {
    /// Leave out the policy of this name (and its bindings); repeatable.
    #[arg(long = "disable", value_name = "NAME")]
    pub disable: Vec<String>,
    /// Make the policy of this name only Deny, Warn or Audit (its
    /// validationActions, admissionActions and checkActions, or its bindings'
    /// validationActions); repeatable.
    #[arg(long = "action", value_name = "NAME=ACTION", value_parser = crate::policy::overrides::parse_action)]
    pub actions: Vec<(String, crate::policy::Action)>,
    /// A PolicyConfig file (interlock.dev/v1alpha1; spec.disable: [NAME],
    /// spec.actions: {NAME: ACTION}) added to the flags; serve and the
    /// controller read it again when it changes.
    #[arg(long = "policy-config", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The namespace whose exceptions may except objects of any namespace
    /// (default interlock-system); an exception in any other namespace
    /// excepts only objects of its own (docs/writing-policies.md).
    #[arg(long = "exception-namespace", value_name = "NS")]
    pub exception_namespace: Option<String>,
}

impl From<OverrideArgs> for crate::policy::overrides::Overrides {
    fn from(a: OverrideArgs) -> Self {
        crate::policy::overrides::Overrides {
            disable: a.disable,
            actions: a.actions,
            config: a.config,
            exception_namespace: a.exception_namespace,
        }
    }
}

/// `interlock serve`: the TLS admission webhook.
#[derive(Args, Debug, Clone)]
pub struct ServeArgs {
    /// PEM certificate chain served to clients (re-read when it changes).
    #[arg(long, value_name = "FILE", env = "INTERLOCK_TLS_CERT")]
    pub tls_cert: PathBuf,

    /// PEM private key of the serving certificate (re-read when it changes).
    #[arg(long, value_name = "FILE", env = "INTERLOCK_TLS_KEY")]
    pub tls_key: PathBuf,

    /// Address and port to listen on.
    #[arg(
        long,
        value_name = "ADDR",
        default_value = "0.0.0.0:8443",
        env = "INTERLOCK_LISTEN"
    )]
    pub listen: SocketAddr,

    /// PEM CA bundle: require client certificates signed by it.
    #[arg(long, value_name = "FILE", env = "INTERLOCK_CLIENT_CA")]
    pub client_ca: Option<PathBuf>,

    /// Policy file or directory (repeatable). Without it the bundled library is used.
    #[arg(short = 'p', long = "policy", value_name = "PATH")]
    pub policy: Vec<PathBuf>,

    /// Serve from these manifest files or directories instead of a live cluster.
    #[arg(long, value_name = "PATH")]
    pub inventory: Vec<PathBuf>,

    /// Serve even when the policy files hold no policy (the webhook then
    /// allows everything); without it an empty set is refused at start and
    /// on reload.
    #[arg(long)]
    pub allow_empty: bool,

    /// Largest accepted request body in bytes; larger bodies get 413.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_MAX_BODY_BYTES)]
    pub max_body_bytes: usize,

    /// Deadline per admission request (body read, queueing and evaluation);
    /// keep it below the webhook's timeoutSeconds.
    #[arg(long, value_name = "DURATION", default_value = "4s", value_parser = parse_duration)]
    pub request_timeout: Duration,

    /// Admission requests evaluated or queued at once; more wait for a slot
    /// (within the request deadline).
    #[arg(long, value_name = "N", default_value_t = 1024)]
    pub max_concurrent_requests: usize,

    /// Threads that parse and evaluate admission requests (at least one;
    /// the async workers never evaluate, so /healthz answers whatever
    /// evaluation does). Default: one per CPU.
    #[arg(long, value_name = "N")]
    pub eval_threads: Option<usize>,

    /// Close a connection that has had no request in flight for this long
    /// (HTTP/1.1: closed; HTTP/2: GOAWAY). Longer than the 90 s after which
    /// Go clients (kube-apiserver) drop idle connections themselves, so the
    /// apiserver's own connections are normally closed by the apiserver.
    /// A connection that has not sent its first request head, and an
    /// HTTP/1.1 connection waiting for the next one, are closed sooner,
    /// after the handshake timeout.
    #[arg(long, value_name = "DURATION", default_value = "120s", value_parser = parse_duration)]
    pub idle_timeout: Duration,

    /// Most client connections open at once; a connection past it is closed
    /// at once (logged, counted in
    /// interlock_refused_connections_total{reason="max_connections"}).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_CONNECTIONS)]
    pub max_connections: usize,

    /// Most client connections open at once from one address; a connection
    /// past it is closed at once (logged, counted in
    /// interlock_refused_connections_total{reason="max_connections_per_source"}).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_CONNECTIONS_PER_SOURCE)]
    pub max_connections_per_source: usize,

    /// Time allowed for a TLS handshake, and then for each request head
    /// (the first one on every connection, later ones on HTTP/1.1): a
    /// connection that sends nothing after its handshake is closed after it.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub tls_handshake_timeout: Duration,

    /// How often the certificate and key files are compared with what is served.
    #[arg(long, value_name = "DURATION", default_value = "3s", value_parser = parse_duration)]
    pub cert_poll_interval: Duration,

    /// Report unready (/readyz 503, with the reason, and one log line) while
    /// the serving certificate is expired, not yet valid, or expires within
    /// this margin; its expiry is exported as
    /// interlock_tls_certificate_expiry_timestamp_seconds.
    #[arg(long, value_name = "DURATION", default_value = "1h", value_parser = parse_duration)]
    pub tls_expiry_margin: Duration,

    /// After SIGTERM, keep accepting (while /readyz answers 503) for this long,
    /// so endpoints are removed before the listener closes.
    #[arg(long, value_name = "DURATION", default_value = "0s", value_parser = parse_duration)]
    pub shutdown_delay: Duration,

    /// After the listener closes, wait at most this long for in-flight requests.
    #[arg(long, value_name = "DURATION", default_value = "20s", value_parser = parse_duration)]
    pub shutdown_timeout: Duration,

    /// Log format: `json`, `text`, or `auto` (JSON when stderr is not a terminal).
    #[arg(long, value_enum, default_value_t = LogFormatArg::Auto, env = "INTERLOCK_LOG_FORMAT")]
    pub log_format: LogFormatArg,
}

impl From<ServeArgs> for crate::server::ServeOptions {
    fn from(a: ServeArgs) -> Self {
        crate::server::ServeOptions {
            tls_cert: a.tls_cert,
            tls_key: a.tls_key,
            listen: a.listen,
            client_ca: a.client_ca,
            policy: a.policy,
            inventory: a.inventory,
            allow_empty: a.allow_empty,
            max_body_bytes: a.max_body_bytes,
            request_timeout: a.request_timeout,
            max_concurrent_requests: a.max_concurrent_requests,
            eval_threads: a.eval_threads,
            idle_timeout: a.idle_timeout,
            max_connections: a.max_connections,
            max_connections_per_source: a.max_connections_per_source,
            tls_handshake_timeout: a.tls_handshake_timeout,
            cert_poll_interval: a.cert_poll_interval,
            tls_expiry_margin: a.tls_expiry_margin,
            shutdown_delay: a.shutdown_delay,
            shutdown_timeout: a.shutdown_timeout,
            log_format: a.log_format.into(),
        }
    }
}

/// `interlock certs`: a CA and a serving certificate for the webhook.
#[derive(Args, Debug, Clone)]
pub struct CertsArgs {
    /// Directory to write ca.crt, tls.crt and tls.key into (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,

    /// DNS name or IP address the serving certificate is valid for (repeatable;
    /// IPs become IP SANs, names DNS SANs).
    #[arg(long = "host", value_name = "NAME_OR_IP", required = true, num_args = 1..)]
    pub hosts: Vec<String>,

    /// Validity of the serving certificate, in days.
    #[arg(long, value_name = "DAYS", default_value_t = 365)]
    pub days: u32,

    /// Validity of the CA certificate, in days.
    #[arg(long, value_name = "DAYS", default_value_t = 3650)]
    pub ca_days: u32,

    /// Overwrite existing files in DIR (each file is replaced atomically).
    #[arg(long)]
    pub force: bool,
}

impl CertsArgs {
    /// What to generate.
    pub fn options(&self) -> crate::certs::CertsOptions {
        crate::certs::CertsOptions {
            hosts: self.hosts.clone(),
            days: self.days,
            ca_days: self.ca_days,
        }
    }
}

#[cfg(test)]
#[path = "args_tests.rs"]
mod tests;
