//! `interlock eval -i`: expressions piped in one a line, against a context
//! loaded once, with `:load`, `:help`, `:quit` and errors at their column.

use super::authoring::{write, HPA};
use std::io::Write;
use std::process::{Command, Output, Stdio};

/// Runs `interlock eval -i ARGS` with `input` on standard input.
fn eval_i(args: &[&str], input: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_interlock"))
        .args(["eval", "-i"])
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run interlock eval -i");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

const DEPLOYMENT: &str = "apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: team-a}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: 'nginx:1.27.3'}]}
";

#[test]
fn lines_are_evaluated_in_one_loaded_context() {
    let dir = tempfile::tempdir().unwrap();
    let hpa = write(dir.path(), "hpa.yaml", HPA);
    let deployment = write(dir.path(), "deployment.yaml", DEPLOYMENT);
    let input = format!(
        "object.spec.maxReplicas + 1\n\
         \n\
         :help\n\
         variables.found['Deployment']\n\
         :load {}\n\
         variables.found['Deployment']\n\
         \x20 object.spec.(\n\
         :bogus\n\
         request.operation\n\
         :quit\n\
         1 + 1\n",
        deployment.display()
    );
    let o = eval_i(
        &[
            "--policy",
            "policies/hpa-target-exists/policy.yaml",
            "--object",
            hpa.to_str().unwrap(),
            "-o",
            "text",
        ],
        &input,
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[0], "6 (int)", "{stdout}");
    assert!(stdout.contains(":load FILE"), "the help: {stdout}");
    let answers: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.ends_with(')') && !l.starts_with(' '))
        .collect();
    assert_eq!(
        answers,
        [
            "6 (int)",
            "false (bool)",
            "true (bool)",
            "\"CREATE\" (string)"
        ],
        "the Deployment loaded by :load is seen; nothing after :quit runs: {stdout}"
    );
    assert!(stdout.contains("loaded 1 object(s) from"), "{stdout}");
    // The column counts the two spaces typed before the expression.
    assert!(
        stderr.contains("ERROR: <input>:1:15: "),
        "the compile error at the column of `(`: {stderr}"
    );
    assert!(
        stderr.contains(" |   object.spec.(\n | ..............^"),
        "{stderr}"
    );
    assert!(stderr.contains("unknown command :bogus"), "{stderr}");
}

#[test]
fn a_context_that_does_not_load_exits_2() {
    let o = eval_i(&["--object", "no/such/file.yaml"], "1\n");
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no/such/file.yaml"));
}
