//! The `interlock` command line: the one place that parses arguments, starts
//! tracing, prints results and decides exit codes. Every command is a call
//! into the library; `main.rs` only returns [`run`]'s code.
//!
//! Exit codes (the command-line contract): 0 nothing denied, 1 a Deny
//! finding (or a failed policy test), 2 the command could not do its job
//! (bad input, no cluster, a server that stopped with an error).

mod args;
mod flags;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;

use crate::check::{self, OutputFormat};
pub use flags::{Cli, Command, PoliciesCommand};

/// Parses the arguments, runs the command, and returns its exit status.
pub fn run() -> ExitCode {
    let cli = Cli::parse();
    // The long-running commands set up their own (JSON-capable) tracing;
    // the others log the engine's warnings to standard error.
    if !matches!(
        cli.command,
        Command::Serve { .. } | Command::Controller { .. }
    ) {
        crate::server::init_tracing_at(false, "warn");
    }
    ExitCode::from(dispatch(cli.command))
}

fn dispatch(command: Command) -> u8 {
    match command {
        Command::Check {
            policy,
            output,
            user,
            namespace,
            inventory,
            exclude,
            no_defaults,
            show_mutations,
            kustomize,
            values,
            remote_bases,
            overrides,
            paths,
        } => print_report(
            &check::run(&check::CheckOptions {
                policies: policy,
                inputs: paths,
                user,
                record_evaluated: OutputFormat::from(output) == OutputFormat::Junit,
                whole_objects: false,
                namespace,
                inventory,
                exclude,
                overrides: overrides.into(),
                no_defaults,
                show_mutations,
                kustomize: match kustomize.as_str() {
                    "never" => check::render::kustomize::KustomizeMode::Never,
                    _ => check::render::kustomize::KustomizeMode::Auto,
                },
                values,
                remote_bases_fail: remote_bases == "error",
                ..Default::default()
            }),
            output.into(),
        ),
        Command::Audit {
            policy,
            output,
            namespace,
            write_reports,
            report_format,
            overrides,
        } => print_report(
            &crate::audit::run(&crate::audit::AuditOptions {
                policies: policy,
                namespaces: namespace,
                record_evaluated: OutputFormat::from(output) == OutputFormat::Junit,
                write_reports,
                report_format: report_format.into(),
                overrides: overrides.into(),
            }),
            output.into(),
        ),
        Command::Eval { opts, output } => eval(&opts.into(), &output),
        Command::Serve {
            args,
            reveal_other_namespaces,
            watch_timeout,
            boundary,
            claims,
            audit,
            overrides,
            cluster_policies,
            policy_status_lease,
            sync_webhook_rules,
        } => {
            crate::server::init_tracing(crate::server::LogFormat::from(args.log_format).is_json());
            let objects = cluster_policies.options(
                Some(policy_status_lease),
                std::env::var("POD_NAME").unwrap_or_else(|_| default_identity()),
            );
            let options = crate::admission::EngineOptions {
                redact_other_namespaces: !reveal_other_namespaces,
                boundary: boundary.config(),
                ..Default::default()
            };
            let cluster_options = crate::cluster::ClusterOptions { watch_timeout };
            block_on("serve", async move {
                crate::admission::serve::run(
                    args.into(),
                    options,
                    cluster_options,
                    crate::cluster::reload::Sources {
                        overrides: overrides.into(),
                        objects,
                        ..Default::default()
                    },
                    claims.options(),
                    audit.companion(),
                    sync_webhook_rules,
                )
                .await
            })
        }
        Command::Certs { args } => done(
            "certs",
            crate::certs::run(&args.options(), &args.out, args.force),
        ),
        Command::Controller {
            policy,
            concurrency,
            admin_addr,
            no_leader_election,
            lease_namespace,
            lease_name,
            lease_duration,
            shards,
            identity,
            log_format,
            audit,
            overrides,
            cluster_policies,
        } => {
            crate::server::init_tracing(crate::server::LogFormat::from(log_format).is_json());
            if lease_duration < Duration::from_secs(2) {
                eprintln!("interlock: --lease-duration must be at least 2s (the Lease counts whole seconds)");
                return 2;
            }
            if shards > 1 && no_leader_election {
                eprintln!("interlock: --shards needs leader election: each shard is a Lease");
                return 2;
            }
            let lease_namespace_given = lease_namespace.is_some();
            let identity = identity.unwrap_or_else(default_identity);
            let objects = cluster_policies.options(None, identity.clone());
            let lease = (!no_leader_election).then(|| crate::controller::lease::LeaseConfig {
                namespace: lease_namespace
                    .unwrap_or_else(|| crate::cluster::prereq::DEFAULT_NAMESPACE.into()),
                name: lease_name,
                identity,
                duration: lease_duration,
                renew_every: lease_duration / 3,
            });
            let cfg = crate::controller::run::ControllerConfig {
                policies: policy,
                concurrency: concurrency.max(1),
                admin_addr,
                lease,
                shards,
                lease_namespace_given,
                watch_timeout: Duration::from_secs(290),
                overrides: overrides.into(),
                objects,
            };
            block_on(
                "controller",
                crate::controller::run::run(cfg, audit.companion()),
            )
        }
        Command::Plan {
            policy,
            output,
            overrides,
            files,
        } => plan(
            &crate::plan::PlanOptions {
                policies: policy,
                overrides: overrides.into(),
                files,
            },
            &output,
        ),
        Command::WebhookConfig {
            policy,
            service,
            url,
            ca_bundle,
        } => webhook_config(&policy, service, url, ca_bundle),
        Command::Unstick { args } => exit_status(crate::unstick::main(&args.into())),
        Command::Crd { kind } => {
            // Without a kind, every CRD in this order (new kinds at the end).
            let all = [
                ("ResourceGroup", crate::group::crd_yaml()),
                (
                    "InterlockException",
                    crate::cluster::exceptions::CRD_YAML.to_string(),
                ),
                (
                    "InterlockPolicy",
                    crate::cluster::policy_objects::CRD_YAML.to_string(),
                ),
                (
                    "InterlockNamespacePolicy",
                    crate::cluster::policy_objects::NAMESPACED_CRD_YAML.to_string(),
                ),
            ];
            for (name, yaml) in all {
                if kind.as_deref().is_none_or(|k| k == name) {
                    print!("{yaml}");
                }
            }
            0
        }
        Command::Policies {
            command: PoliciesCommand::Export { dir },
        } => export_policies(&dir),
        Command::Test {
            paths,
            run,
            output,
            against_cluster,
            no_defaults,
        } => policy_tests(
            check::policy_test::TestOptions {
                paths,
                run,
                against_cluster,
                no_defaults,
            },
            output.into(),
        ),
    }
}

/// Prints a check or audit report; returns the exit status.
fn print_report(report: &check::Report, output: OutputFormat) -> u8 {
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
    exit_status(report.exit_code())
}

fn eval(opts: &crate::eval::EvalOptions, output: &str) -> u8 {
    if opts.interactive {
        return match crate::eval::Session::open(opts) {
            Ok(mut session) => eval_lines(&mut session, output),
            Err(e) => {
                eprintln!("{e}");
                exit_status(e.exit_code())
            }
        };
    }
    match crate::eval::run(opts) {
        Ok(v) => {
            println!("{}", eval_result(&v, output));
            0
        }
        Err(e) => {
            eprintln!("{e}");
            exit_status(e.exit_code())
        }
    }
}

fn eval_result(v: &serde_json::Value, output: &str) -> String {
    if output == "json" {
        v.to_string()
    } else {
        format!("{} ({})", v["value"], v["type"].as_str().unwrap_or(""))
    }
}

const EVAL_HELP: &str = "Each line is a CEL expression, evaluated with the context loaded at start.
  :load FILE   add the objects of a file or folder to the inventory
  :help        this text
  :quit        end (so does end of input)";

/// `eval -i`: one expression a line from standard input, each answered on
/// standard output (errors on standard error, as without -i); a prompt
/// only when a terminal types them. Ends at `:quit` or end of input, 0.
fn eval_lines(session: &mut crate::eval::Session, output: &str) -> u8 {
    use std::io::{BufRead, IsTerminal, Write};
    let stdin = std::io::stdin();
    let prompt = stdin.is_terminal();
    let mut lines = stdin.lock().lines();
    loop {
        if prompt {
            print!("> ");
            let _ = std::io::stdout().flush();
        }
        let Some(Ok(line)) = lines.next() else {
            return 0;
        };
        // Not trimmed at the start: an error's column is that of the
        // character as typed.
        let line = line.trim_end();
        let command = line.trim_start();
        match command.split_once(' ').unwrap_or((command, "")) {
            ("", _) => {}
            (":quit" | ":q", _) => return 0,
            (":help" | ":h", _) => println!("{EVAL_HELP}"),
            (":load", "") => eprintln!(":load needs a file or folder"),
            (":load", path) => match session.load(std::path::Path::new(path.trim())) {
                Ok(n) => println!("loaded {n} object(s) from {}", path.trim()),
                Err(e) => eprintln!("{e}"),
            },
            (cmd, _) if cmd.starts_with(':') => {
                eprintln!("unknown command {cmd}; :help lists them")
            }
            _ => match session.eval(line) {
                Ok(v) => println!("{}", eval_result(&v, output)),
                Err(e) => eprintln!("{e}"),
            },
        }
    }
}

/// `plan`: the report on standard output, problems on standard error.
fn plan(opts: &crate::plan::PlanOptions, output: &str) -> u8 {
    let report = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt.block_on(crate::plan::run(opts)),
        Err(e) => {
            eprintln!("interlock: cannot start the runtime: {e}");
            return 2;
        }
    };
    match report {
        Ok(report) => {
            let text = match output {
                "json" => crate::plan::output::json(&report).to_string() + "\n",
                _ => crate::plan::output::human(&report),
            };
            use std::io::Write as _;
            // A closed pipe (`| head`) is the reader's choice.
            let _ = std::io::stdout().write_all(text.as_bytes());
            exit_status(report.exit_code())
        }
        Err(e) => {
            eprintln!("interlock plan: {e}");
            2
        }
    }
}

fn webhook_config(
    policy: &[PathBuf],
    service: Option<String>,
    url: Option<String>,
    ca_bundle: Option<PathBuf>,
) -> u8 {
    use crate::webhook_config::{run, Endpoint};
    let endpoint = match (service, url) {
        (Some(s), _) => Endpoint::service(&s),
        (None, u) => Endpoint::url(&u.unwrap_or_default()),
    };
    match endpoint.and_then(|e| run(policy, e, ca_bundle.as_deref())) {
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

fn policy_tests(
    opts: check::policy_test::TestOptions,
    output: check::policy_test::TestFormat,
) -> u8 {
    let summary = check::policy_test::run(&opts);
    let mut stdout = std::io::stdout().lock();
    match summary.write(output, &mut stdout) {
        // A closed pipe (`| head`) is the reader's choice, not an error.
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            eprintln!("interlock test: cannot write the report: {e}");
            2
        }
        _ => exit_status(summary.exit_code()),
    }
}

fn export_policies(dir: &std::path::Path) -> u8 {
    use std::io::Write;
    match crate::bundled::export(dir) {
        Ok(files) => {
            let mut out = std::io::stdout().lock();
            for f in files {
                // A closed pipe (`| head`) is the reader's choice.
                let _ = writeln!(out, "{}", f.display());
            }
            0
        }
        Err(e) => {
            eprintln!("interlock policies export: {e}");
            2
        }
    }
}

/// Runs a long-running command on a multi-threaded runtime.
fn block_on(command: &str, future: impl std::future::Future<Output = anyhow::Result<()>>) -> u8 {
    match tokio::runtime::Runtime::new() {
        Ok(rt) => done(command, rt.block_on(future)),
        Err(e) => {
            eprintln!("interlock: cannot start the runtime: {e}");
            2
        }
    }
}

fn done(command: &str, result: anyhow::Result<()>) -> u8 {
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("interlock {command}: {e:#}");
            2
        }
    }
}

/// A library exit status (0, 1 or 2) as a process status; anything else
/// is the command failing.
fn exit_status(code: i32) -> u8 {
    u8::try_from(code).unwrap_or(2)
}

/// A replica's identity in the leader-election Lease when the Pod's name is
/// not given: the host name and process id, unique on one machine.
fn default_identity() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "interlock".into());
    format!("{host}-{}", std::process::id())
}
