//! The report of `interlock test`: for people, as JSON, or as JUnit XML.

use super::{CaseResult, Comparison, Summary};
use crate::report::junit::xml_escape;
use std::io::{self, Write};

/// An output format of `interlock test`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TestFormat {
    /// One line per case, failures under it, a count at the end.
    #[default]
    Human,
    /// `{"cases": [...], "passed": N, "failed": N, "errors": [...]}`.
    Json,
    /// JUnit XML: a test suite per policy, a test case per case file.
    Junit,
}

impl CaseResult {
    fn status(&self) -> &'static str {
        match (self.not_run, self.failures.is_empty()) {
            (true, _) => "not run",
            (false, true) => "passed",
            (false, false) => "failed",
        }
    }
}

/// Interlock's answers and kube-apiserver's, a line per object, those
/// that differ flagged.
fn write_side_by_side(cluster: &Comparison, out: &mut dyn Write) -> io::Result<()> {
    let rows = match cluster {
        // A failure is already among the case's failures.
        Comparison::Failed(_) => return Ok(()),
        Comparison::NotSent(why) => return writeln!(out, "     {why}"),
        Comparison::Rows(rows) => rows,
    };
    let cells: Vec<[String; 4]> = rows
        .iter()
        .map(|r| {
            let flag = if r.agrees() { "same" } else { "DIFFERS" };
            [
                flag.into(),
                r.object.clone(),
                r.interlock.to_string(),
                r.kube.to_string(),
            ]
        })
        .collect();
    let header = ["", "OBJECT", "INTERLOCK", "KUBE-APISERVER"].map(String::from);
    let width = |i: usize| {
        cells
            .iter()
            .chain([&header])
            .map(|c| c[i].chars().count())
            .max()
            .unwrap_or(0)
    };
    let (w0, w1, w2) = (width(0), width(1), width(2));
    for c in [&header].into_iter().chain(&cells) {
        writeln!(
            out,
            "     {:w0$}  {:w1$}  {:w2$}  {}",
            c[0], c[1], c[2], c[3]
        )?;
    }
    Ok(())
}

fn comparison_json(c: &Comparison) -> serde_json::Value {
    match c {
        Comparison::NotSent(why) => serde_json::json!({"notSent": why}),
        Comparison::Failed(why) => serde_json::json!({"failed": why}),
        Comparison::Rows(rows) => rows
            .iter()
            .map(|r| {
                serde_json::json!({
                    "object": r.object,
                    "interlock": r.interlock.to_string(),
                    "kubeApiserver": r.kube.to_string(),
                    "agrees": r.agrees(),
                })
            })
            .collect(),
    }
}

impl Summary {
    pub fn write(&self, format: TestFormat, out: &mut dyn Write) -> io::Result<()> {
        match format {
            TestFormat::Human => self.write_human(out),
            TestFormat::Json => {
                serde_json::to_writer_pretty(&mut *out, &self.to_json())?;
                writeln!(out)
            }
            TestFormat::Junit => self.write_junit(out),
        }
    }

    fn write_human(&self, out: &mut dyn Write) -> io::Result<()> {
        for e in &self.errors {
            writeln!(out, "error: {e}")?;
        }
        for w in &self.warnings {
            writeln!(out, "warning: {w}")?;
        }
        for c in &self.cases {
            let tag = match c.status() {
                "passed" => "ok  ",
                "failed" => "FAIL",
                _ => "SKIP",
            };
            writeln!(out, "{tag} {}/{} ({})", c.policy, c.name, c.file.display())?;
            for f in &c.failures {
                writeln!(out, "     {f}")?;
            }
            if c.not_run {
                writeln!(
                    out,
                    "     not run: the policy does not compile (error above)"
                )?;
            }
            if let Some(cluster) = &c.cluster {
                write_side_by_side(cluster, out)?;
            }
        }
        // Nothing ran: the errors above say why, a count would only hide them.
        if self.cases.is_empty() && !self.errors.is_empty() {
            return Ok(());
        }
        let not_run = self.cases.iter().filter(|c| c.not_run).count();
        writeln!(
            out,
            "{} passed, {} failed{}",
            self.cases.len() - self.failed(),
            self.failed() - not_run,
            if not_run > 0 {
                format!(", {not_run} not run")
            } else {
                String::new()
            }
        )
    }

    pub fn to_json(&self) -> serde_json::Value {
        let cases: Vec<serde_json::Value> = self
            .cases
            .iter()
            .map(|c| {
                serde_json::json!({
                    "policy": c.policy,
                    "name": c.name,
                    "file": c.file.display().to_string(),
                    "result": c.status(),
                    "failures": c.failures,
                    "cluster": c.cluster.as_ref().map(comparison_json),
                })
            })
            .collect();
        serde_json::json!({
            "cases": cases,
            "passed": self.cases.len() - self.failed(),
            "failed": self.failed(),
            "errors": self.errors,
            "warnings": self.warnings,
        })
    }

    fn write_junit(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(out, r#"<?xml version="1.0" encoding="UTF-8"?>"#)?;
        let failed = self.cases.iter().filter(|c| !c.failures.is_empty()).count();
        let skipped = self.cases.iter().filter(|c| c.not_run).count();
        writeln!(
            out,
            r#"<testsuites name="interlock test" tests="{}" failures="{failed}" errors="{}" skipped="{skipped}">"#,
            self.cases.len(),
            self.errors.len()
        )?;
        if !self.errors.is_empty() {
            writeln!(
                out,
                r#"  <testsuite name="interlock test" tests="{n}" errors="{n}">"#,
                n = self.errors.len()
            )?;
            for (i, e) in self.errors.iter().enumerate() {
                writeln!(
                    out,
                    r#"    <testcase classname="interlock test" name="error {i}"><error message="{}"/></testcase>"#,
                    xml_escape(e)
                )?;
            }
            writeln!(out, "  </testsuite>")?;
        }
        let mut policies: Vec<&str> = self.cases.iter().map(|c| c.policy.as_str()).collect();
        policies.dedup();
        for policy in policies {
            let cases: Vec<&CaseResult> =
                self.cases.iter().filter(|c| c.policy == policy).collect();
            writeln!(
                out,
                r#"  <testsuite name="{}" tests="{}" failures="{}" skipped="{}">"#,
                xml_escape(policy),
                cases.len(),
                cases.iter().filter(|c| !c.failures.is_empty()).count(),
                cases.iter().filter(|c| c.not_run).count(),
            )?;
            for c in cases {
                write!(
                    out,
                    r#"    <testcase classname="{}" name="{}" file="{}">"#,
                    xml_escape(policy),
                    xml_escape(&c.name),
                    xml_escape(&c.file.display().to_string())
                )?;
                if !c.failures.is_empty() {
                    let text = c.failures.join("\n");
                    write!(
                        out,
                        r#"<failure message="{}">{}</failure>"#,
                        xml_escape(&c.failures[0]),
                        xml_escape(&text)
                    )?;
                }
                if c.not_run {
                    write!(out, r#"<skipped message="the policy does not compile"/>"#)?;
                }
                writeln!(out, "</testcase>")?;
            }
            writeln!(out, "  </testsuite>")?;
        }
        writeln!(out, "</testsuites>")
    }
}
