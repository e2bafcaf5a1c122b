//! JUnit XML, for CI test reports.

use std::collections::BTreeMap;
use std::io::{self, Write};

use super::{Action, Finding, ObjectRef, Report, SourceLocation};

impl Report {
    /// JUnit XML: one `<testsuite>` per policy, one `<testcase>` per
    /// (object, policy) pair (named `Kind namespace/name`, with `file` and
    /// `line` attributes) and a `<failure>` (its `type` the action) for
    /// every pair with findings; input errors form a last suite named
    /// `inputs` whose test cases have an `<error>`.
    pub fn write_junit(&self, out: &mut dyn Write) -> io::Result<()> {
        // policy -> (source, object) -> findings
        type Cases<'a> = BTreeMap<(&'a SourceLocation, &'a ObjectRef), Vec<&'a Finding>>;
        let mut suites: BTreeMap<&str, Cases<'_>> = BTreeMap::new();
        for n in self.all_policy_names() {
            suites.entry(n).or_default();
        }
        for e in &self.evaluated {
            suites
                .entry(e.policy.as_str())
                .or_default()
                .entry((&e.source, &e.object))
                .or_default();
        }
        for f in self.sorted_results() {
            suites
                .entry(f.policy.as_str())
                .or_default()
                .entry((&f.source, &f.object))
                .or_default()
                .push(f);
        }
        let total: usize = suites.values().map(BTreeMap::len).sum::<usize>() + self.errors.len();
        let failures: usize = suites
            .values()
            .map(|c| c.values().filter(|f| !f.is_empty()).count())
            .sum();
        writeln!(out, r#"<?xml version="1.0" encoding="UTF-8"?>"#)?;
        writeln!(
            out,
            r#"<testsuites name="interlock" tests="{total}" failures="{failures}" errors="{}" time="0">"#,
            self.errors.len()
        )?;
        for (policy, cases) in &suites {
            let failed = cases.values().filter(|f| !f.is_empty()).count();
            writeln!(
                out,
                r#"  <testsuite name="{}" tests="{}" failures="{failed}" errors="0" skipped="0" time="0">"#,
                xml_escape(policy),
                cases.len()
            )?;
            for ((source, object), findings) in cases {
                write!(
                    out,
                    r#"    <testcase name="{}" classname="{}" file="{}" line="{}" time="0""#,
                    xml_escape(&object.to_string()),
                    xml_escape(policy),
                    xml_escape(&source.file),
                    source.line
                )?;
                if findings.is_empty() {
                    writeln!(out, "/>")?;
                    continue;
                }
                writeln!(out, ">")?;
                let worst = findings
                    .iter()
                    .map(|f| f.action)
                    .min()
                    .unwrap_or(Action::Deny);
                let first = findings.first().map_or("", |f| f.message.as_str());
                let message = if findings.len() == 1 {
                    first.to_string()
                } else {
                    format!("{} violations; first: {first}", findings.len())
                };
                let mut body = String::new();
                for f in findings {
                    body.push_str(&format!("{}: {} {}", f.source, f.action, f.policy));
                    if let Some(b) = &f.binding {
                        body.push_str(&format!(" (binding {b})"));
                    }
                    body.push_str(&format!(": {}: {}\n", f.object, f.message));
                    if let Some(r) = &f.reason {
                        body.push_str(&format!("  reason: {r}\n"));
                    }
                    for r in &f.related {
                        match &r.source {
                            Some(s) => body.push_str(&format!("  related: {} at {s}\n", r.object)),
                            None => body.push_str(&format!("  related: {}\n", r.object)),
                        }
                    }
                }
                writeln!(
                    out,
                    r#"      <failure type="{}" message="{}">{}</failure>"#,
                    worst,
                    xml_escape(&message),
                    xml_escape(&body)
                )?;
                writeln!(out, "    </testcase>")?;
            }
            writeln!(out, "  </testsuite>")?;
        }
        if !self.errors.is_empty() {
            writeln!(
                out,
                r#"  <testsuite name="inputs" tests="{n}" failures="0" errors="{n}" skipped="0" time="0">"#,
                n = self.errors.len()
            )?;
            for e in self.sorted_errors() {
                let place = match e.line {
                    Some(l) => format!("{}:{l}", e.file),
                    None => e.file.clone(),
                };
                writeln!(
                    out,
                    r#"    <testcase name="{}" classname="inputs" file="{}" time="0">"#,
                    xml_escape(&place),
                    xml_escape(&e.file)
                )?;
                writeln!(
                    out,
                    r#"      <error type="InputError" message="{}">{}</error>"#,
                    xml_escape(&e.message),
                    xml_escape(&e.to_string())
                )?;
                writeln!(out, "    </testcase>")?;
            }
            writeln!(out, "  </testsuite>")?;
        }
        writeln!(out, "</testsuites>")
    }
}

/// Escapes text for XML 1.0 content and attribute values. Characters XML
/// cannot hold at all (most control characters, U+FFFE, U+FFFF) become
/// `\u{..}` text.
fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' => out.push_str("&#10;"),
            '\r' => out.push_str("&#13;"),
            '\t' => out.push_str("&#9;"),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => {
                out.push_str(&c.escape_unicode().to_string());
            }
            c => out.push(c),
        }
    }
    out
}
