//! Every flag of every command, in one place (docs/usage.md documents
//! them). Parsing only: what a command does is in `super`.

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::time::Duration;

use super::args::OverrideArgs;
use crate::check;

#[derive(Parser)]
#[command(
    name = "interlock",
    version = crate::VERSION,
    about = "Rules that span several Kubernetes objects"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

// Parsed once at start: the size of the largest variant (serve's flags)
// costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
pub enum Command {
    /// Check manifest files against policies, offline.
    Check {
        /// Policy file or folder (repeatable); default: the bundled library.
        #[arg(short, long = "policy")]
        policy: Vec<PathBuf>,
        /// Output format.
        #[arg(short, long, default_value = "human")]
        output: super::args::OutputFormatArg,
        /// The user the offline CREATE requests are made as.
        #[arg(long, default_value = check::DEFAULT_USER)]
        user: String,
        /// The namespace of namespaced objects that have none (as `kubectl
        /// apply -n`); default: default.
        #[arg(short = 'n', long)]
        namespace: Option<String>,
        /// Objects that lookups see but that are not checked (a cluster
        /// baseline, objects made by hand); file or folder, repeatable.
        #[arg(long)]
        inventory: Vec<PathBuf>,
        /// Leave out files and folders matching this glob (`*`, `**`, `?`;
        /// without a `/` it matches any path segment); repeatable.
        #[arg(long)]
        exclude: Vec<String>,
        /// Check objects as written: without kube-apiserver's defaulting
        /// of built-in kinds (imagePullPolicy, requests from limits, ...;
        /// docs/usage.md lists the fields).
        #[arg(long)]
        no_defaults: bool,
        /// Print the JSON patch (RFC 6902) MutatingAdmissionPolicies make
        /// to each object they change.
        #[arg(long)]
        show_mutations: bool,
        /// auto: check what kustomize renders of each top-level
        /// kustomization (`kustomize build` or `kubectl kustomize` from
        /// PATH); never: read the raw files as written (Helm charts are
        /// then skipped too).
        #[arg(long, default_value = "auto", value_parser = ["auto", "never"])]
        kustomize: String,
        /// A values file for every Helm chart found (repeatable; charts are
        /// rendered with `helm template` when helm is on PATH).
        #[arg(long = "values", value_name = "FILE")]
        values: Vec<PathBuf>,
        /// notice: a kustomization whose remote base cannot be fetched
        /// here is named in a notice, and the local kustomizations it
        /// includes are checked on their own; error: it stops the run
        /// (exit 2), for CI jobs that must check every layout whole.
        #[arg(long, default_value = "notice", value_parser = ["notice", "error"])]
        remote_bases: String,
        #[command(flatten)]
        overrides: OverrideArgs,
        /// Files, folders, or - for standard input.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
    },
    /// Audit the objects in the cluster of the current kubeconfig, once, as
    /// `check` checks manifests (same reports and exit codes).
    Audit {
        /// Policy file or folder (repeatable); default: the bundled library.
        #[arg(short, long = "policy")]
        policy: Vec<PathBuf>,
        /// Output format.
        #[arg(short, long, default_value = "human")]
        output: super::args::OutputFormatArg,
        /// Report only objects of this namespace (repeatable; lookups still
        /// see every namespace).
        #[arg(short = 'n', long)]
        namespace: Vec<String>,
        /// Also store the results as reports, one per namespace, written
        /// only when they changed.
        #[arg(long)]
        write_reports: bool,
        /// The reports' kinds: policyreport (wgpolicyk8s.io/v1alpha2),
        /// openreports (openreports.io/v1alpha1), or auto: OpenReports when
        /// the cluster serves it, else PolicyReport.
        #[arg(long, value_enum, default_value = "auto", requires = "write_reports")]
        report_format: super::args::ReportFormatArg,
        #[command(flatten)]
        overrides: OverrideArgs,
    },
    /// Evaluate one CEL expression with the variables a policy sees.
    Eval {
        #[command(flatten)]
        opts: super::args::EvalArgs,
        /// Output: json prints {"type": T, "value": V}; text prints the value.
        #[arg(short, long, default_value = "json")]
        output: String,
    },
    /// Serve the admission webhook (POST /validate, /mutate) over TLS.
    Serve {
        #[command(flatten)]
        args: super::args::ServeArgs,
        /// Name objects of other namespaces in messages (off by default: a
        /// tenant only learns the kind of another tenant's object).
        #[arg(long)]
        reveal_other_namespaces: bool,
        /// How long one watch request lasts before it is re-established
        /// (a number of seconds, or a duration: 290s, 4m50s).
        #[arg(long, value_name = "DURATION", default_value = "290s", value_parser = crate::k8s::duration::parse)]
        watch_timeout: Duration,
        #[command(flatten)]
        boundary: super::args::BoundaryArgs,
        #[command(flatten)]
        claims: super::args::ClaimArgs,
        #[command(flatten)]
        audit: super::args::AuditArgs,
        #[command(flatten)]
        overrides: OverrideArgs,
        #[command(flatten)]
        cluster_policies: super::args::ClusterPolicyArgs,
        /// With --cluster-policies: the Lease whose holder (one replica)
        /// writes the InterlockPolicy objects' statuses, in the Pod's
        /// namespace (POD_NAMESPACE) or the kubeconfig's.
        #[arg(long, value_name = "NAME", default_value = "interlock-policy-status")]
        policy_status_lease: String,
        /// Keep the rules of the Validating/MutatingWebhookConfiguration of
        /// this name equal to what the loaded policies match (only their
        /// rules; needs get and update on both kinds). Off by default: the
        /// configurations may be owned by helm or GitOps.
        #[arg(long, value_name = "NAME")]
        sync_webhook_rules: Option<String>,
    },
    /// Write a CA and a serving certificate for the webhook.
    Certs {
        #[command(flatten)]
        args: super::args::CertsArgs,
    },
    /// Print the CRDs of the project's kinds (ResourceGroup,
    /// InterlockException, InterlockPolicy, InterlockNamespacePolicy) as
    /// YAML.
    Crd {
        /// Only this kind's CRD.
        #[arg(value_parser = ["ResourceGroup", "InterlockException", "InterlockPolicy", "InterlockNamespacePolicy"])]
        kind: Option<String>,
    },
    /// Reconcile ResourceGroups against the cluster of the current kubeconfig.
    Controller {
        /// Policy file or folder (repeatable); default: the bundled library.
        #[arg(short, long = "policy")]
        policy: Vec<PathBuf>,
        /// Groups reconciled at once.
        #[arg(long, default_value_t = 4)]
        concurrency: u16,
        /// Plain-HTTP address of /metrics, /healthz and /readyz.
        #[arg(long, default_value = "0.0.0.0:8080")]
        admin_addr: std::net::SocketAddr,
        /// Run without leader election (one replica only).
        #[arg(long)]
        no_leader_election: bool,
        /// Namespace of the leader-election Lease (default interlock-system,
        /// or outside a cluster without it the kubeconfig context's namespace).
        #[arg(long, env = "POD_NAMESPACE")]
        lease_namespace: Option<String>,
        /// How long the Lease lasts unrenewed; it is renewed every third of
        /// this, and a leader that could not renew stops reconciling after
        /// two thirds of it.
        #[arg(long, value_name = "DURATION", default_value = "15s", value_parser = crate::k8s::duration::parse)]
        lease_duration: Duration,
        /// Name of the leader-election Lease.
        #[arg(long, default_value = "interlock-controller")]
        lease_name: String,
        /// Share the groups among replicas in this many shards (by a hash
        /// of their namespace), each owned by its own Lease,
        /// <lease-name>-shard-<i>; the leader's Lease then only decides who
        /// audits. 1: the leader reconciles every group.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
        shards: u16,
        /// This replica's identity in the Lease (default: POD_NAME, or host and pid).
        #[arg(long, env = "POD_NAME")]
        identity: Option<String>,
        /// Log format (the same flag as `serve`'s; text unless asked).
        #[arg(long, value_enum, default_value_t = super::args::LogFormatArg::Text, env = "INTERLOCK_LOG_FORMAT")]
        log_format: super::args::LogFormatArg,
        #[command(flatten)]
        audit: super::args::AuditArgs,
        #[command(flatten)]
        overrides: OverrideArgs,
        #[command(flatten)]
        cluster_policies: super::args::ClusterPolicyArgs,
    },
    /// What the controller would do with the ResourceGroups of FILEs, in
    /// the cluster of the current kubeconfig, with every policy's findings;
    /// writes nothing (exit 0: would apply cleanly, 1: would be refused,
    /// 2: input error).
    Plan {
        /// Policy file or folder (repeatable); default: the bundled library.
        #[arg(short, long = "policy")]
        policy: Vec<PathBuf>,
        /// Output format.
        #[arg(short, long, default_value = "human", value_parser = ["human", "json"])]
        output: String,
        #[command(flatten)]
        overrides: OverrideArgs,
        /// Files or folders with ResourceGroups, or - for standard input.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Print the webhook configurations for the loaded policies' rules.
    WebhookConfig {
        /// Policy file or folder (repeatable); default: the bundled library.
        #[arg(short, long = "policy")]
        policy: Vec<PathBuf>,
        /// The webhook's Service, NAMESPACE/NAME.
        #[arg(long, conflicts_with = "url", required_unless_present = "url")]
        service: Option<String>,
        /// The webhook's https:// URL (outside the cluster).
        #[arg(long)]
        url: Option<String>,
        /// CA certificate (PEM) put in caBundle.
        #[arg(long)]
        ca_bundle: Option<PathBuf>,
    },
    /// Objects stuck in deletion and their finalizers (docs/finalizers.md).
    Unstick {
        #[command(flatten)]
        args: super::args::UnstickArgs,
    },
    /// The bundled policy library.
    Policies {
        #[command(subcommand)]
        command: PoliciesCommand,
    },
    /// Run policy test cases (policies/NAME/tests/*.yaml).
    Test {
        /// Policy folders, folders of them, policy.yaml files or case files.
        #[arg(default_value = "policies")]
        paths: Vec<PathBuf>,
        /// Run only the cases whose POLICY/CASE matches this regular expression.
        #[arg(long)]
        run: Option<String>,
        /// Output format.
        #[arg(short, long, default_value = "human")]
        output: super::args::TestFormatArg,
        /// Also send the cases of ValidatingAdmissionPolicies to the cluster
        /// of the kubeconfig (the policies and bindings renamed and confined
        /// to the case's objects, the objects as dry runs in a scratch
        /// namespace, all removed after) and show both answers.
        #[arg(long)]
        against_cluster: bool,
        /// Send the cases' objects as written, without kube-apiserver's
        /// defaulting of built-in kinds.
        #[arg(long)]
        no_defaults: bool,
    },
}

#[derive(Subcommand)]
pub enum PoliciesCommand {
    /// Write the bundled library to DIR/NAME/policy.yaml, to edit and load
    /// with -p DIR (refuses to overwrite).
    Export { dir: PathBuf },
}
