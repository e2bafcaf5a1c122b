//! The results of `interlock check` and their output formats: `human`,
//! `json`, `sarif` (2.1.0) and `junit`.
//!
//! Every writer lists results in a fixed order (file, line, policy, then
//! binding, object and message) so that reports can be compared between
//! runs. [`Report::exit_code`] gives the command's exit status.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::io::{self, IsTerminal, Write};
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::manifest::{Document, LoadError};

/// What a violated rule does, as in a ValidatingAdmissionPolicyBinding's
/// `validationActions`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Action {
    /// The request would be refused; `check` exits 1.
    Deny,
    /// The request would pass with a warning.
    Warn,
    /// The request would pass and the violation is recorded in the audit log.
    Audit,
}

impl Action {
    /// `Deny`, `Warn` or `Audit`.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Deny => "Deny",
            Action::Warn => "Warn",
            Action::Audit => "Audit",
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which object a finding is about.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ObjectRef {
    /// `apiVersion`, e.g. `apps/v1`.
    #[serde(rename = "apiVersion")]
    pub api_version: String,
    /// `kind`, e.g. `Deployment`.
    pub kind: String,
    /// `metadata.namespace`, `None` for cluster-scoped objects or when unset.
    pub namespace: Option<String>,
    /// `metadata.name` (or `generateName` followed by `*`).
    pub name: String,
}

impl ObjectRef {
    /// The reference of a loaded document.
    pub fn from_document(doc: &Document) -> ObjectRef {
        let name = match doc.name() {
            Some(n) => n.to_string(),
            None => {
                let g = doc
                    .value
                    .get("metadata")
                    .and_then(|m| m.get("generateName"))
                    .and_then(Value::as_str)
                    .unwrap_or("");
                format!("{g}*")
            }
        };
        ObjectRef {
            api_version: doc.api_version().to_string(),
            kind: doc.kind().to_string(),
            namespace: doc.namespace().map(str::to_string),
            name,
        }
    }
}

impl fmt::Display for ObjectRef {
    /// `Kind namespace/name`, or `Kind name` without a namespace.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {}/{}", self.kind, ns, self.name),
            None => write!(f, "{} {}", self.kind, self.name),
        }
    }
}

/// A place in an input file.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct SourceLocation {
    /// The file as given on the command line (or found under a directory
    /// given there), or `<stdin>`.
    pub file: String,
    /// 1-based line.
    pub line: usize,
}

impl SourceLocation {
    /// Where a loaded document starts.
    pub fn from_document(doc: &Document) -> SourceLocation {
        SourceLocation {
            file: doc.source.to_string(),
            line: doc.line,
        }
    }
}

impl fmt::Display for SourceLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

/// Another object involved in a cross-object finding.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct RelatedObject {
    /// The object.
    pub object: ObjectRef,
    /// Where it is defined, when it came from a file.
    pub source: Option<SourceLocation>,
}

/// One violated rule for one object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// Name of the policy.
    pub policy: String,
    /// Name of the binding, for ValidatingAdmissionPolicies.
    pub binding: Option<String>,
    /// What the violation does.
    pub action: Action,
    /// The object that violates the rule.
    pub object: ObjectRef,
    /// The message, as the API server would show it.
    pub message: String,
    /// Where the object is defined.
    pub source: SourceLocation,
    /// Other objects involved (for example the other Ingress using a host).
    pub related: Vec<RelatedObject>,
    /// The validation's `reason` (`Invalid`, `Forbidden`, ...), if given.
    pub reason: Option<String>,
}

/// An input that could not be read or compiled.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct InputError {
    /// The file, or `<stdin>`.
    pub file: String,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// 1-based column, when known.
    pub column: Option<usize>,
    /// What is wrong, in words a user can act on.
    pub message: String,
}

impl From<&LoadError> for InputError {
    fn from(e: &LoadError) -> Self {
        InputError {
            file: e.source.to_string(),
            line: e.line,
            column: e.column,
            message: e.message(),
        }
    }
}

impl fmt::Display for InputError {
    /// `file:line:column: message`, leaving out what is not known.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(l) = self.line {
            write!(f, ":{l}")?;
            if let Some(c) = self.column {
                write!(f, ":{c}")?;
            }
        }
        write!(f, ": {}", self.message)
    }
}

/// One (policy, object) pair that a policy evaluated, passing or not. Only
/// the JUnit writer uses these, to list passing test cases.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Evaluated {
    /// Name of the policy.
    pub policy: String,
    /// The object.
    pub object: ObjectRef,
    /// Where the object is defined.
    pub source: SourceLocation,
}

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
}

/// An output format of `interlock check`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
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
        let summary = self.summary_line();
        let code = match self.exit_code() {
            0 => "32",
            1 => "31",
            _ => "33",
        };
        writeln!(out, "{}", paint(code, &summary))
    }

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
        json!({
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
        })
    }

    /// JSON format (pretty-printed, newline-terminated).
    pub fn write_json(&self, out: &mut dyn Write) -> io::Result<()> {
        serde_json::to_writer_pretty(&mut *out, &self.to_json())?;
        writeln!(out)
    }

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

/// Escapes text for XML 1.0 content and attribute values. Characters XML
/// cannot hold at all (most control characters, U+FFFE, U+FFFF) become
/// `\u{..}` text.
pub(crate) fn xml_escape(s: &str) -> String {
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

#[cfg(test)]
mod tests;
