//! JSON files: parsed by `serde_json` for speed, then scanned once more for
//! the lines of fields and for duplicate keys (which `serde_json` would
//! silently collapse).

use serde_json::{Map, Value};

use super::error::LoadErrorKind;
use super::positions::{child_index, child_key, PositionIndex, Recorder, ROOT};
use super::scalar::float_to_json;
use super::yaml::{Parsed, RawDoc, RawError};

/// Parses a stream of JSON values (usually one).
pub(crate) fn parse_stream(text: &str) -> Parsed {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut out = Parsed::default();
    let mut de = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    let mut prev_end = 0usize;
    let mut line_at_prev_end = 1usize;
    loop {
        let item = de.next();
        let end = de.byte_offset();
        let Some(item) = item else { break };
        match item {
            Ok(mut value) => {
                // The value starts at the first non-blank byte after the previous one.
                let gap = &text[prev_end..end];
                let skip = gap.len() - gap.trim_start().len();
                let start = prev_end + skip;
                let start_line = line_at_prev_end + count_newlines(&text[prev_end..start]);
                let mut rec = Recorder::default();
                match scan(&text[start..end], start_line as u32, &value, &mut rec) {
                    Ok(()) => {
                        if let Err(e) = normalize_numbers(&mut value) {
                            out.errors.push(RawError {
                                line: start_line,
                                column: None,
                                kind: LoadErrorKind::Scalar(e.to_string()),
                            });
                        } else {
                            out.docs.push(RawDoc {
                                line: start_line,
                                value,
                                index: PositionIndex::from_entries(rec.entries),
                                empty: false,
                            });
                        }
                    }
                    Err(e) => out.errors.push(e),
                }
                line_at_prev_end = start_line + count_newlines(&text[start..end]);
                prev_end = end;
            }
            Err(e) => {
                let msg = e.to_string();
                // serde_json appends " at line L column C"; the location is shown separately.
                let msg = match msg.rfind(" at line ") {
                    Some(i) => msg[..i].to_string(),
                    None => msg,
                };
                out.errors.push(RawError {
                    line: e.line().max(1),
                    column: if e.column() > 0 {
                        Some(e.column())
                    } else {
                        None
                    },
                    kind: LoadErrorKind::Syntax(msg),
                });
                break;
            }
        }
    }
    out
}

fn count_newlines(s: &str) -> usize {
    s.bytes().filter(|&b| b == b'\n').count()
}

/// A number the API server could not represent either.
#[derive(Debug, thiserror::Error)]
#[error("number {0} cannot be represented")]
struct Unrepresentable(String);

/// Makes numbers look as they do to the API server: integral floats become
/// integers (Go's encoder writes `1.0` as `1`).
fn normalize_numbers(v: &mut Value) -> Result<(), Unrepresentable> {
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        match v {
            Value::Number(n) if n.is_f64() => {
                let f = n.as_f64().unwrap_or(0.0);
                match float_to_json(f) {
                    Some(nv) => *v = nv,
                    None => return Err(Unrepresentable(n.to_string())),
                }
            }
            Value::Array(items) => stack.extend(items.iter_mut()),
            Value::Object(m) => stack.extend(m.values_mut()),
            _ => {}
        }
    }
    Ok(())
}

enum Expect<'v> {
    /// In an object: the next string is a key.
    Key,
    /// In an object: after a key, its value comes.
    Value(u64, u32, Option<&'v Value>),
}

enum FrameKind<'v> {
    Object {
        map: &'v Map<String, Value>,
        keys: std::iter::Peekable<serde_json::map::Keys<'v>>,
        expect: Expect<'v>,
    },
    Array {
        items: &'v [Value],
        next: usize,
    },
}

struct Frame<'v> {
    kind: FrameKind<'v>,
    hash: u64,
    line: u32,
}

/// Walks the text of one JSON value together with its parsed form, recording
/// lines and detecting duplicate keys.
fn scan(text: &str, first_line: u32, value: &Value, rec: &mut Recorder) -> Result<(), RawError> {
    let b = text.as_bytes();
    let mut i = 0usize;
    let mut line = first_line;
    let mut stack: Vec<Frame<'_>> = Vec::new();
    let mut root_done = false;
    while i < b.len() {
        let c = b[i];
        match c {
            b'\n' => {
                line += 1;
                i += 1;
            }
            b' ' | b'\t' | b'\r' | b':' => i += 1,
            b',' => {
                i += 1;
            }
            b'}' | b']' => {
                stack.pop();
                i += 1;
            }
            _ => {
                let token_start = i;
                // The place of this token: a key, an object member value, an
                // array item or the root.
                let (is_key, slot) = match stack.last_mut() {
                    None => {
                        if root_done {
                            return Ok(());
                        }
                        root_done = true;
                        (false, Some((ROOT, line, Some(value))))
                    }
                    Some(f) => {
                        let parent_line = f.line;
                        let parent_hash = f.hash;
                        match &mut f.kind {
                            FrameKind::Object { expect, .. } => match expect {
                                Expect::Key => (true, None),
                                Expect::Value(h, key_line, v) => {
                                    let s = (*h, *key_line, *v);
                                    *expect = Expect::Key;
                                    (false, Some(s))
                                }
                            },
                            FrameKind::Array { items, next } => {
                                let idx = *next;
                                *next += 1;
                                let h = child_index(parent_hash, idx);
                                rec.record(h, line, parent_line);
                                (false, Some((h, line, items.get(idx))))
                            }
                        }
                    }
                };
                if c == b'"' {
                    let end = string_end(b, i);
                    if is_key {
                        let Some(raw) = text.get(i + 1..end.saturating_sub(1).max(i + 1)) else {
                            return Ok(());
                        };
                        let key: std::borrow::Cow<'_, str> = if raw.contains('\\') {
                            match serde_json::from_str::<String>(text.get(i..end).unwrap_or("")) {
                                Ok(k) => std::borrow::Cow::Owned(k),
                                Err(_) => return Ok(()),
                            }
                        } else {
                            std::borrow::Cow::Borrowed(raw)
                        };
                        let Some(f) = stack.last_mut() else {
                            return Ok(());
                        };
                        let parent_line = f.line;
                        let h = child_key(f.hash, &key);
                        if let FrameKind::Object { map, keys, expect } = &mut f.kind {
                            if keys.peek().map(|k| k.as_str()) == Some(&*key) {
                                keys.next();
                            } else {
                                let first_line = rec.line_of(h, parent_line);
                                return Err(RawError {
                                    line: line as usize,
                                    column: Some(column(text, token_start)),
                                    kind: LoadErrorKind::DuplicateKey {
                                        key: key.into_owned(),
                                        first_line: first_line as usize,
                                    },
                                });
                            }
                            rec.record(h, line, parent_line);
                            *expect = Expect::Value(h, line, map.get(&*key));
                        }
                    }
                    i = end;
                    continue;
                }
                let Some((hash, node_line, node)) = slot else {
                    return Ok(());
                };
                match c {
                    b'{' => {
                        let Some(Value::Object(map)) = node else {
                            return Ok(());
                        };
                        stack.push(Frame {
                            kind: FrameKind::Object {
                                map,
                                keys: map.keys().peekable(),
                                expect: Expect::Key,
                            },
                            hash,
                            line: node_line,
                        });
                        i += 1;
                    }
                    b'[' => {
                        let Some(Value::Array(items)) = node else {
                            return Ok(());
                        };
                        stack.push(Frame {
                            kind: FrameKind::Array { items, next: 0 },
                            hash,
                            line: node_line,
                        });
                        i += 1;
                    }
                    _ => {
                        // A number, true, false or null.
                        while i < b.len()
                            && !matches!(
                                b[i],
                                b',' | b'}' | b']' | b' ' | b'\t' | b'\r' | b'\n' | b':'
                            )
                        {
                            i += 1;
                        }
                        if i == token_start {
                            i += 1;
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

/// Index just past the closing quote of the string starting at `start`.
fn string_end(b: &[u8], start: usize) -> usize {
    let mut i = start + 1;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    b.len()
}

/// 1-based column (in characters) of a byte offset.
fn column(text: &str, offset: usize) -> usize {
    let line_start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    text[line_start..offset].chars().count() + 1
}

#[cfg(test)]
#[path = "json_tests.rs"]
mod tests;
