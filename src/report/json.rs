//! The JSON format of the command-line contract (docs/usage.md).

use std::io::{self, Write};

use serde_json::{json, Value};

use super::{Action, Report};

impl Report {
    /// The JSON document of docs/usage.md, with extra fields: `summary.denied`,
    /// `summary.warned`, `summary.audited`, `summary.errors`, per result
    /// `reason` and `related`, and a top-level `errors` list.
    pub fn to_json(&self) -> Value {
        let results: Vec<Value> = self
            .sorted_results()
            .into_iter()
            .map(|f| {
                json!({
                    "policy": f.policy,
                    "binding": f.binding,
                    "action": f.action,
                    "object": f.object,
                    "message": f.message,
                    "source": f.source,
                    "reason": f.reason,
                    "related": f.related,
                })
            })
            .collect();
        let mut doc = json!({
            "summary": {
                "objects": self.objects,
                "policies": self.policies,
                "violations": self.results.len(),
                "denied": self.count(Action::Deny),
                "warned": self.count(Action::Warn),
                "audited": self.count(Action::Audit),
                "errors": self.errors.len(),
                "notices": self.sorted_notices().len(),
            },
            "results": results,
            "errors": self.sorted_errors(),
            "notices": self.sorted_notices(),
        });
        // Only with `--show-mutations`: the contract's document is unchanged without it.
        if !self.mutations.is_empty() {
            doc["mutations"] = self
                .mutations
                .iter()
                .map(|m| json!({"object": m.object, "source": m.source, "policies": m.policies, "patch": m.patch}))
                .collect();
        }
        doc
    }

    /// JSON format (pretty-printed, newline-terminated).
    pub fn write_json(&self, out: &mut dyn Write) -> io::Result<()> {
        serde_json::to_writer_pretty(&mut *out, &self.to_json())?;
        writeln!(out)
    }
}
