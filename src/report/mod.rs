//! Reports of findings and their output formats: `human`, `json`, `sarif`
//! (2.1.0) and `junit`, one file each. `check` and `audit` both write them.
//!
//! Every writer lists results in a fixed order (file, line, policy, then
//! binding, object and message) so that reports can be compared between
//! runs. [`Report::exit_code`] gives the command's exit status.

mod human;
mod json;
pub(crate) mod junit;
mod sarif;

use std::cmp::Ordering;
use std::collections::BTreeSet;
use std::fmt;
use std::io::{self, IsTerminal, Write};
use std::str::FromStr;

use crate::manifest::LoadError;
pub use crate::policy::finding::{
    Action, Evaluated, Finding, InputError, ObjectRef, RelatedObject, SourceLocation,
};

/// Everything `interlock check` found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Number of objects checked.
    pub objects: usize,
    /// Number of policies loaded.
    pub policies: usize,
    /// Every violation, whatever its action.
    pub results: Vec<Finding>,
    /// Inputs that could not be read or compiled.
    pub errors: Vec<InputError>,
    /// What the user should know but that does not change the exit status:
    /// files skipped as not objects, objects given more than once, lookups
    /// that read one of several copies.
    pub notices: Vec<InputError>,
    /// Names of the policies loaded (SARIF rules, JUnit suites). Policies
    /// named in `results` are added when missing, so this may stay empty.
    pub policy_names: Vec<String>,
    /// Optional: the (policy, object) pairs evaluated, so that JUnit also
    /// lists passing test cases. When empty, JUnit lists only the pairs with
    /// findings.
    pub evaluated: Vec<Evaluated>,
    /// What MutatingAdmissionPolicies did to each object they changed
    /// (`check --show-mutations`).
    pub mutations: Vec<ObjectMutation>,
}

/// The patch MutatingAdmissionPolicies made to one checked object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectMutation {
    pub object: ObjectRef,
    pub source: SourceLocation,
    /// The policies that changed it, in the order they ran.
    pub policies: Vec<String>,
    /// RFC 6902 operations from the object as written (and defaulted) to
    /// the object as mutated.
    pub patch: serde_json::Value,
}

/// An output format of `interlock check`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OutputFormat {
    /// Grouped by file, one line per finding, for people.
    #[default]
    Human,
    /// The JSON document of the command-line contract (docs/usage.md).
    Json,
    /// SARIF 2.1.0, for GitHub code scanning and other SARIF viewers.
    Sarif,
    /// JUnit XML, for CI test reports.
    Junit,
}

impl FromStr for OutputFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "human" => Ok(OutputFormat::Human),
            "json" => Ok(OutputFormat::Json),
            "sarif" => Ok(OutputFormat::Sarif),
            "junit" => Ok(OutputFormat::Junit),
            other => Err(format!(
                "unknown output format {other:?}; use human, json, sarif or junit"
            )),
        }
    }
}

impl fmt::Display for OutputFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            OutputFormat::Human => "human",
            OutputFormat::Json => "json",
            OutputFormat::Sarif => "sarif",
            OutputFormat::Junit => "junit",
        })
    }
}

/// The order of findings in every format.
fn finding_order(a: &Finding, b: &Finding) -> Ordering {
    (&a.source.file, a.source.line, &a.policy, &a.binding)
        .cmp(&(&b.source.file, b.source.line, &b.policy, &b.binding))
        .then_with(|| a.object.cmp(&b.object))
        .then_with(|| a.action.cmp(&b.action))
        .then_with(|| a.message.cmp(&b.message))
        .then_with(|| a.reason.cmp(&b.reason))
        .then_with(|| a.related.cmp(&b.related))
}

/// True when colour should be used on standard output: it is a terminal and
/// `NO_COLOR` is not set.
pub fn stdout_wants_color() -> bool {
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

impl Report {
    /// The exit status of `interlock check`: 2 if any input could not be
    /// read, else 1 if any finding has the Deny action, else 0.
    pub fn exit_code(&self) -> i32 {
        if !self.errors.is_empty() {
            2
        } else if self.results.iter().any(|f| f.action == Action::Deny) {
            1
        } else {
            0
        }
    }

    /// Adds the loader's errors.
    pub fn add_load_errors<'a>(&mut self, errors: impl IntoIterator<Item = &'a LoadError>) {
        self.errors.extend(errors.into_iter().map(InputError::from));
    }

    /// Sorts results and errors into the order every writer uses.
    pub fn sort(&mut self) {
        self.results.sort_by(finding_order);
        self.errors.sort();
        self.notices.sort();
        self.notices.dedup();
        self.evaluated.sort();
        self.mutations
            .sort_by(|a, b| (&a.source.file, a.source.line).cmp(&(&b.source.file, b.source.line)));
    }

    fn sorted_results(&self) -> Vec<&Finding> {
        let mut v: Vec<&Finding> = self.results.iter().collect();
        v.sort_by(|a, b| finding_order(a, b));
        v
    }

    fn sorted_errors(&self) -> Vec<&InputError> {
        let mut v: Vec<&InputError> = self.errors.iter().collect();
        v.sort();
        v
    }

    /// Policy names from `policy_names` and `results`, sorted, unique.
    fn all_policy_names(&self) -> Vec<&str> {
        let set: BTreeSet<&str> = self
            .policy_names
            .iter()
            .map(String::as_str)
            .chain(self.results.iter().map(|f| f.policy.as_str()))
            .collect();
        set.into_iter().collect()
    }

    fn count(&self, action: Action) -> usize {
        self.results.iter().filter(|f| f.action == action).count()
    }

    /// Writes the report in `format`. `color` only affects `human`.
    pub fn write(&self, format: OutputFormat, out: &mut dyn Write, color: bool) -> io::Result<()> {
        match format {
            OutputFormat::Human => self.write_human(out, color),
            OutputFormat::Json => self.write_json(out),
            OutputFormat::Sarif => self.write_sarif(out),
            OutputFormat::Junit => self.write_junit(out),
        }
    }

    /// Writes the report to standard output in `format`, with colour when it
    /// is a terminal.
    pub fn print(&self, format: OutputFormat) -> io::Result<()> {
        let stdout = io::stdout();
        let mut lock = io::BufWriter::new(stdout.lock());
        self.write(format, &mut lock, stdout_wants_color())?;
        lock.flush()
    }

    /// Writes the input errors, one `file:line:column: message` a line, then
    /// the notices, as `file:line: note: message` (for standard error).
    pub fn write_errors(&self, out: &mut dyn Write) -> io::Result<()> {
        for e in self.sorted_errors() {
            writeln!(out, "{}", terminal_safe(&e.to_string()))?;
        }
        for n in self.sorted_notices() {
            let note = InputError {
                message: format!("note: {}", n.message),
                ..n.clone()
            };
            writeln!(out, "{}", terminal_safe(&note.to_string()))?;
        }
        Ok(())
    }

    fn sorted_notices(&self) -> Vec<&InputError> {
        let mut v: Vec<&InputError> = self.notices.iter().collect();
        v.sort();
        v.dedup();
        v
    }

    /// The one-line summary that ends the human format.
    pub fn summary_line(&self) -> String {
        let objects = plural(self.objects, "object", "objects");
        let policies = plural(self.policies, "policy", "policies");
        let mut s = if self.results.is_empty() {
            format!("{objects} checked against {policies}: no violations")
        } else {
            format!(
                "{objects} checked against {policies}: {} ({} denied, {} warned, {} audited)",
                plural(self.results.len(), "violation", "violations"),
                self.count(Action::Deny),
                self.count(Action::Warn),
                self.count(Action::Audit),
            )
        };
        if !self.errors.is_empty() {
            s.push_str(&format!(
                "; {} could not be read",
                plural(self.errors.len(), "input error", "input errors")
            ));
        }
        if !self.notices.is_empty() {
            s.push_str(&format!(
                "; {} on standard error",
                plural(self.sorted_notices().len(), "notice", "notices")
            ));
        }
        s
    }
}

fn plural(n: usize, one: &str, many: &str) -> String {
    if n == 1 {
        format!("{n} {one}")
    } else {
        format!("{n} {many}")
    }
}

/// Escapes control characters (terminal escape sequences included) so that
/// a hostile message cannot drive the terminal. Newlines and tabs stay.
pub(crate) fn terminal_safe(s: &str) -> String {
    if !s
        .chars()
        .any(|c| (c.is_control() && c != '\n' && c != '\t') || is_bidi_control(c))
    {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if (c.is_control() && c != '\n' && c != '\t') || is_bidi_control(c) {
            out.push_str(&c.escape_unicode().to_string());
        } else {
            out.push(c);
        }
    }
    out
}

/// Unicode bidirectional controls, which can make text read differently
/// from what it is ("Trojan Source").
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}')
}

#[cfg(test)]
mod tests;
