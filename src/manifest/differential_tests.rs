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

#[path = "../../tests/support/rng.rs"]
mod rng;
use rng::Rng;

/// A value the generator writes: only what both resolvers read alike.
#[derive(Debug, Clone)]
enum Node {
    Word(String),
    Int(i64),
    /// A string always written quoted (it could read as something else).
    Quoted(String),
    Seq(Vec<Node>),
    Map(Vec<(String, Node)>),
}

impl Node {
    fn json(&self) -> Json {
        match self {
            Node::Word(s) | Node::Quoted(s) => json!(s),
            Node::Int(i) => json!(i),
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

fn gen_node(r: &mut Rng, depth: usize) -> Node {
    let leaf = depth >= 3 || r.below(3) == 0;
    if leaf {
        return match r.below(4) {
            0 => Node::Int(r.below(2000) as i64 - 500),
            1 => Node::Quoted(QUOTED[r.below(QUOTED.len())].to_string()),
            _ => Node::Word(WORDS[r.below(WORDS.len())].to_string()),
        };
    }
    let n = r.below(4);
    if r.below(2) == 0 {
        Node::Seq((0..n).map(|_| gen_node(r, depth + 1)).collect())
    } else {
        let mut entries: Vec<(String, Node)> = Vec::new();
        for i in 0..n {
            entries.push((format!("k{i}{}", WORDS[r.below(3)]), gen_node(r, depth + 1)));
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
                self.out.push(' ');
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
            if self.r.below(8) == 0 {
                self.spaces(ind);
                self.out.push_str("# a comment line\n");
            }
            self.spaces(ind);
            self.out.push_str(k);
            self.out.push(':');
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

fn reference(text: &str) -> Result<Json, String> {
    let v: serde_yaml::Value = serde_yaml::from_str(text).map_err(|e| e.to_string())?;
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

/// Ours and the reference over one text: `Err` describes a difference.
fn compare(text: &str) -> Result<(), String> {
    let theirs = reference(text);
    let ours = load_str(Source::Stdin, text, Format::Yaml, &LoadOptions::default());
    match (theirs, ours.errors.is_empty()) {
        (Ok(want), true) => {
            let got = ours.documents.first().map(|d| d.value.clone());
            if got.as_ref() != Some(&want) {
                return Err(format!(
                    "different values\n--- ours\n{}\n--- reference\n{}",
                    serde_json::to_string_pretty(&got).unwrap_or_default(),
                    serde_json::to_string_pretty(&want).unwrap_or_default()
                ));
            }
            Ok(())
        }
        (Ok(_), false) => Err(format!(
            "refused by us, accepted by libyaml: {}",
            ours.errors[0]
        )),
        (Err(e), true) => Err(format!("accepted by us, refused by libyaml: {e}")),
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
        let data = match gen_node(&mut r, 0) {
            leaf @ (Node::Word(_) | Node::Int(_) | Node::Quoted(_)) => Node::Seq(vec![leaf]),
            other => other,
        };
        let text = object_text(&mut r, &data);
        // The generator's own value: both parsers must also read it.
        let mut want =
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "generated"}});
        want["data"] = data.json();
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
