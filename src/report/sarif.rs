//! SARIF 2.1.0, for GitHub code scanning and other SARIF viewers.

use std::collections::BTreeMap;
use std::io::{self, Write};

use serde_json::{json, Value};

use super::{Action, Finding, Report, SourceLocation};

impl Report {
    /// SARIF 2.1.0: one run of the `interlock` driver whose rules are the
    /// policies; each finding is a result with `ruleId`, a level (`error`
    /// for Deny, `warning` for Warn, `note` for Audit), the object's file as
    /// a relative URI and its line; related objects become
    /// `relatedLocations`; input errors become tool execution
    /// notifications.
    pub fn to_sarif(&self) -> Value {
        let names = self.all_policy_names();
        let rule_index: BTreeMap<&str, usize> =
            names.iter().enumerate().map(|(i, n)| (*n, i)).collect();
        let rules: Vec<Value> = names
            .iter()
            .map(|n| {
                json!({
                    "id": n,
                    "shortDescription": { "text": format!("Interlock policy {n}") },
                    "fullDescription": {
                        "text": format!("Objects that violate the policy {n}.")
                    },
                    "help": {
                        "text": format!("See the policy {n} for what it requires and why.")
                    },
                    "properties": { "tags": ["kubernetes", "interlock"] }
                })
            })
            .collect();
        let results: Vec<Value> = self
            .sorted_results()
            .into_iter()
            .map(|f| {
                let level = match f.action {
                    Action::Deny => "error",
                    Action::Warn => "warning",
                    Action::Audit => "note",
                };
                let mut text = format!("{}: {}", f.object, f.message);
                let unlocated: Vec<String> = f
                    .related
                    .iter()
                    .filter(|r| r.source.is_none())
                    .map(|r| r.object.to_string())
                    .collect();
                if !unlocated.is_empty() {
                    text.push_str(&format!(" (related: {})", unlocated.join(", ")));
                }
                let related: Vec<Value> = f
                    .related
                    .iter()
                    .filter_map(|r| r.source.as_ref().map(|s| (r, s)))
                    .enumerate()
                    .map(|(i, (r, s))| {
                        let mut loc = sarif_location(s);
                        loc["id"] = json!(i);
                        loc["message"] = json!({ "text": r.object.to_string() });
                        loc
                    })
                    .collect();
                let mut result = json!({
                    "ruleId": f.policy,
                    "ruleIndex": rule_index.get(f.policy.as_str()).copied().unwrap_or(0),
                    "level": level,
                    "message": { "text": text },
                    "locations": [sarif_location(&f.source)],
                    "partialFingerprints": {
                        "interlockFinding/v1": fingerprint(f),
                    },
                    "properties": {
                        "action": f.action,
                        "binding": f.binding,
                        "object": f.object,
                        "reason": f.reason,
                    },
                });
                if !related.is_empty() {
                    result["relatedLocations"] = Value::Array(related);
                }
                result
            })
            .collect();
        let levelled = self
            .sorted_errors()
            .into_iter()
            .map(|e| ("error", e))
            .chain(self.sorted_notices().into_iter().map(|n| ("note", n)));
        let notifications: Vec<Value> = levelled
            .map(|(level, e)| {
                let mut n = json!({
                    "level": level,
                    "message": { "text": e.message },
                });
                let mut phys = json!({ "artifactLocation": { "uri": sarif_uri(&e.file) } });
                if let Some(line) = e.line.filter(|l| *l > 0) {
                    let mut region = json!({ "startLine": line });
                    if let Some(c) = e.column.filter(|c| *c > 0) {
                        region["startColumn"] = json!(c);
                    }
                    phys["region"] = region;
                }
                n["locations"] = json!([{ "physicalLocation": phys }]);
                n
            })
            .collect();
        json!({
            "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
            "version": "2.1.0",
            "runs": [{
                "tool": {
                    "driver": {
                        "name": "interlock",
                        "semanticVersion": env!("CARGO_PKG_VERSION"),
                        "rules": rules,
                    }
                },
                "invocations": [{
                    "executionSuccessful": self.errors.is_empty(),
                    "toolExecutionNotifications": notifications,
                }],
                "columnKind": "unicodeCodePoints",
                "results": results,
            }]
        })
    }

    /// SARIF format (pretty-printed, newline-terminated).
    pub fn write_sarif(&self, out: &mut dyn Write) -> io::Result<()> {
        serde_json::to_writer_pretty(&mut *out, &self.to_sarif())?;
        writeln!(out)
    }
}

/// A file name as a SARIF artifact URI: relative paths stay relative
/// (`./` dropped, `\` made `/`), absolute paths under the current directory
/// become relative, other absolute paths become `file://` URIs; characters
/// outside the URI's unreserved set are percent-encoded.
pub(crate) fn sarif_uri(file: &str) -> String {
    let mut path = file.replace('\\', "/");
    if path.starts_with('/') {
        if let Ok(cwd) = std::env::current_dir() {
            let cwd = cwd.to_string_lossy().replace('\\', "/");
            let prefix = format!("{}/", cwd.trim_end_matches('/'));
            if let Some(rest) = path.strip_prefix(&prefix) {
                path = rest.to_string();
            }
        }
    }
    while let Some(rest) = path.strip_prefix("./") {
        path = rest.to_string();
    }
    let absolute = path.starts_with('/');
    let mut out = String::with_capacity(path.len() + 8);
    if absolute {
        out.push_str("file://");
    }
    for b in path.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

fn sarif_location(s: &SourceLocation) -> Value {
    let mut phys = json!({ "artifactLocation": { "uri": sarif_uri(&s.file) } });
    if s.line > 0 {
        phys["region"] = json!({ "startLine": s.line });
    }
    json!({ "physicalLocation": phys })
}

/// A stable identity of a finding that does not depend on its line, so that
/// code scanning keeps tracking it when the file changes above it.
fn fingerprint(f: &Finding) -> String {
    // FNV-1a, 64 bits: stable across Rust versions, unlike `DefaultHasher`.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut feed = |s: &str| {
        for b in s.bytes().chain(std::iter::once(0xff)) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    feed(&f.policy);
    feed(f.binding.as_deref().unwrap_or(""));
    feed(&f.source.file);
    feed(&f.object.api_version);
    feed(&f.object.kind);
    feed(f.object.namespace.as_deref().unwrap_or(""));
    feed(&f.object.name);
    feed(&f.message);
    format!("{h:016x}")
}
