//! Tokens of the CEL grammar, with byte positions.

use super::ast::Pos;
use super::error::CompileError;
use std::sync::Arc;

#[derive(Debug, Clone, PartialEq)]
pub enum Tok {
    Int(i64),
    /// A decimal or hex integer too large for i64 (only valid after unary minus).
    BigInt(u64),
    Uint(u64),
    Double(f64),
    Str(Arc<str>),
    Bytes(Arc<[u8]>),
    Ident(Arc<str>),
    /// A back-quoted field name: `a.`b-c``.
    QuotedIdent(Arc<str>),
    True,
    False,
    Null,
    In,
    Punct(&'static str),
    Eof,
}

#[derive(Debug, Clone)]
pub struct Token {
    pub tok: Tok,
    pub pos: Pos,
}

const RESERVED: &[&str] = &[
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

const PUNCT: &[&str] = &[
    "==", "!=", "<=", ">=", "&&", "||", ".?", "[?", "<", ">", "!", "+", "-", "*", "/", "%", "?",
    ":", ".", ",", "(", ")", "[", "]", "{", "}",
];

pub fn is_reserved(name: &str) -> bool {
    RESERVED.contains(&name)
}

pub struct Lexer<'s> {
    src: &'s str,
    bytes: &'s [u8],
    at: usize,
}

type LexResult<T> = Result<T, CompileError>;

impl<'s> Lexer<'s> {
    pub fn new(src: &'s str) -> Self {
        Lexer {
            src,
            bytes: src.as_bytes(),
            at: 0,
        }
    }

    pub fn tokenize(mut self) -> LexResult<Vec<Token>> {
        let mut out = Vec::new();
        loop {
            let t = self.next_token()?;
            let eof = t.tok == Tok::Eof;
            out.push(t);
            if eof {
                return Ok(out);
            }
        }
    }

    fn err(&self, pos: usize, msg: impl Into<String>) -> CompileError {
        CompileError::new(self.src, pos as Pos, msg)
    }

    fn peek(&self, off: usize) -> u8 {
        self.bytes.get(self.at + off).copied().unwrap_or(0)
    }

    fn skip_space(&mut self) {
        loop {
            match self.peek(0) {
                b' ' | b'\t' | b'\n' | b'\r' | 0x0c => self.at += 1,
                b'/' if self.peek(1) == b'/' => {
                    while self.at < self.bytes.len() && self.bytes[self.at] != b'\n' {
                        self.at += 1;
                    }
                }
                _ => return,
            }
        }
    }

    fn next_token(&mut self) -> LexResult<Token> {
        self.skip_space();
        let start = self.at;
        let pos = start as Pos;
        if self.at >= self.bytes.len() {
            return Ok(Token { tok: Tok::Eof, pos });
        }
        let c = self.bytes[self.at];
        let tok = match c {
            b'0'..=b'9' => self.number()?,
            b'.' if self.peek(1).is_ascii_digit() => self.number()?,
            b'"' | b'\'' => self.string(false, false)?,
            b'`' => self.quoted_ident()?,
            b'a'..=b'z' | b'A'..=b'Z' | b'_' => {
                if let Some(tok) = self.prefixed_string()? {
                    tok
                } else {
                    self.ident()
                }
            }
            _ => {
                let rest = &self.src[self.at..];
                match PUNCT.iter().find(|p| rest.starts_with(**p)) {
                    Some(p) => {
                        self.at += p.len();
                        Tok::Punct(p)
                    }
                    None => {
                        let ch = rest.chars().next().unwrap_or('?');
                        return Err(self.err(start, format!("token recognition error at: '{ch}'")));
                    }
                }
            }
        };
        Ok(Token { tok, pos })
    }

    fn ident(&mut self) -> Tok {
        let start = self.at;
        while matches!(self.peek(0), b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_') {
            self.at += 1;
        }
        match &self.src[start..self.at] {
            "true" => Tok::True,
            "false" => Tok::False,
            "null" => Tok::Null,
            "in" => Tok::In,
            name => Tok::Ident(name.into()),
        }
    }

    fn quoted_ident(&mut self) -> LexResult<Tok> {
        let start = self.at;
        self.at += 1;
        let body_start = self.at;
        while self.at < self.bytes.len() && self.bytes[self.at] != b'`' {
            let b = self.bytes[self.at];
            if !(b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-' | b'/' | b' ')) {
                return Err(self.err(self.at, "invalid character in quoted identifier"));
            }
            self.at += 1;
        }
        if self.at >= self.bytes.len() {
            return Err(self.err(start, "unterminated quoted identifier"));
        }
        let name = &self.src[body_start..self.at];
        self.at += 1;
        if name.is_empty() {
            return Err(self.err(start, "empty quoted identifier"));
        }
        Ok(Tok::QuotedIdent(name.into()))
    }

    /// `r"..."`, `b'...'`, `rb"..."`, `Br'...'` and friends.
    fn prefixed_string(&mut self) -> LexResult<Option<Tok>> {
        let (a, b, c) = (self.peek(0), self.peek(1), self.peek(2));
        let is_q = |x: u8| x == b'"' || x == b'\'';
        let (raw, bytes, len) = match (a.to_ascii_lowercase(), b.to_ascii_lowercase()) {
            (b'r', b'b') | (b'b', b'r') if is_q(c) => (true, true, 2),
            (b'r', _) if is_q(b) => (true, false, 1),
            (b'b', _) if is_q(b) => (false, true, 1),
            _ => return Ok(None),
        };
        self.at += len;
        self.string(raw, bytes).map(Some)
    }

    fn string(&mut self, raw: bool, bytes: bool) -> LexResult<Tok> {
        let start = self.at;
        let q = self.bytes[self.at];
        let triple = self.peek(1) == q && self.peek(2) == q;
        self.at += if triple { 3 } else { 1 };
        let mut out: Vec<u8> = Vec::new();
        loop {
            if self.at >= self.bytes.len() {
                return Err(self.err(start, "unterminated string literal"));
            }
            let b = self.bytes[self.at];
            if b == q {
                if !triple {
                    self.at += 1;
                    break;
                }
                if self.peek(1) == q && self.peek(2) == q {
                    self.at += 3;
                    break;
                }
            }
            if !triple && (b == b'\n' || b == b'\r') {
                return Err(self.err(self.at, "newline in single-quoted string literal"));
            }
            if b == b'\\' && !raw {
                self.escape(&mut out, bytes)?;
                continue;
            }
            if b == b'\\' && raw {
                // Raw strings keep the backslash, but `\` + quote never ends them.
                out.push(b);
                self.at += 1;
                if self.at < self.bytes.len() && self.bytes[self.at] == q {
                    out.push(q);
                    self.at += 1;
                }
                continue;
            }
            out.push(b);
            self.at += 1;
        }
        if bytes {
            return Ok(Tok::Bytes(out.into()));
        }
        match String::from_utf8(out) {
            Ok(s) => Ok(Tok::Str(s.into())),
            Err(_) => Err(self.err(start, "string literal is not valid UTF-8")),
        }
    }

    fn hex_digits(&mut self, n: usize) -> LexResult<u32> {
        let mut v: u32 = 0;
        for _ in 0..n {
            let d = (self.peek(0) as char)
                .to_digit(16)
                .ok_or_else(|| self.err(self.at, "invalid escape sequence: expected hex digit"))?;
            v = v * 16 + d;
            self.at += 1;
        }
        Ok(v)
    }

    fn escape(&mut self, out: &mut Vec<u8>, bytes: bool) -> LexResult<()> {
        let esc_at = self.at;
        self.at += 1;
        let c = self.peek(0);
        self.at += 1;
        let simple = match c {
            b'a' => Some(7),
            b'b' => Some(8),
            b'f' => Some(12),
            b'n' => Some(b'\n'),
            b'r' => Some(b'\r'),
            b't' => Some(b'\t'),
            b'v' => Some(11),
            b'\\' | b'\'' | b'"' | b'`' | b'?' => Some(c),
            _ => None,
        };
        if let Some(b) = simple {
            out.push(b);
            return Ok(());
        }
        let code = match c {
            b'x' | b'X' => self.hex_digits(2)?,
            b'u' => self.hex_digits(4)?,
            b'U' => self.hex_digits(8)?,
            b'0'..=b'3' => {
                let mut v = (c - b'0') as u32;
                for _ in 0..2 {
                    let d = self.peek(0);
                    if !(b'0'..=b'7').contains(&d) {
                        return Err(self.err(esc_at, "invalid octal escape sequence"));
                    }
                    v = v * 8 + (d - b'0') as u32;
                    self.at += 1;
                }
                v
            }
            _ => return Err(self.err(esc_at, "invalid escape sequence")),
        };
        let is_byte_escape = matches!(c, b'x' | b'X' | b'0'..=b'3');
        if bytes && is_byte_escape {
            out.push(code as u8);
            return Ok(());
        }
        if bytes {
            // cel-go refuses \u and \U in bytes literals.
            return Err(self.err(esc_at, "unicode escape in bytes literal"));
        }
        let ch = char::from_u32(code)
            .ok_or_else(|| self.err(esc_at, "invalid unicode code point in escape sequence"))?;
        let mut buf = [0u8; 4];
        out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
        Ok(())
    }

    fn number(&mut self) -> LexResult<Tok> {
        let start = self.at;
        if self.peek(0) == b'0' && matches!(self.peek(1), b'x' | b'X') {
            self.at += 2;
            let digits_start = self.at;
            while self.peek(0).is_ascii_hexdigit() {
                self.at += 1;
            }
            let digits = &self.src[digits_start..self.at];
            if digits.is_empty() {
                return Err(self.err(start, "invalid hex literal"));
            }
            return match u64::from_str_radix(digits, 16) {
                Ok(v) => self.int_suffix(start, v),
                Err(_) => Err(self.out_of_range(start)),
            };
        }
        while self.peek(0).is_ascii_digit() {
            self.at += 1;
        }
        let mut is_double = false;
        if self.peek(0) == b'.' && self.peek(1).is_ascii_digit() {
            is_double = true;
            self.at += 1;
            while self.peek(0).is_ascii_digit() {
                self.at += 1;
            }
        }
        if matches!(self.peek(0), b'e' | b'E') {
            let save = self.at;
            self.at += 1;
            if matches!(self.peek(0), b'+' | b'-') {
                self.at += 1;
            }
            if self.peek(0).is_ascii_digit() {
                is_double = true;
                while self.peek(0).is_ascii_digit() {
                    self.at += 1;
                }
            } else {
                self.at = save;
            }
        }
        let text = &self.src[start..self.at];
        if is_double {
            let v: f64 = text
                .parse()
                .map_err(|_| self.err(start, "invalid double literal"))?;
            return Ok(Tok::Double(v));
        }
        match text.parse() {
            Ok(v) => self.int_suffix(start, v),
            Err(_) => Err(self.out_of_range(start)),
        }
    }

    /// A literal beyond 64 bits, in cel-go's words.
    fn out_of_range(&self, start: usize) -> CompileError {
        match self.peek(0) {
            b'u' | b'U' => self.err(start, "invalid uint literal"),
            _ => self.err(start, "invalid int literal"),
        }
    }

    fn int_suffix(&mut self, _start: usize, v: u64) -> LexResult<Tok> {
        if matches!(self.peek(0), b'u' | b'U') {
            self.at += 1;
            return Ok(Tok::Uint(v));
        }
        Ok(if v <= i64::MAX as u64 {
            Tok::Int(v as i64)
        } else {
            Tok::BigInt(v)
        })
    }
}
