//! The `interlock` command line: arguments in, library calls out.

use clap::{Parser, Subcommand};
use interlock::check::{self, OutputFormat};
use std::path::PathBuf;
use std::process::ExitCode;

// See Cargo.toml and docs/PERFORMANCE.md for why not the system allocator.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "interlock",
    version,
    about = "Rules that span several Kubernetes objects"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Check manifest files against policies, offline.
    Check {
        /// Policy file or folder (repeatable); default: the bundled library.
        #[arg(short, long = "policy")]
        policy: Vec<PathBuf>,
        /// Output format.
        #[arg(short, long, default_value = "human")]
        output: OutputFormat,
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
        output: OutputFormat,
        /// Report only objects of this namespace (repeatable; lookups still
        /// see every namespace).
        #[arg(short = 'n', long)]
        namespace: Vec<String>,
        /// Also store the results as PolicyReports (wgpolicyk8s.io/v1alpha2),
        /// one per namespace, written only when they changed.
        #[arg(long)]
        write_reports: bool,
    },
    /// Evaluate one CEL expression with the variables a policy sees.
    Eval {
        #[command(flatten)]
        opts: interlock::eval::EvalOptions,
        /// Output: json prints {"type": T, "value": V}; text prints the value.
        #[arg(short, long, default_value = "json")]
        output: String,
    },
    /// Serve the admission webhook (POST /validate, /mutate) over TLS.
    Serve {
        #[command(flatten)]
        args: interlock::server::ServeArgs,
        /// Name objects of other namespaces in messages (off by default: a
        /// tenant only learns the kind of another tenant's object).
        #[arg(long)]
        reveal_other_namespaces: bool,
        /// Seconds one watch request lasts before it is re-established.
        #[arg(long, default_value_t = 290)]
        watch_timeout: u64,
        #[command(flatten)]
        boundary: interlock::admission::boundary::BoundaryArgs,
        #[command(flatten)]
        audit: interlock::audit::live::AuditArgs,
    },
    /// Write a CA and a serving certificate for the webhook.
    Certs {
        #[command(flatten)]
        args: interlock::server::cli::CertsArgs,
    },
    /// Print the CRDs of the project's kinds (ResourceGroup) as YAML.
    Crd,
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
        /// Namespace of the leader-election Lease.
        #[arg(long, env = "POD_NAMESPACE", default_value = "interlock-system")]
        lease_namespace: String,
        /// Name of the leader-election Lease.
        #[arg(long, default_value = "interlock-controller")]
        lease_name: String,
        /// This replica's identity in the Lease (default: POD_NAME, or host and pid).
        #[arg(long, env = "POD_NAME")]
        identity: Option<String>,
        /// Log format.
        #[arg(long, default_value = "text", value_parser = ["text", "json"])]
        log_format: String,
        #[command(flatten)]
        audit: interlock::audit::live::AuditArgs,
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
        args: interlock::unstick::UnstickArgs,
    },
    /// Run policy test cases (policies/NAME/tests/*.yaml).
    Test {
        #[arg(default_value = "policies")]
        paths: Vec<PathBuf>,
    },
}

/// Prints a check or audit report; returns the exit status.
fn print_report(report: &check::Report, output: OutputFormat) -> i32 {
    match report.print(output) {
        // A closed pipe (`| head`) is the reader's choice, not an error.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        Err(e) => {
            eprintln!("interlock: cannot write the report: {e}");
            return 2;
        }
        Ok(()) => {}
    }
    let _ = report.write_errors(&mut std::io::stderr());
    report.exit_code()
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if !matches!(
        cli.command,
        Command::Serve { .. } | Command::Controller { .. }
    ) {
        interlock::server::init_tracing_at(false, "warn");
    }
    let code = match cli.command {
        Command::Check {
            policy,
            output,
            user,
            namespace,
            inventory,
            exclude,
            paths,
        } => {
            let report = check::run(&check::CheckOptions {
                policies: policy,
                inputs: paths,
                user,
                record_evaluated: output == OutputFormat::Junit,
                whole_objects: false,
                namespace,
                inventory,
                exclude,
            });
            print_report(&report, output)
        }
        Command::Audit {
            policy,
            output,
            namespace,
            write_reports,
        } => print_report(
            &interlock::audit::run(&interlock::audit::AuditOptions {
                policies: policy,
                namespaces: namespace,
                record_evaluated: output == OutputFormat::Junit,
                write_reports,
            }),
            output,
        ),
        Command::Eval { opts, output } => match interlock::eval::run(&opts) {
            Ok(v) if output == "json" => {
                println!("{v}");
                0
            }
            Ok(v) => {
                println!("{} ({})", v["value"], v["type"].as_str().unwrap_or(""));
                0
            }
            Err(e) => {
                eprintln!("{e}");
                e.exit_code()
            }
        },
        Command::Serve {
            args,
            reveal_other_namespaces,
            watch_timeout,
            boundary,
            audit,
        } => {
            interlock::server::init_tracing(args.log_format.is_json());
            let options = interlock::admission::EngineOptions {
                redact_other_namespaces: !reveal_other_namespaces,
                boundary: boundary.config(),
                ..Default::default()
            };
            let cluster_options = interlock::cluster::ClusterOptions {
                watch_timeout: std::time::Duration::from_secs(watch_timeout),
            };
            let rt = match tokio::runtime::Runtime::new() {
                Ok(rt) => rt,
                Err(e) => {
                    eprintln!("interlock: cannot start the runtime: {e}");
                    return ExitCode::from(2);
                }
            };
            match rt.block_on(interlock::admission::serve::run(
                args,
                options,
                cluster_options,
                audit.companion(),
            )) {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("interlock serve: {e:#}");
                    2
                }
            }
        }
        Command::Certs { args } => match interlock::certs::run(&args) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("interlock certs: {e:#}");
                2
            }
        },
        Command::Controller {
            policy,
            concurrency,
            admin_addr,
            no_leader_election,
            lease_namespace,
            lease_name,
            identity,
            log_format,
            audit,
        } => {
            interlock::server::init_tracing(log_format == "json");
            let identity = identity.unwrap_or_else(|| {
                let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
                    .map(|h| h.trim().to_string())
                    .unwrap_or_else(|_| "interlock".into());
                format!("{host}-{}", std::process::id())
            });
            let lease = (!no_leader_election).then(|| interlock::controller::lease::LeaseConfig {
                namespace: lease_namespace,
                name: lease_name,
                identity,
                duration: std::time::Duration::from_secs(15),
                renew_every: std::time::Duration::from_secs(5),
            });
            let cfg = interlock::controller::run::ControllerConfig {
                policies: policy,
                concurrency: concurrency.max(1),
                admin_addr,
                lease,
                watch_timeout: std::time::Duration::from_secs(290),
            };
            match tokio::runtime::Runtime::new() {
                Ok(rt) => {
                    match rt.block_on(interlock::controller::run::run(cfg, audit.companion())) {
                        Ok(()) => 0,
                        Err(e) => {
                            eprintln!("interlock controller: {e:#}");
                            2
                        }
                    }
                }
                Err(e) => {
                    eprintln!("interlock: cannot start the runtime: {e}");
                    2
                }
            }
        }
        Command::WebhookConfig {
            policy,
            service,
            url,
            ca_bundle,
        } => {
            use interlock::webhook_config::{run, Endpoint};
            let endpoint = match (service, url) {
                (Some(s), _) => Endpoint::service(&s),
                (None, u) => Endpoint::url(&u.unwrap_or_default()),
            };
            match endpoint.and_then(|e| run(&policy, e, ca_bundle.as_deref())) {
                Ok(yaml) => {
                    print!("{yaml}");
                    0
                }
                Err(e) => {
                    eprintln!("interlock webhook-config: {e}");
                    2
                }
            }
        }
        Command::Unstick { args } => interlock::unstick::main(&args),
        Command::Crd => {
            print!("{}", interlock::group::crd_yaml());
            0
        }
        Command::Test { paths } => {
            let cases = check::policy_test::discover(&paths);
            let mut failed = 0;
            for (policy, case) in &cases {
                let r = check::policy_test::run_case(policy, case);
                if r.passed() {
                    println!("ok   {} ({})", r.file.display(), r.name);
                } else {
                    failed += 1;
                    println!("FAIL {} ({})", r.file.display(), r.name);
                    for f in &r.failures {
                        println!("     {f}");
                    }
                }
            }
            println!("{} passed, {} failed", cases.len() - failed, failed);
            i32::from(failed > 0 || cases.is_empty())
        }
    };
    ExitCode::from(code as u8)
}
