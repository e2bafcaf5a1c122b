use super::*;
use clap::Parser;

#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}
#[derive(clap::Subcommand)]
enum Cmd {
    Serve(Box<ServeArgs>),
    Certs(CertsArgs),
}

#[test]
fn serve_defaults() {
    let cli = Cli::try_parse_from([
        "interlock",
        "serve",
        "--tls-cert",
        "c.pem",
        "--tls-key",
        "k.pem",
        "-p",
        "a",
        "-p",
        "b",
    ])
    .expect("parses");
    let Cmd::Serve(a) = cli.cmd else {
        panic!("not serve")
    };
    assert_eq!(a.listen, "0.0.0.0:8443".parse().expect("addr"));
    assert_eq!(a.max_body_bytes, 3 * 1024 * 1024);
    assert_eq!(a.policy.len(), 2);
    assert_eq!(a.request_timeout, Duration::from_secs(4));
    assert!(a.client_ca.is_none());
}

#[test]
fn duration_flags_take_go_syntax_and_name_the_flag_when_wrong() {
    let serve = |timeout: &str| {
        let args = ["interlock", "serve", "--tls-cert", "c", "--tls-key", "k"];
        Cli::try_parse_from(args.into_iter().chain(["--request-timeout", timeout]))
    };
    let Cmd::Serve(a) = serve("1m30s").expect("parses").cmd else {
        panic!("not serve")
    };
    assert_eq!(a.request_timeout, Duration::from_secs(90));
    let err = serve("4parsecs").err().expect("refused").to_string();
    assert!(err.contains("--request-timeout"), "{err}");
    assert!(err.contains("\"4parsecs\""), "{err}");
}

#[test]
fn certs_hosts() {
    let cli = Cli::try_parse_from([
        "interlock",
        "certs",
        "--out",
        "d",
        "--host",
        "a.svc",
        "127.0.0.1",
        "--host",
        "b",
    ])
    .expect("parses");
    let Cmd::Certs(a) = cli.cmd else {
        panic!("not certs")
    };
    assert_eq!(a.hosts, ["a.svc", "127.0.0.1", "b"]);
    assert!(Cli::try_parse_from(["interlock", "certs", "--out", "d"]).is_err());
}

#[derive(Parser)]
struct AuditCli {
    #[command(flatten)]
    audit: AuditArgs,
}

#[test]
fn audit_interval_takes_go_durations_and_still_bare_seconds() {
    let parse = |extra: &[&str]| {
        let args = ["interlock", "--audit"].iter().chain(extra);
        AuditCli::try_parse_from(args).map(|c| c.audit.audit_interval)
    };
    assert_eq!(parse(&[]).expect("parses"), Duration::from_secs(3600));
    for (given, secs) in [("1m30s", 90), ("3600", 3600), ("2h", 7200)] {
        let got = parse(&["--audit-interval", given]).expect("parses");
        assert_eq!(got, Duration::from_secs(secs), "{given}");
    }
    let err = parse(&["--audit-interval", "soon"]).expect_err("refused");
    assert!(err.to_string().contains("--audit-interval"), "{err}");
}
