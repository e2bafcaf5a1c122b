//! `plan`'s report as text for people or as JSON for scripts.

use super::{GroupPlan, MemberPlan, Report};
use crate::group::preview::{Action, FieldChange};
use serde_json::{json, Value};
use std::fmt::Write as _;

/// `{"groups": [...], "summary": {"groups": N, "refused": N}}`.
pub fn json(report: &Report) -> Value {
    json!({
        "groups": report.groups,
        "summary": {
            "groups": report.groups.len(),
            "refused": report.groups.iter().filter(|g| g.refused).count(),
        },
    })
}

/// One block per group: its verdict, a line per member (an update's
/// changes below it), the findings and the conditions.
pub fn human(report: &Report) -> String {
    let mut out = String::new();
    for g in &report.groups {
        group(&mut out, g);
    }
    out
}

fn group(out: &mut String, g: &GroupPlan) {
    let verdict = if g.refused {
        "would be refused"
    } else {
        "would apply cleanly"
    };
    let new = if g.new { " (new)" } else { "" };
    let _ = writeln!(
        out,
        "ResourceGroup {}/{}{new} ({}): {verdict}",
        g.namespace, g.name, g.source
    );
    for m in &g.members {
        member(out, m);
    }
    if !g.findings.is_empty() {
        let _ = writeln!(out, "  findings:");
    }
    for f in &g.findings {
        let binding = f
            .binding
            .as_deref()
            .map(|b| format!(" ({b})"))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "    {:?} {}{binding}: {} {}: {}",
            f.action, f.policy, f.object.kind, f.object.name, f.message
        );
    }
    let _ = writeln!(out, "  conditions:");
    for c in &g.conditions {
        let _ = writeln!(
            out,
            "    {}={:?} {}: {}",
            c.type_, c.status, c.reason, c.message
        );
    }
}

fn member(out: &mut String, m: &MemberPlan) {
    let _ = write!(
        out,
        "  {:<9} {} {} {}",
        m.action.as_str(),
        m.api_version,
        m.kind,
        m.name
    );
    match &m.message {
        Some(why) => {
            let _ = writeln!(out, ": {why}");
        }
        None => out.push('\n'),
    }
    if m.action == Action::Update {
        for c in &m.changes {
            change(out, c);
        }
    }
}

fn change(out: &mut String, c: &FieldChange) {
    let shown = |v: &Option<Value>| v.as_ref().map_or("(absent)".to_string(), Value::to_string);
    let _ = writeln!(
        out,
        "      {}: {} -> {}",
        c.path,
        shown(&c.before),
        shown(&c.after)
    );
}
