//! The reader against a reference YAML parser, value for value.
//!
//! `kubectl` reads manifests with sigs.k8s.io/yaml, on go-yaml v2, which is
//! a line-by-line port of libyaml. `serde_yaml` 0.9 runs libyaml's own
//! scanner and parser (unsafe-libyaml), so what it accepts, and the values
//! it reads, are what `kubectl apply` would send. A generator writes the
//! same random tree in many YAML shapes (block and flow collections, flow
//! collections over several lines with their closing bracket anywhere,
//! quoted scalars over several lines, block scalars, comments, anchors);
//! both parsers read each text and must agree on acceptance and on the
//! value.
//!
//! Scalars are limited to those that YAML 1.1 (go-yaml) and YAML 1.2
//! (libyaml through serde_yaml's resolver) resolve alike: words that are
//! not booleans or nulls in either, decimal integers, quoted strings. How
//! plain scalars resolve is tested in `scalar.rs` against go-yaml's rules.

use super::*;
use serde_json::{json, Value as Json};

use crate::test_rng::Rng;

/// A value the generator writes: only what both resolvers read alike.
#[derive(Debug, Clone)]
enum Node {
    Word(String),
    Int(i64),
    /// A string always written quoted (it could read as something else).
    Quoted(String),
    /// A plain scalar and the JSON go-yaml reads it as.
    Resolved(String, String),
    Seq(Vec<Node>),
    Map(Vec<(String, Node)>),
}

impl Node {
    fn json(&self) -> Json {
        match self {
            Node::Word(s) | Node::Quoted(s) => json!(s),
            Node::Int(i) => json!(i),
            Node::Resolved(_, j) => serde_json::from_str(j).unwrap_or(Json::Null),
            Node::Seq(items) => Json::Array(items.iter().map(Node::json).collect()),
            Node::Map(entries) => {
                Json::Object(entries.iter().map(|(k, v)| (k.clone(), v.json())).collect())
            }
        }
    }
}

const WORDS: &[&str] = &[
    "app",
    "web",
    "nginx",
    "a-b",
    "x1",
    "value_2",
    "http://x/y",
    "a.b.c",
    "path/to",
    "é-ü",
];
const QUOTED: &[&str] = &[
    "two words",
    "a b c",
    "",
    " ",
    "yes",
    "no",
    "on",
    "true",
    "null",
    "~",
    "0x1F",
    "012",
    "1.5",
    "a: b",
    "# not a comment",
    "[x]",
    "{y}",
    "a, b",
    "it's",
    "say \"hi\"",
    "back\\slash",
    "-",
    "- x",
    "tab\there",
    "--- x",
];

/// Plain scalars that YAML 1.1 (go-yaml) resolves to something other than
/// a string, or that look like it: only compared with sigs.k8s.io/yaml
/// itself, as their JSON form (what go-yaml makes of them).
const YAML11: &[(&str, &str)] = &[
    ("yes", "true"),
    ("No", "false"),
    ("on", "true"),
    ("OFF", "false"),
    ("y", "true"),
    ("n", "false"),
    ("~", "null"),
    ("null", "null"),
    ("012", "10"),
    ("0o17", "15"),
    ("0x1F", "31"),
    ("1_000", "1000"),
    ("1.5", "1.5"),
    ("-2.0", "-2"),
    ("1e3", "1000"),
    ("2024-01-02", "\"2024-01-02\""),
    ("0.0.1", "\"0.0.1\""),
    ("+12", "12"),
    ("-0", "0"),
    ("True", "true"),
    ("1:30", "\"1:30\""),
    ("08", "8"),
];

fn gen_node(r: &mut Rng, depth: usize, yaml11: bool) -> Node {
    let leaf = depth >= 3 || r.below(3) == 0;
    if leaf {
        return match r.below(if yaml11 { 5 } else { 4 }) {
            0 => Node::Int(r.below(2000) as i64 - 500),
            1 => Node::Quoted(QUOTED[r.below(QUOTED.len())].to_string()),
            4 => {
                let (text, json) = YAML11[r.below(YAML11.len())];
                Node::Resolved(text.to_string(), json.to_string())
            }
            _ => Node::Word(WORDS[r.below(WORDS.len())].to_string()),
        };
    }
    let n = r.below(4);
    if r.below(2) == 0 {
        Node::Seq((0..n).map(|_| gen_node(r, depth + 1, yaml11)).collect())
    } else {
        let mut entries: Vec<(String, Node)> = Vec::new();
        for i in 0..n {
            entries.push((
                format!("k{i}{}", WORDS[r.below(3)]),
                gen_node(r, depth + 1, yaml11),
            ));
        }
        Node::Map(entries)
    }
}

/// Writes YAML text for nodes, choosing a shape at random at every node.
struct Writer<'r> {
    r: &'r mut Rng,
    out: String,
}

impl Writer<'_> {
    fn spaces(&mut self, n: usize) {
        self.out.extend(std::iter::repeat_n(' ', n));
    }

    /// A scalar (or an empty collection) on the current line.
    fn scalar(&mut self, node: &Node, flow: bool) {
        match node {
            Node::Word(s) => self.out.push_str(s),
            Node::Int(i) => self.out.push_str(&i.to_string()),
            Node::Resolved(text, _) => self.out.push_str(text),
            Node::Quoted(s) => {
                // Single quotes cannot hold a tab written as an escape, and
                // any text is fine in double quotes with escapes.
                if self.r.below(2) == 0 && !s.contains('\t') {
                    self.out.push('\'');
                    self.out.push_str(&s.replace('\'', "''"));
                    self.out.push('\'');
                } else {
                    let escaped = s
                        .replace('\\', "\\\\")
                        .replace('"', "\\\"")
                        .replace('\t', "\\t");
                    self.out.push('"');
                    self.out.push_str(&escaped);
                    self.out.push('"');
                }
            }
            Node::Seq(_) | Node::Map(_) => self.flow(node, 0, flow),
        }
    }

    /// A flow collection, on one line or over several; `base` is the
    /// indentation of the block node it is in.
    fn flow(&mut self, node: &Node, base: usize, _in_flow: bool) {
        let (open, close) = match node {
            Node::Seq(_) => ('[', ']'),
            _ => ('{', '}'),
        };
        let items: Vec<(Option<&str>, &Node)> = match node {
            Node::Seq(items) => items.iter().map(|n| (None, n)).collect(),
            Node::Map(entries) => entries.iter().map(|(k, v)| (Some(k.as_str()), v)).collect(),
            _ => unreachable!(),
        };
        let multiline = !items.is_empty() && self.r.below(2) == 0;
        self.out.push(open);
        for (i, (key, value)) in items.iter().enumerate() {
            if multiline {
                self.out.push('\n');
                // Anywhere: under the key, past it, or at column 0, as
                // go-yaml allows inside flow collections.
                let col = match self.r.below(4) {
                    0 => 0,
                    1 => base,
                    _ => base + 2 + self.r.below(3),
                };
                self.spaces(col);
            } else if i > 0 {
                // Tabs separate tokens inside flow collections.
                self.out.push(if self.r.below(6) == 0 { '\t' } else { ' ' });
            }
            if let Some(k) = key {
                self.out.push_str(k);
                self.out.push_str(": ");
            }
            match value {
                Node::Seq(_) | Node::Map(_) => self.flow(value, base, true),
                other => self.scalar(other, true),
            }
            let last = i + 1 == items.len();
            if !last || (multiline && self.r.below(2) == 0) {
                self.out.push(',');
            }
            if multiline && self.r.below(5) == 0 {
                self.out.push_str(" # note");
            }
        }
        if multiline {
            self.out.push('\n');
            let col = match self.r.below(3) {
                0 => 0,
                1 => base,
                _ => base + 2,
            };
            self.spaces(col);
        }
        self.out.push(close);
    }

    /// The value of a block mapping key or sequence entry whose line is
    /// indented `ind`; the line so far ends with `key:` or `-`.
    fn block_value(&mut self, node: &Node, ind: usize, under_key: bool) {
        let step = 2 + 2 * self.r.below(2);
        match node {
            Node::Seq(items) if !items.is_empty() && self.r.below(3) != 0 => {
                self.out.push('\n');
                // A sequence under a key may sit at the key's indentation.
                let at = if under_key && self.r.below(2) == 0 {
                    ind
                } else {
                    ind + step
                };
                self.block_seq(items, at);
            }
            Node::Map(entries) if !entries.is_empty() && self.r.below(3) != 0 => {
                self.out.push('\n');
                self.block_map(entries, ind + step);
            }
            Node::Seq(_) | Node::Map(_) => {
                self.out.push(' ');
                self.flow(node, ind, false);
                self.out.push('\n');
            }
            Node::Quoted(s)
                if !s.is_empty()
                    && !s.contains('\t')
                    && !s.starts_with(' ')
                    && self.r.below(3) == 0 =>
            {
                // A literal block scalar, stripped of its final newline.
                self.out.push_str(" |-\n");
                self.spaces(ind + step);
                self.out.push_str(s);
                self.out.push('\n');
            }
            Node::Quoted(s) if s.contains(' ') && !s.contains("  ") && self.r.below(3) == 0 => {
                // A double-quoted scalar folded over two lines; the second
                // line's indentation is not content (go-yaml allows any).
                let (a, b) = s.split_once(' ').unwrap_or((s, ""));
                let esc = |t: &str| t.replace('\\', "\\\\").replace('"', "\\\"");
                self.out.push_str(" \"");
                self.out.push_str(&esc(a));
                self.out.push('\n');
                let col = match self.r.below(3) {
                    0 => 0,
                    1 => ind,
                    _ => ind + step,
                };
                self.spaces(col);
                self.out.push_str(&esc(b));
                self.out.push_str("\"\n");
            }
            Node::Word(w) if self.r.below(8) == 0 => {
                // A folded block scalar: one line, kept without its newline.
                self.out.push_str(" >-\n");
                self.spaces(ind + step);
                self.out.push_str(w);
                self.out.push('\n');
            }
            Node::Quoted(s)
                if s.contains(' ')
                    && !s.contains("  ")
                    && !s.starts_with(' ')
                    && !s.ends_with(' ')
                    && s.chars().all(|c| c.is_ascii_alphanumeric() || c == ' ')
                    && self.r.below(3) == 0 =>
            {
                // A plain scalar folded over two lines, the second indented
                // past the key.
                let (a, b) = s.split_once(' ').unwrap_or((s, ""));
                self.out.push(' ');
                self.out.push_str(a);
                self.out.push('\n');
                self.spaces(ind + step);
                self.out.push_str(b);
                self.out.push('\n');
            }
            other => {
                self.out.push(' ');
                self.scalar(other, false);
                if self.r.below(6) == 0 {
                    self.out.push_str(" # trailing");
                }
                self.out.push('\n');
            }
        }
    }

    fn block_map(&mut self, entries: &[(String, Node)], ind: usize) {
        for (k, v) in entries {
            let tab = matches!(v, Node::Word(_) | Node::Int(_) | Node::Resolved(..))
                && self.r.below(8) == 0;
            if self.r.below(8) == 0 {
                self.spaces(ind);
                self.out.push_str("# a comment line\n");
            }
            self.spaces(ind);
            self.out.push_str(k);
            self.out.push(':');
            if tab {
                // A tab between the colon and a scalar (go-yaml: a space).
                self.out.push('\t');
                self.scalar(v, false);
                self.out.push('\n');
                continue;
            }
            self.block_value(v, ind, true);
        }
    }

    fn block_seq(&mut self, items: &[Node], ind: usize) {
        for v in items {
            self.spaces(ind);
            self.out.push('-');
            match v {
                // A mapping may start on the dash's line.
                Node::Map(entries) if !entries.is_empty() && self.r.below(2) == 0 => {
                    self.out.push(' ');
                    let (k, first) = &entries[0];
                    self.out.push_str(k);
                    self.out.push(':');
                    self.block_value(first, ind + 2, true);
                    self.block_map(&entries[1..], ind + 2);
                }
                _ => self.block_value(v, ind, false),
            }
        }
    }
}

fn reference(text: &str) -> Result<Json, serde_yaml::Error> {
    let v: serde_yaml::Value = serde_yaml::from_str(text)?;
    fn conv(v: serde_yaml::Value) -> Json {
        match v {
            serde_yaml::Value::Null => Json::Null,
            serde_yaml::Value::Bool(b) => json!(b),
            serde_yaml::Value::Number(n) => match (n.as_i64(), n.as_u64()) {
                (Some(i), _) => json!(i),
                (_, Some(u)) => json!(u),
                _ => json!(n.as_f64()),
            },
            serde_yaml::Value::String(s) => json!(s),
            serde_yaml::Value::Sequence(items) => {
                Json::Array(items.into_iter().map(conv).collect())
            }
            serde_yaml::Value::Mapping(m) => Json::Object(
                m.into_iter()
                    .map(|(k, v)| (k.as_str().unwrap_or("?").to_string(), conv(v)))
                    .collect(),
            ),
            serde_yaml::Value::Tagged(t) => conv(t.value),
        }
    }
    Ok(conv(v))
}

/// How our reader and the reference differ on one text.
#[derive(Debug, thiserror::Error)]
enum Difference {
    #[error("different values\n--- ours\n{ours}\n--- reference\n{reference}")]
    Values { ours: String, reference: String },
    #[error("refused by us, accepted by libyaml: {0}")]
    RefusedByUs(String),
    #[error("accepted by us, refused by libyaml: {0}")]
    AcceptedByUs(serde_yaml::Error),
}

/// Ours and the reference over one text: `Err` describes a difference.
fn compare(text: &str) -> Result<(), Difference> {
    let theirs = reference(text);
    let ours = load_str(Source::Stdin, text, Format::Yaml, &LoadOptions::default());
    match (theirs, ours.errors.is_empty()) {
        (Ok(want), true) => {
            let got = ours.documents.first().map(|d| d.value.clone());
            if got.as_ref() != Some(&want) {
                return Err(Difference::Values {
                    ours: serde_json::to_string_pretty(&got).unwrap_or_default(),
                    reference: serde_json::to_string_pretty(&want).unwrap_or_default(),
                });
            }
            Ok(())
        }
        (Ok(_), false) => Err(Difference::RefusedByUs(ours.errors[0].to_string())),
        (Err(e), true) => Err(Difference::AcceptedByUs(e)),
        (Err(_), false) => Ok(()),
    }
}

fn object_text(r: &mut Rng, data: &Node) -> String {
    let mut w = Writer {
        r,
        out: String::from("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: generated\n"),
    };
    w.out.push_str("data:");
    w.block_value(data, 0, true);
    w.out
}

#[test]
fn generated_shapes_read_as_libyaml_reads_them() {
    let mut failures = Vec::new();
    for seed in 1..=3000u64 {
        let mut r = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let data = match gen_node(&mut r, 0, false) {
            leaf @ (Node::Word(_) | Node::Int(_) | Node::Quoted(_) | Node::Resolved(..)) => {
                Node::Seq(vec![leaf])
            }
            other => other,
        };
        let mut text = object_text(&mut r, &data);
        // Windows line ends, and explicit document markers.
        match r.below(8) {
            0 => text = text.replace('\n', "\r\n"),
            1 => text = format!("---\n{text}...\n"),
            2 => text = format!("# leading comment\n--- # marker comment\n{text}"),
            _ => {}
        }
        // The generator's own value: both parsers must also read it.
        let mut want =
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "generated"}});
        want["data"] = data.json();
        // The fast path and saphyr (with its repairs) agree wherever the
        // fast path applies (what the fuzz target checks).
        if let Err(diff) = super::yaml::compare_paths(&text, &LoadOptions::default()) {
            failures.push(format!("seed {seed}:\n{diff}"));
        }
        if let Err(diff) = compare(&text) {
            failures.push(format!("seed {seed}:\n{text}\n{diff}"));
        } else if reference(&text).ok().as_ref() != Some(&want) {
            failures.push(format!(
                "seed {seed}: the generator's value is not what libyaml reads\n{text}"
            ));
        }
        if failures.len() >= 5 {
            break;
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// Shapes found in real manifests, each compared with the reference.
#[test]
fn kubernetes_shapes_read_as_libyaml_reads_them() {
    let cases = [
        // The closing bracket at the key's indentation (issue 15).
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n  - name: c\n    args: [\n      \"a\",\n      \"b\",\n    ]\n",
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n    - name: c\n      command: [\n        \"sh\", \"-c\",\n      ]\n      args: [\n\"at column 0\"\n]\n",
        // A flow mapping over several lines, closed at column 0.
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {\n  name: m,\n  labels: {a: b}\n}\ndata: {x: z}\n",
        // A double-quoted scalar continued at column 0.
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: q\ndata:\n  k: \"first\nsecond\"\n",
        // A single-quoted one under a sequence entry.
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: q\ndata:\n  k: 'one\n two'\n",
        // Nested flow collections over lines, at several columns.
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: nest\ndata:\n  nested: [[\n    a, b],\n  {c: [d,\ne]}, ]\n",
    ];
    for text in cases {
        compare(text).unwrap_or_else(|d| panic!("{text}\n{d}"));
        if let Some(theirs) = sigs_yaml(text) {
            let l = load_str(Source::Stdin, text, Format::Yaml, &LoadOptions::default());
            let want = &l.documents[0].value;
            assert!(matches!(&theirs, Ok(v) if v == want), "{text}: {theirs:?}");
        }
        let l = load_str(Source::Stdin, text, Format::Yaml, &LoadOptions::default());
        assert_eq!(l.documents.len(), 1, "{text}");
    }
}

/// Lines keep their numbers when a line is re-indented for the parser.
#[test]
fn reindented_lines_keep_their_numbers() {
    let text = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n  - name: c\n    args: [\n      \"a\",\n    ]\n    image: nginx:1.27\n";
    let l = load_str(
        Source::file("p.yaml"),
        text,
        Format::Yaml,
        &LoadOptions::default(),
    );
    assert!(l.errors.is_empty(), "{:?}", l.errors);
    let d = &l.documents[0];
    let image = [
        PathSegment::Key("spec"),
        PathSegment::Key("containers"),
        PathSegment::Index(0),
        PathSegment::Key("image"),
    ];
    assert_eq!(d.line_of(&image), Some(11));
    assert_eq!(d.value["spec"]["containers"][0]["args"], json!(["a"]));
}

/// A real syntax error in a document that also needed re-indenting is
/// still reported, at its own line.
#[test]
fn errors_after_a_reindented_line_are_still_reported() {
    let text = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  args: [\n  \"a\",\n  ]\n  bad: [unclosed\n";
    let l = load_str(
        Source::file("p.yaml"),
        text,
        Format::Yaml,
        &LoadOptions::default(),
    );
    assert!(l.documents.is_empty());
    assert_eq!(l.errors.len(), 1, "{:?}", l.errors);
    assert!(reference(text).is_err());
}

/// Tabs after block indicators, as go-yaml v2 (sigs.k8s.io/yaml 1.6, run
/// by hand) reads them: after a mapping's colon a tab separates like a
/// space (`name:\tm` is `{"name": "m"}`; saphyr alone refuses it); after a
/// sequence's dash go-yaml refuses it ("found character that cannot start
/// any token") while YAML 1.2 and this reader accept it. Accepting more
/// than kubectl costs nothing: the object is checked as written.
#[test]
fn tabs_after_block_indicators() {
    let colon =
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name:\tm\ndata:\n  a:\t\t'x'\n  b: \t1\n";
    compare(colon).expect("a tab after a colon separates");
    let l = load_str(Source::Stdin, colon, Format::Yaml, &LoadOptions::default());
    assert_eq!(l.documents[0].value["data"], json!({"a": "x", "b": 1}));
    let dash = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: m\ndata:\n  list:\n  -\tx\n";
    assert!(reference(dash).is_err());
    let l = load_str(Source::Stdin, dash, Format::Yaml, &LoadOptions::default());
    assert!(l.errors.is_empty(), "{:?}", l.errors);
    assert_eq!(l.documents[0].value["data"]["list"], json!(["x"]));
}

/// sigs.k8s.io/yaml itself, when `INTERLOCK_SIGS_YAML` names the helper
/// built from hack/sigs-yaml (it needs Go and the module cache, so it is
/// optional): `None` when it is not available.
/// Why sigs.k8s.io/yaml gave no value: its refusal, or output that is not
/// JSON.
#[derive(Debug, thiserror::Error)]
enum SigsError {
    #[error("{0}")]
    Refused(String),
    #[error("{error}: {out}")]
    Unreadable {
        error: serde_json::Error,
        out: String,
    },
}

fn sigs_yaml(text: &str) -> Option<Result<Json, SigsError>> {
    use std::io::Write;
    let bin = std::env::var_os("INTERLOCK_SIGS_YAML")?;
    let mut child = std::process::Command::new(bin)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("INTERLOCK_SIGS_YAML runs");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("write");
    let out = child.wait_with_output().expect("output");
    let out = String::from_utf8_lossy(&out.stdout).trim().to_string();
    Some(match out.strip_prefix("ERR ") {
        Some(e) => Err(SigsError::Refused(e.to_string())),
        None => serde_json::from_str(&out).map_err(|error| SigsError::Unreadable { error, out }),
    })
}

/// The generated shapes, YAML 1.1 scalars included, against
/// sigs.k8s.io/yaml (kubectl's reader) itself; skipped without
/// `INTERLOCK_SIGS_YAML`.
#[test]
fn generated_shapes_read_as_sigs_yaml_reads_them() {
    if sigs_yaml("a: 1").is_none() {
        eprintln!("INTERLOCK_SIGS_YAML is not set: sigs.k8s.io/yaml not compared");
        return;
    }
    let mut failures = Vec::new();
    for seed in 1..=1500u64 {
        let mut r = Rng(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) | 1);
        let data = match gen_node(&mut r, 0, true) {
            Node::Seq(items) => Node::Seq(items),
            Node::Map(entries) => Node::Map(entries),
            leaf => Node::Seq(vec![leaf]),
        };
        let text = object_text(&mut r, &data);
        let ours = load_str(Source::Stdin, &text, Format::Yaml, &LoadOptions::default());
        let theirs = sigs_yaml(&text).expect("available");
        let got = ours.documents.first().map(|d| d.value.clone());
        let same = match (&theirs, ours.errors.is_empty()) {
            (Ok(want), true) => got.as_ref() == Some(want),
            (Err(_), false) => true,
            _ => false,
        };
        if !same {
            failures.push(format!(
                "seed {seed}:\n{text}\nours: {:?} {:?}\nsigs.k8s.io/yaml: {theirs:?}",
                got.map(|g| g["data"].clone()),
                ours.errors.first().map(ToString::to_string)
            ));
        }
        if failures.len() >= 5 {
            break;
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
