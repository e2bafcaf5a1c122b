//! The human format: findings grouped by file, for people.

use std::io::{self, Write};

use super::{terminal_safe, Action, Report};

impl Report {
    /// Human format: findings grouped by file, each as
    /// `file:line: ACTION policy: Kind namespace/name: message`, related
    /// objects under it, then a summary line. Input errors are not listed
    /// here (see [`Report::write_errors`]), only counted.
    pub fn write_human(&self, out: &mut dyn Write, color: bool) -> io::Result<()> {
        let paint = |code: &str, text: &str| -> String {
            if color {
                format!("\x1b[{code}m{text}\x1b[0m")
            } else {
                text.to_string()
            }
        };
        let mut last_file: Option<&str> = None;
        for f in self.sorted_results() {
            if last_file.is_some_and(|l| l != f.source.file) {
                writeln!(out)?;
            }
            last_file = Some(&f.source.file);
            let (label, code) = match f.action {
                Action::Deny => ("DENY", "1;31"),
                Action::Warn => ("WARN", "1;33"),
                Action::Audit => ("AUDIT", "1;36"),
            };
            let location = terminal_safe(&f.source.to_string());
            let message = terminal_safe(&f.message).replace('\n', "\n    ");
            write!(
                out,
                "{}: {} {}",
                paint("1", &location),
                paint(code, label),
                terminal_safe(&f.policy)
            )?;
            if let Some(b) = &f.binding {
                write!(out, " (binding {})", terminal_safe(b))?;
            }
            writeln!(
                out,
                ": {}: {}",
                terminal_safe(&f.object.to_string()),
                message
            )?;
            if let Some(r) = &f.reason {
                writeln!(out, "    reason: {}", terminal_safe(r))?;
            }
            for r in &f.related {
                let obj = terminal_safe(&r.object.to_string());
                match &r.source {
                    Some(s) => writeln!(
                        out,
                        "    related: {obj} at {}",
                        terminal_safe(&s.to_string())
                    )?,
                    None => writeln!(out, "    related: {obj}")?,
                }
            }
        }
        if !self.results.is_empty() {
            writeln!(out)?;
        }
        for m in &self.mutations {
            writeln!(
                out,
                "{}: {} {} by {}: {}",
                paint("1", &terminal_safe(&m.source.to_string())),
                paint("1;35", "MUTATE"),
                terminal_safe(&m.object.to_string()),
                terminal_safe(&m.policies.join(", ")),
                terminal_safe(&m.patch.to_string())
            )?;
        }
        if !self.mutations.is_empty() {
            writeln!(out)?;
        }
        let summary = self.summary_line();
        let code = match self.exit_code() {
            0 => "32",
            1 => "31",
            _ => "33",
        };
        writeln!(out, "{}", paint(code, &summary))
    }
}
