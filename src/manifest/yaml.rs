//! YAML streams to JSON values with line positions, on `saphyr-parser`
//! events.
//!
//! A stream is first cut into documents at `---` and `...` lines (a line that
//! starts with a document marker always ends the previous document in YAML),
//! so that the documents of a large file parse in parallel and a syntax error
//! costs only the document it is in.

use std::borrow::Cow;
use std::collections::HashMap;

use rayon::prelude::*;
use saphyr_parser::{Event, Parser, ScalarStyle, Span};
use serde_json::{Map, Value};

use super::error::LoadErrorKind;
use super::fast;
use super::positions::{child_index, child_key, PositionIndex, Recorder, ROOT};
use super::scalar::{self, CoreTag, Resolved, Style};
use super::Limits;

/// One parsed document, before it is checked as a Kubernetes object.
#[derive(Debug)]
pub(crate) struct RawDoc {
    /// 1-based line where the document's content starts.
    pub line: usize,
    pub value: Value,
    pub index: PositionIndex,
    /// True when the document has no content (only comments or markers).
    pub empty: bool,
}

/// An error at a place in the stream.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RawError {
    pub line: usize,
    pub column: Option<usize>,
    pub kind: LoadErrorKind,
}

/// The result of parsing one stream.
#[derive(Debug, Default)]
pub(crate) struct Parsed {
    pub docs: Vec<RawDoc>,
    pub errors: Vec<RawError>,
}

/// Below this size a stream is parsed on the calling thread.
const PARALLEL_THRESHOLD: usize = 256 * 1024;

/// Parses a YAML stream of any number of documents.
pub(crate) fn parse_stream(text: &str, limits: &Limits) -> Parsed {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let chunks = split_documents(text);
    let one =
        |&(start, end, line): &(usize, usize, usize)| parse_piece(&text[start..end], line, limits);
    let results: Vec<Parsed> = if text.len() >= PARALLEL_THRESHOLD && chunks.len() > 1 {
        chunks.par_iter().map(one).collect()
    } else {
        chunks.iter().map(one).collect()
    };
    let mut out = Parsed::default();
    for mut r in results {
        out.docs.append(&mut r.docs);
        out.errors.append(&mut r.errors);
    }
    out
}

/// Parses one piece of [`split_documents`] that starts at `line`; a piece
/// over [`Limits::max_document_size`] is an error at that line.
pub(crate) fn parse_piece(piece: &str, line: usize, limits: &Limits) -> Parsed {
    if piece.len() as u64 > limits.max_document_size {
        return Parsed {
            docs: Vec::new(),
            errors: vec![RawError {
                line,
                column: None,
                kind: LoadErrorKind::DocumentTooLarge {
                    limit: limits.max_document_size,
                },
            }],
        };
    }
    parse_chunk_guarded(piece, line, limits)
}

/// Cuts a stream into `(start, end, first line)` pieces at document markers.
///
/// A piece starts at a `---` line unless everything before it in the current
/// piece is blank, a comment or a directive (then the marker belongs to that
/// piece), and a new piece starts after every `...` line.
pub(crate) fn split_documents(text: &str) -> Vec<(usize, usize, usize)> {
    let mut pieces = Vec::new();
    let mut splitter = Splitter::at(0);
    let bytes = text.as_bytes();
    let mut pos = 0usize;
    while pos < bytes.len() {
        let line_end = match memchr::memchr(b'\n', &bytes[pos..]) {
            Some(i) => pos + i + 1,
            None => bytes.len(),
        };
        pieces.extend(splitter.line(pos, &bytes[pos..line_end]));
        pos = line_end;
    }
    pieces.extend(splitter.finish(bytes.len(), pieces.is_empty()));
    pieces
}

/// The state of [`split_documents`] between lines, so that a stream read
/// in windows (`manifest::stream`) is cut exactly as a whole one.
#[derive(Debug, Clone)]
pub(crate) struct Splitter {
    /// Where the current piece starts, and its first line.
    pub(crate) start: usize,
    pub(crate) start_line: usize,
    has_content: bool,
    /// The number of the next line fed.
    pub(crate) line_no: usize,
}

impl Splitter {
    /// A stream whose first line starts at `start`.
    pub(crate) fn at(start: usize) -> Splitter {
        Splitter {
            start,
            start_line: 1,
            has_content: false,
            line_no: 1,
        }
    }

    /// Feeds the line that starts at `pos` (with its `\n`, if it has one);
    /// returns the piece it ends, if any.
    pub(crate) fn line(&mut self, pos: usize, line: &[u8]) -> Option<(usize, usize, usize)> {
        let line_end = pos + line.len();
        let mut piece = None;
        if is_marker(line, b"---") {
            if self.has_content {
                piece = Some((self.start, pos, self.start_line));
                self.start = pos;
                self.start_line = self.line_no;
            }
            self.has_content = true;
        } else if is_marker(line, b"...") {
            piece = Some((self.start, line_end, self.start_line));
            self.start = line_end;
            self.start_line = self.line_no + 1;
            self.has_content = false;
        } else if !self.has_content {
            let trimmed = trim_ascii_start(line);
            let blank_or_comment = trimmed.is_empty() || trimmed[0] == b'#';
            let directive = line.first() == Some(&b'%');
            if !blank_or_comment && !directive {
                self.has_content = true;
            }
        }
        self.line_no += 1;
        piece
    }

    /// Counts a line that is not fed (the rest of one too long to hold,
    /// in a document already refused): content, never a marker.
    pub(crate) fn skip_line(&mut self) {
        self.has_content = true;
        self.line_no += 1;
    }

    /// The last piece, at the end of the stream (`end`); `none_yet`: the
    /// stream had no piece, and an empty one stands for it.
    pub(crate) fn finish(&self, end: usize, none_yet: bool) -> Option<(usize, usize, usize)> {
        (self.start < end || none_yet).then_some((self.start, end, self.start_line))
    }
}

fn is_marker(line: &[u8], marker: &[u8; 3]) -> bool {
    line.len() >= 3
        && &line[..3] == marker
        && matches!(line.get(3), None | Some(b' ' | b'\t' | b'\r' | b'\n'))
}

fn trim_ascii_start(mut s: &[u8]) -> &[u8] {
    while let [first, rest @ ..] = s {
        if matches!(first, b' ' | b'\t' | b'\r' | b'\n') {
            s = rest;
        } else {
            break;
        }
    }
    s
}

/// Parses one piece, turning a panic inside the parser into an error.
fn parse_chunk_guarded(chunk: &str, first_line: usize, limits: &Limits) -> Parsed {
    #[cfg(fuzzing)]
    {
        parse_chunk(chunk, first_line, limits)
    }
    #[cfg(not(fuzzing))]
    {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            parse_chunk(chunk, first_line, limits)
        })) {
            Ok(p) => p,
            Err(_) => Parsed {
                docs: Vec::new(),
                errors: vec![RawError {
                    line: first_line,
                    column: None,
                    kind: LoadErrorKind::ParserFailure,
                }],
            },
        }
    }
}

/// Parses one piece of a stream (usually one document).
pub(crate) fn parse_chunk(chunk: &str, first_line: usize, limits: &Limits) -> Parsed {
    if let Some(p) = parse_chunk_fast(chunk, first_line, limits) {
        return p;
    }
    parse_chunk_full(chunk, first_line, limits)
}

/// Parses one piece with the fast path, or `None` if it does not apply.
fn parse_chunk_fast(chunk: &str, first_line: usize, limits: &Limits) -> Option<Parsed> {
    let mut b = Builder::new(first_line, limits);
    fast::run(chunk, |ev, span| b.event(ev, span))?;
    Some(b.out)
}

/// Parses one piece with `saphyr-parser` alone.
///
/// saphyr checks the indentation of lines inside flow collections and
/// quoted scalars (YAML 1.2); go-yaml (behind `kubectl` and
/// sigs.k8s.io/yaml), libyaml and PyYAML do not, so manifests such as
/// `args: [` ... `]` with the `]` under the key are valid for Kubernetes.
/// Inside a flow collection or a quoted scalar the leading white space of a
/// line is not content (YAML folds it away), so a line refused for its
/// indentation there is indented further and the piece parsed again; lines
/// keep their numbers. Likewise a tab between `key:` and its value, which
/// saphyr refuses and go-yaml reads as a space, becomes a space.
pub(crate) fn parse_chunk_full(chunk: &str, first_line: usize, limits: &Limits) -> Parsed {
    let (first, mut failure) = parse_once(chunk, first_line, limits);
    let Some(f) = &failure else { return first };
    let Some(mut text) = reindent(chunk, f) else {
        return first;
    };
    // Each repair fixes one line; past this many the original error stands.
    for _ in 0..MAX_REINDENTS {
        let (parsed, next) = parse_once(&text, first_line, limits);
        failure = next;
        match failure.as_ref().and_then(|f| reindent(&text, f)) {
            Some(t) => text = t,
            None => return parsed,
        }
    }
    first
}

/// Most lines [`parse_chunk_full`] re-indents in one piece.
const MAX_REINDENTS: usize = 256;

/// Where saphyr stopped, when it stopped on an indentation rule that go-yaml
/// does not have.
struct IndentFailure {
    /// 1-based line in the piece.
    line: usize,
    /// 0-based column, in characters.
    col: usize,
    /// In a quoted scalar starting at (line, col), rather than a token of a
    /// flow collection at (line, col).
    quoted: bool,
    /// A tab separates `key:` from a value that starts at (line, col):
    /// saphyr refuses it, go-yaml reads it as a space.
    tab_after_colon: bool,
}

/// The piece with the line(s) of `f` indented enough for saphyr, or `None`
/// when indenting cannot help.
fn reindent(text: &str, f: &IndentFailure) -> Option<String> {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let indent_of = |l: &str| l.chars().take_while(|c| *c == ' ').count();
    let mut lines: Vec<std::borrow::Cow<'_, str>> = lines.into_iter().map(Into::into).collect();
    let pad = |lines: &mut Vec<std::borrow::Cow<'_, str>>, i: usize, want: usize| -> bool {
        let have = indent_of(&lines[i]);
        if have >= want {
            return false;
        }
        lines[i] = format!("{}{}", " ".repeat(want - have), lines[i]).into();
        true
    };
    let at = f.line.checked_sub(1)?;
    if at >= lines.len() {
        return None;
    }
    if f.tab_after_colon {
        // The blanks before the value become spaces, one for one, so that
        // columns stay as they were.
        let line = &lines[at];
        let value = line
            .char_indices()
            .nth(f.col)
            .map_or(line.len(), |(i, _)| i);
        let (head, tail) = line.split_at(value);
        let blanks = head.len() - head.trim_end_matches([' ', '\t']).len();
        if !head[head.len() - blanks..].contains('\t') {
            return None;
        }
        let fixed = format!(
            "{}{}{tail}",
            &head[..head.len() - blanks],
            " ".repeat(blanks)
        );
        lines[at] = fixed.into();
        return Some(lines.concat());
    }
    if f.quoted {
        // Every line after the first up to the closing quote: indented past
        // the column where the scalar starts.
        let want = f.col + 1;
        let start: usize = lines[..at].iter().map(|l| l.len()).sum::<usize>()
            + lines[at].char_indices().nth(f.col)?.0;
        let end = closing_quote(&text[start..])? + start;
        let mut changed = false;
        let mut offset = lines[..=at].iter().map(|l| l.len()).sum::<usize>();
        for i in at + 1..lines.len() {
            if offset > end {
                break;
            }
            offset += lines[i].len();
            if !lines[i].trim().is_empty() {
                changed |= pad(&mut lines, i, want);
            }
        }
        return changed.then(|| lines.concat());
    }
    // A token of a flow collection that opened on an earlier line: past the
    // end of the previous line with content, it is past the indentation of
    // every block node the collection is in.
    let previous = lines[..at]
        .iter()
        .rev()
        .find(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))?;
    let want = previous.trim_end().chars().count() + 1;
    pad(&mut lines, at, want).then(|| lines.concat())
}

/// The byte offset of the quote that closes the quoted scalar `s` starts
/// with.
fn closing_quote(s: &str) -> Option<usize> {
    let mut chars = s.char_indices();
    let (_, quote) = chars.next()?;
    while let Some((i, c)) = chars.next() {
        match (quote, c) {
            ('"', '\\') => {
                chars.next();
            }
            ('\'', '\'') if s[i + 1..].starts_with('\'') => {
                chars.next();
            }
            (q, c) if q == c => return Some(i),
            _ => {}
        }
    }
    None
}

/// One saphyr pass over a piece; the second value is set when it stopped on
/// an indentation rule of YAML 1.2 that go-yaml does not apply.
fn parse_once(chunk: &str, first_line: usize, limits: &Limits) -> (Parsed, Option<IndentFailure>) {
    let mut failure = None;
    let mut parser = Parser::new_from_str(chunk);
    let mut b = Builder::new(first_line, limits);
    while let Some(next) = parser.next_event() {
        match next {
            Ok((ev, span)) => b.event(ev, span),
            Err(e) => {
                let m = e.marker();
                let info = match e.info() {
                    "recursion limit exceeded" => {
                        "flow collections ([...] or {...}) nested deeper than 255 levels"
                    }
                    other => other,
                };
                // The first two only arise inside a flow collection (outside
                // one, saphyr lowers the indentation to the token's column).
                if matches!(
                    info,
                    "invalid indentation"
                        | "invalid indentation in flow construct"
                        | "invalid indentation in quoted scalar"
                        | "':' must be followed by a valid YAML whitespace"
                ) {
                    failure = Some(IndentFailure {
                        line: m.line(),
                        col: m.col(),
                        quoted: info == "invalid indentation in quoted scalar",
                        tab_after_colon: info.starts_with("':'"),
                    });
                }
                b.out.errors.push(RawError {
                    line: first_line + m.line().saturating_sub(1),
                    column: Some(m.col() + 1),
                    kind: LoadErrorKind::Syntax(info.to_string()),
                });
                break;
            }
        }
    }
    (b.out, failure)
}

/// An error while building, with the place to report it when that is not
/// the current event.
struct BuildError {
    kind: LoadErrorKind,
    at: Option<(u32, u32)>,
}

impl From<LoadErrorKind> for BuildError {
    fn from(kind: LoadErrorKind) -> Self {
        BuildError { kind, at: None }
    }
}

/// What the next node of a mapping will be.
enum Pending {
    /// A key is expected.
    Key,
    /// The value of this key is expected.
    Value { key: String, line: u32, col: u32 },
    /// The value of a `<<` merge key is expected.
    Merge,
}

enum Container {
    Seq(Vec<Value>),
    Map {
        map: Map<String, Value>,
        pending: Pending,
        merges: Vec<Value>,
    },
}

struct Frame {
    container: Container,
    anchor: usize,
    /// Path hash of this node; `None` inside a merge value (not recorded).
    hash: Option<u64>,
    /// Line recorded for this node (or inherited from its parent).
    line: u32,
    /// Node count when this node started, to size anchored nodes.
    nodes_at_start: usize,
    /// Depth of the deepest container below this one, plus one.
    height: usize,
}

struct Anchored {
    value: Value,
    nodes: usize,
    height: usize,
}

struct Builder<'l> {
    first_line: usize,
    limits: &'l Limits,
    out: Parsed,
    stack: Vec<Frame>,
    anchors: HashMap<usize, Anchored>,
    rec: Recorder,
    /// Nodes made so far in this document, aliases counted by their size.
    nodes: usize,
    /// Nodes copied through aliases and kept for anchors in this document.
    alias_nodes: usize,
    doc_line: Option<u32>,
    root: Option<Value>,
    /// The root is an empty, untagged plain scalar.
    root_empty: bool,
    failed: bool,
}

/// Where a new node goes.
struct Slot {
    hash: Option<u64>,
    line: u32,
}

impl<'l> Builder<'l> {
    fn new(first_line: usize, limits: &'l Limits) -> Self {
        Builder {
            first_line,
            limits,
            out: Parsed::default(),
            stack: Vec::with_capacity(16),
            anchors: HashMap::new(),
            rec: Recorder {
                entries: Vec::with_capacity(64),
            },
            nodes: 0,
            alias_nodes: 0,
            doc_line: None,
            root: None,
            root_empty: false,
            failed: false,
        }
    }

    fn reset(&mut self) {
        self.stack.clear();
        self.anchors.clear();
        self.rec.entries.clear();
        self.nodes = 0;
        self.alias_nodes = 0;
        self.doc_line = None;
        self.root = None;
        self.root_empty = false;
        self.failed = false;
    }

    fn abs_line(&self, span: &Span) -> u32 {
        let l = self.first_line + span.start.line().saturating_sub(1);
        u32::try_from(l).unwrap_or(u32::MAX)
    }

    fn fail(&mut self, line: u32, col: Option<u32>, kind: LoadErrorKind) {
        if self.failed {
            return;
        }
        self.out.errors.push(RawError {
            line: line as usize,
            column: col.map(|c| c as usize),
            kind,
        });
        self.failed = true;
        self.stack.clear();
        self.anchors.clear();
    }

    fn check(&mut self, r: Result<(), BuildError>, line: u32, col: Option<u32>) {
        if let Err(e) = r {
            match e.at {
                Some((l, c)) => self.fail(l, Some(c), e.kind),
                None => self.fail(line, col, e.kind),
            }
        }
    }

    fn event(&mut self, ev: Event<'_>, span: Span) {
        match ev {
            Event::StreamStart | Event::StreamEnd | Event::Nothing => {}
            Event::DocumentStart(_) => self.reset(),
            Event::DocumentEnd => {
                if !self.failed {
                    if let Some(value) = self.root.take() {
                        let line = self.doc_line.unwrap_or(self.abs_line(&span)) as usize;
                        let entries = std::mem::take(&mut self.rec.entries);
                        self.out.docs.push(RawDoc {
                            line,
                            value,
                            index: PositionIndex::from_entries(entries),
                            empty: self.root_empty,
                        });
                    }
                }
                self.reset();
            }
            _ if self.failed => {}
            Event::Scalar(text, style, anchor, tag) => {
                let line = self.abs_line(&span);
                let col = span.start.col() as u32 + 1;
                let r = self.scalar(text, style, anchor, tag, line, col);
                self.check(r, line, Some(col));
            }
            Event::Alias(id) => {
                let line = self.abs_line(&span);
                let col = span.start.col() as u32 + 1;
                let r = self.alias(id, line, col);
                self.check(r, line, Some(col));
            }
            Event::SequenceStart(anchor, _) => {
                let line = self.abs_line(&span);
                let col = span.start.col() as u32 + 1;
                let r = self.start(Container::Seq(Vec::new()), anchor, line);
                self.check(r, line, Some(col));
            }
            Event::MappingStart(anchor, _) => {
                let line = self.abs_line(&span);
                let col = span.start.col() as u32 + 1;
                let c = Container::Map {
                    map: Map::new(),
                    pending: Pending::Key,
                    merges: Vec::new(),
                };
                let r = self.start(c, anchor, line);
                self.check(r, line, Some(col));
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let line = self.abs_line(&span);
                let r = self.end();
                self.check(r, line, None);
            }
        }
    }

    /// True when the next node is a mapping key.
    fn expecting_key(&self) -> bool {
        matches!(
            self.stack.last(),
            Some(Frame {
                container: Container::Map {
                    pending: Pending::Key,
                    ..
                },
                ..
            })
        )
    }

    /// Computes where the next value goes and records its line.
    fn slot(&mut self, node_line: u32) -> Slot {
        match self.stack.last() {
            None => {
                self.doc_line = Some(node_line);
                Slot {
                    hash: Some(ROOT),
                    line: node_line,
                }
            }
            Some(f) => {
                let parent_line = f.line;
                match &f.container {
                    Container::Seq(items) => {
                        let hash = f.hash.map(|h| child_index(h, items.len()));
                        if let Some(h) = hash {
                            self.rec.record(h, node_line, parent_line);
                        }
                        Slot {
                            hash,
                            line: node_line,
                        }
                    }
                    Container::Map { pending, .. } => match pending {
                        Pending::Value { key, line, .. } => {
                            let hash = f.hash.map(|h| child_key(h, key));
                            let line = *line;
                            if let Some(h) = hash {
                                self.rec.record(h, line, parent_line);
                            }
                            Slot { hash, line }
                        }
                        Pending::Merge | Pending::Key => Slot {
                            hash: None,
                            line: node_line,
                        },
                    },
                }
            }
        }
    }

    fn scalar(
        &mut self,
        text: Cow<'_, str>,
        style: ScalarStyle,
        anchor: usize,
        tag: Option<Cow<'_, saphyr_parser::Tag>>,
        line: u32,
        col: u32,
    ) -> Result<(), BuildError> {
        let core = tag
            .as_ref()
            .map(|t| CoreTag::from_parts(&t.handle, &t.suffix));
        let style = if style == ScalarStyle::Plain {
            Style::Plain
        } else {
            Style::Quoted
        };
        if self.expecting_key() {
            let resolved = scalar::resolve(text, style, core)
                .map_err(|e| LoadErrorKind::Scalar(e.to_string()))?;
            let pending = match resolved {
                Resolved::Merge if core.is_none() => Pending::Merge,
                r => {
                    let key = scalar::to_key(r).ok_or(LoadErrorKind::BadKey("null"))?;
                    if anchor != 0 {
                        self.anchors.insert(
                            anchor,
                            Anchored {
                                value: Value::String(key.clone()),
                                nodes: 1,
                                height: 0,
                            },
                        );
                    }
                    Pending::Value { key, line, col }
                }
            };
            self.nodes += 1;
            self.set_pending(pending);
            return Ok(());
        }
        let empty = text.is_empty() && style == Style::Plain && core.is_none() && anchor == 0;
        let resolved =
            scalar::resolve(text, style, core).map_err(|e| LoadErrorKind::Scalar(e.to_string()))?;
        let value = scalar::to_json(resolved).map_err(|e| LoadErrorKind::Scalar(e.to_string()))?;
        self.slot(line);
        if self.stack.is_empty() {
            self.root_empty = empty;
        }
        let start = self.nodes;
        self.nodes += 1;
        self.place(value, anchor, start, 0)
    }

    fn alias(&mut self, id: usize, line: u32, col: u32) -> Result<(), BuildError> {
        let Some(a) = self.anchors.get(&id) else {
            return Err(LoadErrorKind::RecursiveAlias.into());
        };
        let (nodes, height) = (a.nodes, a.height);
        self.alias_nodes = self.alias_nodes.saturating_add(nodes);
        if self.alias_nodes > self.limits.max_alias_nodes {
            return Err(LoadErrorKind::AliasLimit {
                limit: self.limits.max_alias_nodes,
            }
            .into());
        }
        if self.stack.len() + height > self.limits.max_depth {
            return Err(LoadErrorKind::TooDeep {
                limit: self.limits.max_depth,
            }
            .into());
        }
        let value = a.value.clone();
        if self.expecting_key() {
            let key = match value {
                Value::String(s) => s,
                Value::Bool(b) => b.to_string(),
                Value::Number(n) => n.to_string(),
                Value::Null => return Err(LoadErrorKind::BadKey("null").into()),
                Value::Array(_) => return Err(LoadErrorKind::BadKey("a sequence").into()),
                Value::Object(_) => return Err(LoadErrorKind::BadKey("a mapping").into()),
            };
            self.nodes += 1;
            self.set_pending(Pending::Value { key, line, col });
            return Ok(());
        }
        self.slot(line);
        let start = self.nodes;
        self.nodes = self.nodes.saturating_add(nodes);
        self.place(value, 0, start, height)
    }

    fn set_pending(&mut self, p: Pending) {
        if let Some(Frame {
            container: Container::Map { pending, .. },
            ..
        }) = self.stack.last_mut()
        {
            *pending = p;
        }
    }

    fn start(&mut self, c: Container, anchor: usize, line: u32) -> Result<(), BuildError> {
        if self.expecting_key() {
            return Err(LoadErrorKind::BadKey(match c {
                Container::Seq(_) => "a sequence",
                Container::Map { .. } => "a mapping",
            })
            .into());
        }
        if self.stack.len() >= self.limits.max_depth {
            return Err(LoadErrorKind::TooDeep {
                limit: self.limits.max_depth,
            }
            .into());
        }
        let slot = self.slot(line);
        let nodes_at_start = self.nodes;
        self.nodes += 1;
        self.stack.push(Frame {
            container: c,
            anchor,
            hash: slot.hash,
            line: slot.line,
            nodes_at_start,
            height: 1,
        });
        Ok(())
    }

    fn end(&mut self) -> Result<(), BuildError> {
        let Some(frame) = self.stack.pop() else {
            return Ok(());
        };
        let value = match frame.container {
            Container::Seq(items) => Value::Array(items),
            Container::Map {
                mut map, merges, ..
            } => {
                for m in merges {
                    merge_into(&mut map, m);
                }
                Value::Object(map)
            }
        };
        self.place(value, frame.anchor, frame.nodes_at_start, frame.height)
    }

    /// Puts a finished node into its parent (or makes it the root).
    fn place(
        &mut self,
        value: Value,
        anchor: usize,
        nodes_at_start: usize,
        height: usize,
    ) -> Result<(), BuildError> {
        if anchor != 0 {
            // Keeping a copy costs as much as expanding an alias: nested
            // anchors must not copy a large tree once per level.
            let nodes = self.nodes - nodes_at_start;
            self.alias_nodes = self.alias_nodes.saturating_add(nodes);
            if self.alias_nodes > self.limits.max_alias_nodes {
                return Err(LoadErrorKind::AliasLimit {
                    limit: self.limits.max_alias_nodes,
                }
                .into());
            }
            self.anchors.insert(
                anchor,
                Anchored {
                    value: value.clone(),
                    nodes,
                    height,
                },
            );
        }
        let Some(parent) = self.stack.last_mut() else {
            self.root = Some(value);
            return Ok(());
        };
        parent.height = parent.height.max(height + 1);
        match &mut parent.container {
            Container::Seq(items) => items.push(value),
            Container::Map {
                map,
                pending,
                merges,
            } => match std::mem::replace(pending, Pending::Key) {
                Pending::Value { key, line, col } => {
                    let parent_line = parent.line;
                    match map.entry(key) {
                        serde_json::map::Entry::Vacant(v) => {
                            v.insert(value);
                        }
                        serde_json::map::Entry::Occupied(o) => {
                            let key = o.key().clone();
                            let hash = parent.hash.map(|h| child_key(h, &key));
                            // A key on its mapping's own line is not recorded, so
                            // what is found may be this duplicate's line.
                            let first_line = hash
                                .map(|h| self.rec.line_of(h, parent_line))
                                .filter(|&l| l != line)
                                .unwrap_or(parent_line);
                            // Reported at the second key, not at its value.
                            return Err(BuildError {
                                kind: LoadErrorKind::DuplicateKey {
                                    key,
                                    first_line: first_line as usize,
                                },
                                at: Some((line, col)),
                            });
                        }
                    }
                }
                Pending::Merge => {
                    let ok = match &value {
                        Value::Object(_) => true,
                        Value::Array(items) => items.iter().all(Value::is_object),
                        _ => false,
                    };
                    if !ok {
                        return Err(LoadErrorKind::BadMerge.into());
                    }
                    merges.push(value);
                }
                Pending::Key => {}
            },
        }
        Ok(())
    }
}

/// Adds the keys of a merge source that the mapping does not have yet.
/// Explicit keys win, and earlier sources win over later ones.
fn merge_into(map: &mut Map<String, Value>, source: Value) {
    match source {
        Value::Object(m) => {
            for (k, v) in m {
                if !map.contains_key(&k) {
                    map.insert(k, v);
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                merge_into(map, item);
            }
        }
        _ => {}
    }
}

/// A piece of text the fast path and the full parser read differently.
#[derive(Debug, thiserror::Error)]
#[error("fast and full parsers differ on {chunk:?}\nfast: {fast}\nfull: {full}")]
pub(crate) struct PathsDiffer {
    chunk: String,
    fast: String,
    full: String,
}

/// Checks that the fast path and the full parser agree on `text`: same
/// documents, values, lines and errors whenever the fast path takes a piece.
/// Returns a description of the first difference.
pub(crate) fn compare_paths(text: &str, limits: &Limits) -> Result<usize, PathsDiffer> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut taken = 0;
    for (start, end, line) in split_documents(text) {
        let chunk = &text[start..end];
        let Some(fast) = parse_chunk_fast(chunk, line, limits) else {
            continue;
        };
        taken += 1;
        let full = parse_chunk_full(chunk, line, limits);
        let show = |p: &Parsed| {
            let docs: Vec<_> = p
                .docs
                .iter()
                .filter(|d| !d.empty)
                .map(|d| (d.line, d.value.clone(), d.index.entries().to_vec()))
                .collect();
            format!("{docs:?} {:?}", p.errors)
        };
        let (a, b) = (show(&fast), show(&full));
        if a != b {
            return Err(PathsDiffer {
                chunk: chunk.to_string(),
                fast: a,
                full: b,
            });
        }
    }
    Ok(taken)
}
