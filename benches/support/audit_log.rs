//! kube-apiserver's audit log in a bench: who made the requests that
//! `apiserver_request_total` only counts by verb and resource.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Every request kube-apiserver records, at metadata level, once (when
/// its response is complete).
const POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted]
rules:
- level: Metadata
";

/// The log of one control plane, and its kube-apiserver flags.
pub struct AuditLog {
    path: PathBuf,
}

impl AuditLog {
    /// Writes the policy into `dir`; the log goes beside it.
    pub fn new(dir: &Path) -> AuditLog {
        let policy = dir.join("audit-policy.yaml");
        std::fs::write(&policy, POLICY).expect("audit policy");
        AuditLog {
            path: dir.join("audit.log"),
        }
    }

    pub fn apiserver_args(&self, dir: &Path) -> Vec<String> {
        vec![
            format!(
                "--audit-policy-file={}",
                dir.join("audit-policy.yaml").display()
            ),
            format!("--audit-log-path={}", self.path.display()),
            "--audit-log-mode=blocking".into(),
            // One file for the whole run, as it is read: the default
            // rotates it at 100 MB, which a 10,000-group run passes.
            "--audit-log-maxsize=1000000".into(),
        ]
    }

    /// Where the log ends now: a window's start.
    pub fn mark(&self) -> usize {
        std::fs::metadata(&self.path).map_or(0, |m| m.len() as usize)
    }

    /// The requests from `from` on about `resources`, counted by who made
    /// them, verb, resource, whether it was a dry run, and the answer's
    /// code when it was not a success.
    pub fn count_since(&self, from: usize, resources: &[&str]) -> BTreeMap<String, usize> {
        let text = std::fs::read(&self.path).unwrap_or_default();
        let mut by = BTreeMap::new();
        for e in String::from_utf8_lossy(&text[from.min(text.len())..])
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        {
            let resource = e["objectRef"]["resource"].as_str().unwrap_or("");
            if !resources.contains(&resource) {
                continue;
            }
            let dry = e["requestURI"]
                .as_str()
                .is_some_and(|u| u.contains("dryRun"));
            let sub = e["objectRef"]["subresource"]
                .as_str()
                .map_or(String::new(), |s| format!("/{s}"));
            let code = e["responseStatus"]["code"].as_u64().unwrap_or(0);
            let key = format!(
                "{} {} {resource}{sub}{}{}",
                who(&e),
                e["verb"].as_str().unwrap_or("?"),
                if dry { " (dry run)" } else { "" },
                if code >= 300 {
                    format!(" -> {code}")
                } else {
                    String::new()
                }
            );
            *by.entry(key).or_default() += 1;
        }
        by
    }
}

/// Who made a request: its user (and "as SA" when it impersonated a
/// ServiceAccount, as the controller's member writes do) and the first
/// word of its user agent.
fn who(e: &Value) -> String {
    let agent = e["userAgent"].as_str().unwrap_or("");
    let agent = agent.split('/').next().unwrap_or("");
    let user = e["user"]["username"].as_str().unwrap_or("?");
    let as_sa = if e["impersonatedUser"]["username"].is_string() {
        " as SA"
    } else {
        ""
    };
    format!("{user}{as_sa} [{agent}]")
}
