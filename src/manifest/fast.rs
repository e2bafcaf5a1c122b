//! A fast path for the YAML that manifests are usually written in.
//!
//! Most Kubernetes manifests use a small part of YAML: block mappings and
//! sequences indented with spaces, one-line plain and quoted scalars, literal
//! block scalars (`|`, `|-`), comments, and `[]` / `{}`. This module turns
//! such a document into the same events `saphyr-parser` would produce, about
//! an order of magnitude faster. On anything else (flow collections, anchors,
//! tags, folded or multi-line scalars, tabs, CR line ends, unusual
//! characters, errors...) it gives up and the caller parses the document
//! with `saphyr-parser`, so behaviour and error messages do not depend on
//! which path ran. The fuzz target checks that both paths agree.

use std::borrow::Cow;

use saphyr_parser::{Event, Marker, ScalarStyle, Span};

/// Deepest nesting handled here; deeper documents go to the full parser.
const MAX_DEPTH: usize = 64;

struct Line<'a> {
    /// The line without its line break and trailing spaces.
    text: &'a str,
    /// Leading spaces.
    indent: usize,
    /// Only spaces.
    blank: bool,
    /// A comment line (first non-space is `#`).
    comment: bool,
    /// Length before trailing spaces were trimmed (the number of spaces for
    /// a blank line).
    raw_len: usize,
    /// Ends with a line break.
    newline: bool,
    /// Only ASCII (columns are byte offsets).
    ascii: bool,
}

struct Fast<'a, F> {
    lines: Vec<Line<'a>>,
    pos: usize,
    sink: F,
    depth: usize,
}

/// Sends the events of `chunk` to `sink` and returns `Some` if the chunk is
/// in the simple subset; returns `None` as soon as it is not (the events
/// sent so far are then to be discarded).
pub(crate) fn run<'a, F: FnMut(Event<'a>, Span)>(chunk: &'a str, sink: F) -> Option<()> {
    if !simple_characters(chunk) {
        return None;
    }
    let mut lines = Vec::with_capacity(chunk.len() / 16 + 1);
    let mut rest = chunk;
    while !rest.is_empty() {
        let (raw, newline, next) = match rest.find('\n') {
            Some(i) => (&rest[..i], true, &rest[i + 1..]),
            None => (rest, false, ""),
        };
        let text = raw.trim_end_matches(' ');
        let indent = text.len() - text.trim_start_matches(' ').len();
        if raw.starts_with("...") {
            // A document end marker (or text that looks like one).
            return None;
        }
        let blank = text.is_empty();
        let ascii = text.is_ascii();
        if !ascii && text.len() > 4096 {
            // Columns of long non-ASCII lines cost too much to count here.
            return None;
        }
        lines.push(Line {
            text,
            indent,
            blank,
            comment: !blank && text.as_bytes()[indent] == b'#',
            raw_len: raw.len(),
            newline,
            ascii,
        });
        rest = next;
    }
    let mut f = Fast {
        lines,
        pos: 0,
        sink,
        depth: 0,
    };
    f.document()
}

/// Rejects characters whose handling is left to the full parser: control
/// characters (tabs and CR included), C1 controls, BOMs, non-characters and
/// Unicode line separators.
fn simple_characters(s: &str) -> bool {
    let mut ascii = true;
    for &b in s.as_bytes() {
        if (b < 0x20 && b != b'\n') || b == 0x7f {
            return false;
        }
        if b >= 0x80 {
            ascii = false;
        }
    }
    ascii
        || !s.chars().any(|c| {
            matches!(
                c,
                '\u{80}'
                    ..='\u{9f}' | '\u{feff}' | '\u{fffe}' | '\u{ffff}' | '\u{2028}' | '\u{2029}'
            )
        })
}

fn span(line: usize, col: usize) -> Span {
    // Lines are 1-based and columns 0-based, as in saphyr; the index is not used.
    Span::empty(Marker::new(0, line + 1, col))
}

fn is_seq_entry(s: &str) -> bool {
    s == "-" || s.starts_with("- ")
}

/// Characters that cannot start a plain scalar here.
fn is_indicator(b: u8) -> bool {
    matches!(
        b,
        b'-' | b'?'
            | b':'
            | b','
            | b'['
            | b']'
            | b'{'
            | b'}'
            | b'#'
            | b'&'
            | b'*'
            | b'!'
            | b'|'
            | b'>'
            | b'\''
            | b'"'
            | b'%'
            | b'@'
            | b'`'
            | b' '
    )
}

/// Where a one-line node ends: nothing, or a comment after a space.
fn only_comment(s: &str) -> bool {
    let t = s.trim_start_matches(' ');
    t.is_empty() || (t.starts_with('#') && t.len() < s.len())
}

impl<'a, F: FnMut(Event<'a>, Span)> Fast<'a, F> {
    fn col(&self, line: usize, byte: usize) -> usize {
        let l = &self.lines[line];
        if l.ascii {
            byte
        } else {
            l.text[..byte].chars().count()
        }
    }

    fn push(&mut self, ev: Event<'a>, line: usize, byte: usize) {
        let col = self.col(line, byte);
        (self.sink)(ev, span(line, col));
    }

    /// The next line from `pos` that is neither blank nor a comment.
    fn next_significant(&self) -> Option<usize> {
        (self.pos..self.lines.len()).find(|&i| !self.lines[i].blank && !self.lines[i].comment)
    }

    fn document(&mut self) -> Option<()> {
        let mut explicit = false;
        let mut start = self.next_significant();
        if let Some(i) = start {
            let t = self.lines[i].text;
            if let Some(after) = t.strip_prefix("---") {
                if !only_comment(after) || (!after.is_empty() && !after.starts_with(' ')) {
                    return None;
                }
                explicit = true;
                self.pos = i + 1;
                start = self.next_significant();
            }
        }
        let Some(first) = start else {
            // Only comments and markers: no document at all.
            return Some(());
        };
        let l = &self.lines[first];
        if l.indent != 0 || l.text.starts_with("---") || l.text.starts_with("...") {
            return None;
        }
        if l.text.starts_with('%') {
            return None;
        }
        (self.sink)(Event::StreamStart, span(0, 0));
        (self.sink)(Event::DocumentStart(explicit), span(first, 0));
        self.node(first, 0)?;
        if self.next_significant().is_some() {
            return None;
        }
        (self.sink)(Event::DocumentEnd, span(self.lines.len(), 0));
        (self.sink)(Event::StreamEnd, span(self.lines.len(), 0));
        Some(())
    }

    /// A block node starting at column `indent` of line `line`.
    fn node(&mut self, line: usize, indent: usize) -> Option<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return None;
        }
        let s = &self.lines[line].text[indent..];
        let r = if is_seq_entry(s) {
            self.sequence(line, indent)
        } else if self.key(line, indent).is_some() {
            self.mapping(line, indent)
        } else {
            None
        };
        self.depth -= 1;
        r
    }

    /// Parses the key at `line`, column `col`: its text, style, and the byte
    /// where the value starts (after `:` and spaces).
    fn key(&self, line: usize, col: usize) -> Option<(Cow<'a, str>, ScalarStyle, usize)> {
        let text = self.lines[line].text;
        let s = &text[col..];
        let first = *s.as_bytes().first()?;
        if first == b'"' || first == b'\'' {
            let (value, style, used) = quoted(s)?;
            let after = &s[used..];
            let trimmed = after.trim_start_matches(' ');
            let rest = trimmed.strip_prefix(':')?;
            if !(rest.is_empty() || rest.starts_with(' ')) {
                return None;
            }
            let value_start = text.len() - rest.trim_start_matches(' ').len();
            return Some((value, style, value_start));
        }
        if is_indicator(first) {
            return None;
        }
        let b = s.as_bytes();
        let mut i = 0;
        while i < b.len() {
            match b[i] {
                b':' if i + 1 == b.len() || b[i + 1] == b' ' => break,
                b'#' if b[i - 1] == b' ' => return None,
                _ => i += 1,
            }
        }
        if i == b.len() || i > 1000 {
            return None;
        }
        let key = s[..i].trim_end_matches(' ');
        if key == "<<" {
            return None;
        }
        let rest = &s[i + 1..];
        let value_start = text.len() - rest.trim_start_matches(' ').len();
        Some((Cow::Borrowed(key), ScalarStyle::Plain, value_start))
    }

    /// A block mapping whose first key is at column `indent` of `line`.
    fn mapping(&mut self, mut line: usize, indent: usize) -> Option<()> {
        self.push(Event::MappingStart(0, None), line, indent);
        loop {
            let (key, style, value_start) = self.key(line, indent)?;
            self.push(Event::Scalar(key, style, 0, None), line, indent);
            self.value(line, value_start, indent)?;
            match self.next_significant() {
                None => break,
                Some(n) => {
                    let l = &self.lines[n];
                    if l.indent < indent {
                        break;
                    }
                    if l.indent > indent || is_seq_entry(&l.text[indent..]) {
                        return None;
                    }
                    line = n;
                }
            }
        }
        let end = self.pos.min(self.lines.len());
        self.push(Event::MappingEnd, end.saturating_sub(1), 0);
        Some(())
    }

    /// A block sequence whose first `-` is at column `indent` of `line`.
    fn sequence(&mut self, mut line: usize, indent: usize) -> Option<()> {
        self.push(Event::SequenceStart(0, None), line, indent);
        loop {
            let text = self.lines[line].text;
            let after = &text[indent + 1..];
            let item = indent + 1 + (after.len() - after.trim_start_matches(' ').len());
            let rest = &text[item..];
            if rest.is_empty() || rest.starts_with('#') {
                self.pos = line + 1;
                match self.next_significant() {
                    Some(n) if self.lines[n].indent > indent => {
                        let i = self.lines[n].indent;
                        self.node(n, i)?;
                    }
                    _ => self.push(
                        Event::Scalar(Cow::Borrowed(""), ScalarStyle::Plain, 0, None),
                        line,
                        indent,
                    ),
                }
            } else if is_seq_entry(rest) || self.key(line, item).is_some() {
                self.node(line, item)?;
            } else {
                self.scalar(line, item, indent)?;
            }
            match self.next_significant() {
                Some(n)
                    if self.lines[n].indent == indent
                        && is_seq_entry(&self.lines[n].text[indent..]) =>
                {
                    line = n;
                }
                Some(n) if self.lines[n].indent > indent => return None,
                _ => break,
            }
        }
        let end = self.pos.min(self.lines.len());
        self.push(Event::SequenceEnd, end.saturating_sub(1), 0);
        Some(())
    }

    /// The value of a mapping entry: on the same line at `start`, or on the
    /// following lines.
    fn value(&mut self, line: usize, start: usize, indent: usize) -> Option<()> {
        let rest = &self.lines[line].text[start..];
        if rest.is_empty() || rest.starts_with('#') {
            self.pos = line + 1;
            match self.next_significant() {
                Some(n) if self.lines[n].indent > indent => {
                    let i = self.lines[n].indent;
                    self.node(n, i)
                }
                Some(n)
                    if self.lines[n].indent == indent
                        && is_seq_entry(&self.lines[n].text[indent..]) =>
                {
                    self.node(n, indent)
                }
                _ => {
                    self.push(
                        Event::Scalar(Cow::Borrowed(""), ScalarStyle::Plain, 0, None),
                        line,
                        start,
                    );
                    Some(())
                }
            }
        } else {
            self.scalar(line, start, indent)
        }
    }

    /// A scalar (or `[]` / `{}`) starting at `start` of `line`, inside a
    /// collection at column `indent`.
    fn scalar(&mut self, line: usize, start: usize, indent: usize) -> Option<()> {
        let rest = &self.lines[line].text[start..];
        let first = *rest.as_bytes().first()?;
        match first {
            b'|' => return self.literal(line, start, indent),
            b'"' | b'\'' => {
                let (value, style, used) = quoted(rest)?;
                if !only_comment(&rest[used..]) {
                    return None;
                }
                self.push(Event::Scalar(value, style, 0, None), line, start);
            }
            b'[' | b'{' => self.flow(line, start)?,
            b if is_indicator(b) => return None,
            _ => {
                let end = match rest.find(" #") {
                    Some(i) => i,
                    None => rest.len(),
                };
                let value = rest[..end].trim_end_matches(' ');
                if value.contains(": ") || value.ends_with(':') {
                    return None;
                }
                self.push(
                    Event::Scalar(Cow::Borrowed(value), ScalarStyle::Plain, 0, None),
                    line,
                    start,
                );
            }
        }
        self.pos = line + 1;
        // A more indented line after a one-line value is a continuation or
        // an error: the full parser decides.
        match self.next_significant() {
            Some(n) if self.lines[n].indent > indent => None,
            _ => Some(()),
        }
    }

    /// A literal block scalar (`|` or `|-`) whose indicator is at `start`,
    /// inside a collection at column `indent`.
    fn literal(&mut self, line: usize, start: usize, indent: usize) -> Option<()> {
        let header = &self.lines[line].text[start + 1..];
        let (strip, rest) = match header.strip_prefix('-') {
            Some(r) => (true, r),
            None => (false, header),
        };
        if !only_comment(rest) {
            return None;
        }
        // The content's indentation is that of its first non-blank line.
        let mut i = line + 1;
        let mut leading_spaces = 0;
        while i < self.lines.len() && self.lines[i].blank {
            leading_spaces = leading_spaces.max(self.lines[i].raw_len);
            i += 1;
        }
        if i == self.lines.len() {
            return None;
        }
        let content = self.lines[i].indent;
        if content <= indent || leading_spaces > content {
            return None;
        }
        let mut parts: Vec<&'a str> = Vec::new();
        let mut used = 0;
        let mut last_newline = true;
        let mut j = line + 1;
        while j < self.lines.len() {
            let l = &self.lines[j];
            if l.blank {
                if l.raw_len > content {
                    return None;
                }
                parts.push("");
                j += 1;
                continue;
            }
            if l.indent < content {
                if l.indent > indent {
                    return None;
                }
                break;
            }
            // Trailing spaces are content in a literal scalar but were
            // trimmed from the line: leave such text to the full parser.
            if l.raw_len != l.text.len() {
                return None;
            }
            parts.push(&l.text[content..]);
            used = parts.len();
            last_newline = l.newline;
            j += 1;
        }
        parts.truncate(used);
        let mut value = parts.join("\n");
        if !last_newline || (j == self.lines.len() && !self.lines[j - 1].newline) {
            // Text ending without a line break: left to the full parser.
            return None;
        }
        if !strip {
            value.push('\n');
        }
        // Like saphyr, place the scalar where its text starts.
        self.push(
            Event::Scalar(Cow::Owned(value), ScalarStyle::Literal, 0, None),
            i,
            content,
        );
        self.pos = j;
        Some(())
    }
}

impl<'a, F: FnMut(Event<'a>, Span)> Fast<'a, F> {
    /// A one-line flow sequence or mapping of scalars (`[a, "b"]`,
    /// `{cpu: 500m, memory: 1Gi}`) at `start` of `line`; nested or
    /// multi-line flow collections go to the full parser.
    fn flow(&mut self, line: usize, start: usize) -> Option<()> {
        let text = self.lines[line].text;
        let b = text.as_bytes();
        let map = b[start] == b'{';
        let close = if map { b'}' } else { b']' };
        self.push(
            if map {
                Event::MappingStart(0, None)
            } else {
                Event::SequenceStart(0, None)
            },
            line,
            start,
        );
        let mut i = start + 1;
        let skip = |i: &mut usize| {
            while *i < b.len() && b[*i] == b' ' {
                *i += 1;
            }
        };
        skip(&mut i);
        if i < b.len() && b[i] == close {
            i += 1;
        } else {
            loop {
                // An item (a key in a mapping).
                self.flow_scalar(line, &mut i, map)?;
                skip(&mut i);
                if map {
                    if i >= b.len() || b[i] != b':' {
                        return None;
                    }
                    i += 1;
                    if i >= b.len() || b[i] != b' ' {
                        return None;
                    }
                    skip(&mut i);
                    self.flow_scalar(line, &mut i, false)?;
                    skip(&mut i);
                }
                match b.get(i) {
                    Some(b',') => {
                        i += 1;
                        skip(&mut i);
                        if i >= b.len() || b[i] == close {
                            return None;
                        }
                    }
                    Some(&c) if c == close => {
                        i += 1;
                        break;
                    }
                    _ => return None,
                }
            }
        }
        if !only_comment(&text[i..]) {
            return None;
        }
        self.push(
            if map {
                Event::MappingEnd
            } else {
                Event::SequenceEnd
            },
            line,
            i - 1,
        );
        Some(())
    }

    /// A scalar inside a one-line flow collection, at byte `*i`.
    fn flow_scalar(&mut self, line: usize, i: &mut usize, key: bool) -> Option<()> {
        let text = self.lines[line].text;
        let s = &text[*i..];
        let first = *s.as_bytes().first()?;
        if first == b'"' || first == b'\'' {
            let (value, style, used) = quoted(s)?;
            self.push(Event::Scalar(value, style, 0, None), line, *i);
            *i += used;
            return Some(());
        }
        if is_indicator(first) {
            return None;
        }
        let b = s.as_bytes();
        let mut n = 0;
        while n < b.len() {
            match b[n] {
                b',' | b']' | b'}' | b'[' | b'{' => break,
                b':' if n + 1 == b.len() || matches!(b[n + 1], b' ' | b',' | b']' | b'}') => {
                    if key {
                        break;
                    }
                    return None;
                }
                b'#' if b[n - 1] == b' ' => return None,
                _ => n += 1,
            }
        }
        if matches!(b.get(n), Some(b'[' | b'{')) {
            return None;
        }
        let value = s[..n].trim_end_matches(' ');
        if value.is_empty() || (key && value == "<<") {
            return None;
        }
        // Inside flow collections the full parser has its own rules for
        // indicators after spaces (`[a -]` is an error there): leave those.
        if value
            .as_bytes()
            .windows(2)
            .any(|w| w[0] == b' ' && is_indicator(w[1]) && w[1] != b' ')
        {
            return None;
        }
        self.push(
            Event::Scalar(Cow::Borrowed(value), ScalarStyle::Plain, 0, None),
            line,
            *i,
        );
        *i += value.len();
        Some(())
    }
}

/// A one-line quoted scalar at the start of `s`: its value, style and the
/// bytes it used.
fn quoted(s: &str) -> Option<(Cow<'_, str>, ScalarStyle, usize)> {
    let b = s.as_bytes();
    if b.first() == Some(&b'\'') {
        let mut out: Option<String> = None;
        let mut i = 1;
        let mut seg = 1;
        while i < b.len() {
            if b[i] == b'\'' {
                if b.get(i + 1) == Some(&b'\'') {
                    let o = out.get_or_insert_with(String::new);
                    o.push_str(&s[seg..=i]);
                    i += 2;
                    seg = i;
                    continue;
                }
                let value = match out {
                    Some(mut o) => {
                        o.push_str(&s[seg..i]);
                        Cow::Owned(o)
                    }
                    None => Cow::Borrowed(&s[1..i]),
                };
                return Some((value, ScalarStyle::SingleQuoted, i + 1));
            }
            i += 1;
        }
        return None;
    }
    // Double quoted.
    let mut out: Option<String> = None;
    let mut i = 1;
    let mut seg = 1;
    while i < b.len() {
        match b[i] {
            b'"' => {
                let value = match out {
                    Some(mut o) => {
                        o.push_str(&s[seg..i]);
                        Cow::Owned(o)
                    }
                    None => Cow::Borrowed(&s[1..i]),
                };
                return Some((value, ScalarStyle::DoubleQuoted, i + 1));
            }
            b'\\' => {
                let o = out.get_or_insert_with(String::new);
                o.push_str(&s[seg..i]);
                let e = *b.get(i + 1)?;
                let mut used = 2;
                match e {
                    b'\\' => o.push('\\'),
                    b'"' => o.push('"'),
                    b'/' => o.push('/'),
                    b'n' => o.push('\n'),
                    b't' => o.push('\t'),
                    b'r' => o.push('\r'),
                    b'0' => o.push('\0'),
                    b'b' => o.push('\u{8}'),
                    b'f' => o.push('\u{c}'),
                    b'x' | b'u' | b'U' => {
                        let n = match e {
                            b'x' => 2,
                            b'u' => 4,
                            _ => 8,
                        };
                        let hex = s.get(i + 2..i + 2 + n)?;
                        if !hex.bytes().all(|c| c.is_ascii_hexdigit()) {
                            return None;
                        }
                        let code = u32::from_str_radix(hex, 16).ok()?;
                        o.push(char::from_u32(code)?);
                        used += n;
                    }
                    _ => return None,
                }
                i += used;
                seg = i;
            }
            _ => i += 1,
        }
    }
    None
}
