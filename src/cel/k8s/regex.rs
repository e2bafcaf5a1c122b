//! RE2 (Go `regexp`) patterns on the `regex` crate, and the Kubernetes CEL
//! regex library (k8s.io/apiserver/pkg/cel/library/regex.go: `find`,
//! `findAll`).
//!
//! [`compile`] parses the pattern with Go 1.26's `regexp/syntax` rules and
//! messages, then emits an equivalent pattern for the `regex` crate, so that
//! the two agree on what is accepted and on what matches:
//!
//! - `\d`, `\s`, `\w`, `\b` are ASCII in Go (Unicode in `regex`);
//! - `\Q...\E`, octal escapes (`\0`, `\12`), `\<` as a literal, `[[]` with a
//!   literal `[`, `{` that is not a repeat (`a{,5}`, `a{01}`) are Go syntax;
//! - `regex` extensions Go rejects are rejected (`\<` word boundaries,
//!   `\u`, `(?x)`, `(?R)`, class set operations are read as literals),
//!   as are Go's own limits (repeat counts over 1000, also when nested).

use regex::{Regex, RegexBuilder};

include!("regex_unicode_names.rs");

/// Go's limit on `{n,m}` counts and on their nested product.
const MAX_REPEAT: u64 = 1000;
/// Go's limit on the height of the parse tree.
const MAX_HEIGHT: usize = 1000;

/// A pattern Go's `regexp.Compile` rejects; `Display` is Go's message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegexError {
    #[error("error parsing regexp: {code}: `{expr}`")]
    Syntax { code: &'static str, expr: String },
    /// Accepted by Go but beyond the `regex` crate's size limits.
    #[error("error parsing regexp: expression too large: `{0}`")]
    TooLarge(String),
}

impl RegexError {
    /// The error `find`/`findAll` report: `Illegal regex: <Go error>`.
    pub fn illegal_regex(&self) -> String {
        format!("Illegal regex: {self}")
    }
}

/// Compile an RE2 pattern with Go's syntax and semantics.
pub fn compile(pattern: &str) -> Result<Regex, RegexError> {
    let translated = translate(pattern)?;
    RegexBuilder::new(&translated)
        .size_limit(64 << 20)
        .nest_limit(8 * MAX_HEIGHT as u32)
        .build()
        .map_err(|_| RegexError::TooLarge(pattern.to_string()))
}

/// `s.find(re)`: the leftmost match, or "" when there is none.
pub fn find<'h>(re: &Regex, haystack: &'h str) -> &'h str {
    re.find(haystack).map_or("", |m| m.as_str())
}

/// `s.findAll(re)` / `s.findAll(re, n)`: successive non-overlapping
/// matches (an empty match right after a match is skipped, as in Go),
/// at most `n` of them when `n >= 0`.
pub fn find_all<'h>(re: &Regex, haystack: &'h str, n: i64) -> Vec<&'h str> {
    let limit = usize::try_from(n).unwrap_or(usize::MAX);
    re.find_iter(haystack)
        .take(limit)
        .map(|m| m.as_str())
        .collect()
}

fn err(code: &'static str, expr: &str) -> RegexError {
    RegexError::Syntax {
        code,
        expr: expr.to_string(),
    }
}

const INVALID_ESCAPE: &str = "invalid escape sequence";
const INVALID_RANGE: &str = "invalid character class range";
const MISSING_ARG: &str = "missing argument to repetition operator";
const BAD_REPEAT_SIZE: &str = "invalid repeat count";

/// One element of the current alternative.
#[derive(Debug)]
struct Item {
    text: String,
    /// Largest product of counted repeats on a path below (Go's
    /// `repeatIsValid`), 1 for plain atoms.
    product: u64,
    height: usize,
    /// Flag groups like `(?i)` are not operands of a following repeat.
    atom: bool,
}

#[derive(Debug, Default)]
struct Frame {
    open: String,
    alts: Vec<String>,
    items: Vec<Item>,
    product: u64,
    height: usize,
}

impl Frame {
    fn finish_alternative(&mut self) {
        let items = std::mem::take(&mut self.items);
        for it in &items {
            self.product = self.product.max(it.product);
            self.height = self.height.max(it.height + usize::from(items.len() > 1));
        }
        self.alts.push(items.into_iter().map(|i| i.text).collect());
    }

    /// The group as one atom: `open alt|alt )`.
    fn close(mut self) -> (String, u64, usize) {
        self.finish_alternative();
        let height = self.height + usize::from(self.alts.len() > 1) + 1;
        let text = format!("{}{})", self.open, self.alts.join("|"));
        (text, self.product.max(1), height)
    }
}

struct Translator<'a> {
    src: &'a str,
    pos: usize,
    frames: Vec<Frame>,
    /// Start of the previous token when it was a repeat operator.
    last_repeat: Option<usize>,
}

/// Go-syntax pattern to `regex`-crate pattern.
fn translate(src: &str) -> Result<String, RegexError> {
    let mut t = Translator {
        src,
        pos: 0,
        frames: vec![Frame::default()],
        last_repeat: None,
    };
    while t.pos < src.len() {
        let start = t.pos;
        let was_repeat = t.step()?;
        t.last_repeat = was_repeat.then_some(start);
    }
    if t.frames.len() != 1 {
        return Err(err("missing closing )", src));
    }
    let (text, _, height) = t.frames.pop().unwrap_or_default().close();
    if height > MAX_HEIGHT {
        return Err(err("expression nests too deeply", src));
    }
    // Drop the wrapping ")" that `close` added for the top frame.
    Ok(text[..text.len() - 1].to_string())
}

impl Translator<'_> {
    fn rest(&self) -> &str {
        &self.src[self.pos..]
    }

    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    fn frame(&mut self) -> &mut Frame {
        let last = self.frames.len() - 1;
        &mut self.frames[last]
    }

    fn push_atom(&mut self, text: String) {
        self.push_item(text, 1, 1);
    }

    fn push_item(&mut self, text: String, product: u64, height: usize) {
        self.frame().items.push(Item {
            text,
            product,
            height,
            atom: true,
        });
    }

    /// Translate one token; true if it was a repeat operator.
    fn step(&mut self) -> Result<bool, RegexError> {
        let Some(c) = self.peek() else {
            return Ok(false);
        };
        match c {
            '(' if self.rest().starts_with("(?") => self.perl_flags()?,
            '(' => {
                self.pos += 1;
                self.open_group("(".to_string());
            }
            '|' => {
                self.pos += 1;
                self.frame().finish_alternative();
            }
            ')' => self.close_group()?,
            '^' | '$' => {
                self.pos += 1;
                self.push_atom(format!("(?:{c})"));
            }
            '.' => {
                self.pos += 1;
                self.push_atom(".".to_string());
            }
            '[' => self.class()?,
            '*' | '+' | '?' => {
                let start = self.pos;
                self.pos += 1;
                self.repeat(start, c.to_string(), None)?;
                return Ok(true);
            }
            '{' => return self.brace(),
            '\\' => self.escape_top()?,
            _ => {
                self.pos += c.len_utf8();
                self.push_atom(regex::escape(c.encode_utf8(&mut [0; 4])));
            }
        }
        Ok(false)
    }

    fn open_group(&mut self, open: String) {
        self.frames.push(Frame {
            open,
            ..Frame::default()
        });
    }

    fn close_group(&mut self) -> Result<(), RegexError> {
        self.pos += 1;
        if self.frames.len() < 2 {
            return Err(err("unexpected )", self.src));
        }
        let frame = self.frames.pop().unwrap_or_default();
        let (text, product, height) = frame.close();
        if height > MAX_HEIGHT {
            return Err(err("expression nests too deeply", self.src));
        }
        self.push_item(text, product, height);
        Ok(())
    }

    /// `{n}`, `{n,}`, `{n,m}`; anything else is a literal `{`.
    fn brace(&mut self) -> Result<bool, RegexError> {
        let start = self.pos;
        let Some((min, max, len)) = parse_repeat(self.rest()) else {
            self.pos += 1;
            self.push_atom("\\{".to_string());
            return Ok(false);
        };
        let text = &self.src[start..start + len];
        if !(0..=1000).contains(&min) || max > 1000 || (max >= 0 && min > max) {
            return Err(err(BAD_REPEAT_SIZE, text));
        }
        let op = text.to_string();
        self.pos += len;
        self.repeat(start, op, Some((min, max)))?;
        Ok(true)
    }

    /// Apply a repeat operator (already consumed) to the last atom.
    fn repeat(
        &mut self,
        start: usize,
        mut op: String,
        counted: Option<(i64, i64)>,
    ) -> Result<(), RegexError> {
        if self.peek() == Some('?') {
            self.pos += 1;
            op.push('?');
        }
        let op_text = &self.src[start..self.pos];
        if let Some(prev) = self.last_repeat {
            let expr = self.src[prev..self.pos].to_string();
            return Err(err("invalid nested repetition operator", &expr));
        }
        let op_text = op_text.to_string();
        let frame = self.frame();
        let Some(item) = frame.items.iter_mut().rev().find(|i| i.atom) else {
            return Err(err(MISSING_ARG, &op_text));
        };
        if let Some((min, max)) = counted {
            let m = if max < 0 { min } else { max } as u64;
            item.product = if m == 0 {
                1
            } else {
                m.saturating_mul(item.product)
            };
            if (min >= 2 || max >= 2) && item.product > MAX_REPEAT {
                return Err(err(BAD_REPEAT_SIZE, &op_text));
            }
        }
        item.text = format!("(?:{}){}", item.text, op);
        item.height += 1;
        Ok(())
    }

    /// `(?flags)`, `(?flags:`, `(?P<name>`, `(?<name>`.
    fn perl_flags(&mut self) -> Result<(), RegexError> {
        let s = self.rest();
        let b = s.as_bytes();
        let named_p = b.len() > 4 && b[2] == b'P' && b[3] == b'<';
        let named = b.len() > 3 && b[2] == b'<';
        if named_p || named {
            return self.named_group(if named_p { 4 } else { 3 });
        }
        let mut pos_flags = String::new();
        let mut neg_flags = String::new();
        let mut negated = false;
        let mut saw_flag = false;
        for (i, c) in s[2..].char_indices() {
            let consumed = 2 + i + c.len_utf8();
            match c {
                'i' | 'm' | 's' | 'U' => {
                    let set = if negated {
                        &mut neg_flags
                    } else {
                        &mut pos_flags
                    };
                    if !set.contains(c) {
                        set.push(c);
                    }
                    saw_flag = true;
                }
                '-' if !negated => {
                    negated = true;
                    saw_flag = false;
                }
                ':' | ')' if !negated || saw_flag => {
                    let flags = normalize_flags(&pos_flags, &neg_flags);
                    self.pos += consumed;
                    if c == ':' {
                        self.open_group(format!("(?{flags}:"));
                    } else if !flags.is_empty() {
                        self.frame().items.push(Item {
                            text: format!("(?{flags})"),
                            product: 1,
                            height: 0,
                            atom: false,
                        });
                    }
                    return Ok(());
                }
                _ => return Err(err("invalid or unsupported Perl syntax", &s[..consumed])),
            }
        }
        Err(err("invalid or unsupported Perl syntax", s))
    }

    fn named_group(&mut self, name_start: usize) -> Result<(), RegexError> {
        let s = self.rest();
        let Some(end) = s.find('>') else {
            return Err(err("invalid named capture", s));
        };
        let name = s.get(name_start..end).unwrap_or("");
        let valid =
            !name.is_empty() && name.bytes().all(|c| c == b'_' || c.is_ascii_alphanumeric());
        if !valid {
            return Err(err("invalid named capture", &s[..=end]));
        }
        // Names play no part in matching; Go also allows duplicates.
        self.pos += end + 1;
        self.open_group("(".to_string());
        Ok(())
    }

    /// A backslash outside a class.
    fn escape_top(&mut self) -> Result<(), RegexError> {
        let s = self.rest();
        let next = s[1..].chars().next();
        let special = match next {
            Some('A') => Some("(?:\\A)"),
            Some('z') => Some("(?:\\z)"),
            Some('b') => Some("(?-u:\\b)"),
            Some('B') => Some("(?-u:\\B)"),
            Some('C') => return Err(err(INVALID_ESCAPE, "\\C")),
            Some('Q') => {
                self.quoted();
                return Ok(());
            }
            _ => None,
        };
        if let Some(text) = special {
            self.pos += 2;
            self.push_atom(text.to_string());
            return Ok(());
        }
        if let Some((class, len)) = unicode_class(s)? {
            self.pos += len;
            self.push_atom(class);
            return Ok(());
        }
        if let Some(class) = perl_class(s) {
            self.pos += 2;
            self.push_atom(format!("[{class}]"));
            return Ok(());
        }
        let (c, len) = parse_escape(s)?;
        self.pos += len;
        self.push_atom(match char::from_u32(c) {
            Some(c) => regex::escape(c.encode_utf8(&mut [0; 4])),
            // A surrogate (valid in Go's syntax) never matches a string.
            None => NOTHING.to_string(),
        });
        Ok(())
    }

    /// `\Q...\E` (or to the end): every character literal.
    fn quoted(&mut self) {
        let body = &self.rest()[2..];
        let (lit, consumed) = match body.find("\\E") {
            Some(i) => (&body[..i], i + 4),
            None => (body, body.len() + 2),
        };
        let atoms: Vec<String> = lit
            .chars()
            .map(|c| regex::escape(c.encode_utf8(&mut [0; 4])))
            .collect();
        self.pos += consumed;
        for a in atoms {
            self.push_atom(a);
        }
    }

    /// A bracketed class.
    fn class(&mut self) -> Result<(), RegexError> {
        let whole = self.rest();
        let missing = || err("missing closing ]", whole);
        let mut i = 1;
        let mut out = String::from("[");
        if whole[i..].starts_with('^') {
            out.push('^');
            i += 1;
        }
        let mut first = true;
        loop {
            let t = &whole[i..];
            if t.starts_with(']') && !first {
                i += 1;
                break;
            }
            first = false;
            if t.is_empty() {
                return Err(missing());
            }
            let (text, len) = class_item(t, whole)?;
            out.push_str(&text);
            i += len;
        }
        out.push(']');
        self.pos += i;
        self.push_atom(out);
        Ok(())
    }
}

/// Go's `(?flags)` effect as a `regex` flag string: flags after '-' win.
fn normalize_flags(pos: &str, neg: &str) -> String {
    let on: String = pos.chars().filter(|c| !neg.contains(*c)).collect();
    if neg.is_empty() {
        on
    } else {
        format!("{on}-{neg}")
    }
}

/// Go's `parseRepeat`: (min, max or -1, length) of `{n}`, `{n,}`, `{n,m}`.
fn parse_repeat(s: &str) -> Option<(i64, i64, usize)> {
    let b = s.as_bytes();
    let mut i = 1;
    let (min, len) = parse_int(&b[i..])?;
    i += len;
    let max = match b.get(i) {
        Some(b',') => {
            i += 1;
            match b.get(i) {
                Some(b'}') => -1,
                _ => {
                    let (max, len) = parse_int(&b[i..])?;
                    i += len;
                    max
                }
            }
        }
        _ => min,
    };
    if b.get(i) != Some(&b'}') {
        return None;
    }
    let min = if max < -1 { -1 } else { min };
    Some((min, max, i + 1))
}

/// Go's `parseInt`: decimal without leading zeros; -1 once it passes 1e8.
fn parse_int(b: &[u8]) -> Option<(i64, usize)> {
    let len = b.iter().take_while(|c| c.is_ascii_digit()).count();
    if len == 0 || (len >= 2 && b[0] == b'0') {
        return None;
    }
    let mut n: i64 = 0;
    for &c in &b[..len] {
        if n >= 100_000_000 {
            return Some((-2, len));
        }
        n = n * 10 + i64::from(c - b'0');
    }
    Some((n, len))
}

/// One class element: text for the `regex` class and bytes consumed.
fn class_item(t: &str, whole: &str) -> Result<(String, usize), RegexError> {
    if t.len() > 2 && t.starts_with("[:") {
        if let Some(end) = t[2..].find(":]") {
            let name = &t[..end + 4];
            if !POSIX_CLASSES.contains(&name) {
                return Err(err(INVALID_RANGE, name));
            }
            return Ok((name.to_string(), name.len()));
        }
    }
    if let Some((class, len)) = unicode_class(t)? {
        return Ok((class, len));
    }
    if let Some(class) = perl_class(t) {
        return Ok((class_in_class(class), 2));
    }
    let (lo, lo_len) = class_char(t, whole)?;
    let rest = &t[lo_len..];
    if rest.len() >= 2 && rest.starts_with('-') && !rest[1..].starts_with(']') {
        let (hi, hi_len) = class_char(&rest[1..], whole)?;
        let len = lo_len + 1 + hi_len;
        if hi < lo {
            return Err(err(INVALID_RANGE, &t[..len]));
        }
        return Ok((class_range(lo, hi), len));
    }
    Ok((class_range(lo, lo), lo_len))
}

/// A Perl class as a class element (negated ones nest).
fn class_in_class(class: &str) -> String {
    if class.starts_with('^') {
        format!("[{class}]")
    } else {
        class.to_string()
    }
}

/// A class that matches nothing.
const NOTHING: &str = "[^\\x{0}-\\x{10FFFF}]";

/// `lo-hi` as class contents; surrogates (which no string holds) are cut
/// out, as the `regex` crate rejects them.
fn class_range(lo: u32, hi: u32) -> String {
    const SURROGATES: std::ops::RangeInclusive<u32> = 0xD800..=0xDFFF;
    let lo = if SURROGATES.contains(&lo) { 0xE000 } else { lo };
    let hi = if SURROGATES.contains(&hi) { 0xD7FF } else { hi };
    match (lo, hi) {
        (lo, hi) if lo > hi => NOTHING.to_string(),
        (lo, hi) if lo == hi => format!("\\x{{{lo:X}}}"),
        (lo, hi) => format!("\\x{{{lo:X}}}-\\x{{{hi:X}}}"),
    }
}

fn class_char(t: &str, whole: &str) -> Result<(u32, usize), RegexError> {
    match t.chars().next() {
        None => Err(err("missing closing ]", whole)),
        Some('\\') => parse_escape(t),
        Some(c) => Ok((u32::from(c), c.len_utf8())),
    }
}

const POSIX_CLASSES: [&str; 28] = [
    "[:alnum:]",
    "[:^alnum:]",
    "[:alpha:]",
    "[:^alpha:]",
    "[:ascii:]",
    "[:^ascii:]",
    "[:blank:]",
    "[:^blank:]",
    "[:cntrl:]",
    "[:^cntrl:]",
    "[:digit:]",
    "[:^digit:]",
    "[:graph:]",
    "[:^graph:]",
    "[:lower:]",
    "[:^lower:]",
    "[:print:]",
    "[:^print:]",
    "[:punct:]",
    "[:^punct:]",
    "[:space:]",
    "[:^space:]",
    "[:upper:]",
    "[:^upper:]",
    "[:word:]",
    "[:^word:]",
    "[:xdigit:]",
    "[:^xdigit:]",
];

/// `\d \D \s \S \w \W` as ASCII class contents (negated ones start with ^).
fn perl_class(s: &str) -> Option<&'static str> {
    Some(match s.get(..2)? {
        "\\d" => "0-9",
        "\\D" => "^0-9",
        "\\s" => "\\t\\n\\x0C\\r\\x20",
        "\\S" => "^\\t\\n\\x0C\\r\\x20",
        "\\w" => "0-9A-Za-z_",
        "\\W" => "^0-9A-Za-z_",
        _ => return None,
    })
}

/// `\pX`, `\p{Name}`, `\PX`, `\p{^Name}`: Go's names only.
fn unicode_class(s: &str) -> Result<Option<(String, usize)>, RegexError> {
    let negated = match s.get(..2) {
        Some("\\p") => false,
        Some("\\P") => true,
        _ => return Ok(None),
    };
    let t = &s[2..];
    let (seq_len, name) = match t.chars().next() {
        Some('{') => {
            let Some(end) = s.find('}') else {
                return Err(err(INVALID_RANGE, s));
            };
            (end + 1, &s[3..end])
        }
        Some(c) => (2 + c.len_utf8(), &t[..c.len_utf8()]),
        None => (2, ""),
    };
    let (negated, name) = match name.strip_prefix('^') {
        Some(n) => (!negated, n),
        None => (negated, name),
    };
    let canonical = go_canonical_name(name);
    let Some(known) = GO_UNICODE_NAMES
        .iter()
        .find(|k| go_canonical_name(k) == canonical)
    else {
        return Err(err(INVALID_RANGE, &s[..seq_len]));
    };
    let p = if negated { 'P' } else { 'p' };
    Ok(Some((format!("\\{p}{{{known}}}"), seq_len)))
}

/// Go's `canonicalName`: drop '_', '-', ' '; upper-case the first letter
/// and lower-case the others.
fn go_canonical_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars().filter(|c| !matches!(c, '_' | '-' | ' ')) {
        if out.is_empty() {
            out.push(c.to_ascii_uppercase());
        } else {
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}

/// Go's `parseEscape` at a backslash: the literal and the bytes consumed.
fn parse_escape(s: &str) -> Result<(u32, usize), RegexError> {
    let t = &s[1..];
    let Some(c) = t.chars().next() else {
        return Err(err("trailing backslash at end of expression", ""));
    };
    let after = 1 + c.len_utf8();
    let bad = |len: usize| Err(err(INVALID_ESCAPE, &s[..len]));
    match c {
        '1'..='7' if !t[1..].starts_with(|d: char| ('0'..='7').contains(&d)) => bad(after),
        '0'..='7' => Ok(octal(s)),
        'x' => parse_hex_escape(s),
        'a' => Ok((0x07, after)),
        'f' => Ok((0x0c, after)),
        'n' => Ok((0x0a, after)),
        'r' => Ok((0x0d, after)),
        't' => Ok((0x09, after)),
        'v' => Ok((0x0b, after)),
        c if c.is_ascii() && !c.is_ascii_alphanumeric() => Ok((u32::from(c), after)),
        _ => bad(after),
    }
}

/// Up to three octal digits after the backslash.
fn octal(s: &str) -> (u32, usize) {
    let digits = s[1..]
        .bytes()
        .take(3)
        .take_while(|d| (b'0'..=b'7').contains(d));
    let (mut value, mut len) = (0u32, 1);
    for d in digits {
        value = value * 8 + u32::from(d - b'0');
        len += 1;
    }
    (value, len)
}

/// `\xHH` or `\x{H...}`.
fn parse_hex_escape(s: &str) -> Result<(u32, usize), RegexError> {
    let rest = &s[2..];
    let bad = |consumed: usize| Err(err(INVALID_ESCAPE, &s[..consumed]));
    let mut chars = rest.char_indices();
    let Some((_, first)) = chars.next() else {
        return bad(2);
    };
    if first != '{' {
        let (second_end, second) = match chars.next() {
            Some((i, c)) => (2 + i + c.len_utf8(), Some(c)),
            None => (s.len(), None),
        };
        let hi = first.to_digit(16);
        let lo = second.and_then(|c| c.to_digit(16));
        return match (hi, lo) {
            (Some(h), Some(l)) => Ok((h * 16 + l, second_end)),
            _ => bad(second_end),
        };
    }
    let mut value = 0u32;
    for (digits, (i, c)) in chars.enumerate() {
        let consumed = 2 + i + c.len_utf8();
        if c == '}' {
            return if digits > 0 {
                Ok((value, consumed))
            } else {
                bad(consumed)
            };
        }
        let Some(d) = c.to_digit(16) else {
            return bad(consumed);
        };
        value = value * 16 + d;
        if value > 0x10FFFF {
            return bad(consumed);
        }
    }
    bad(s.len())
}

#[cfg(test)]
#[path = "regex_tests.rs"]
mod tests;
