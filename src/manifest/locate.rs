//! Where a place inside a string value is in the YAML text: a compile error
//! at line 3, column 7 of an expression written as a block scalar (`|`,
//! `>`) or a folded plain or quoted string is on another line of the file
//! than the key. Escapes in a quoted string and flow mappings
//! (`{expression: "..."}`) are read as YAML reads them, so the column is
//! that of the character in the file.

/// The 1-based (line, column) in `text` of the character at 1-based
/// (`line`, `column`) of `value`, the string of the mapping entry `key`
/// whose key is on `key_line`. Each source line of the scalar is found, in order, in
/// the value (folding joins lines with spaces and block scalars drop the
/// indentation, but the characters of a line stay together). `None` when
/// the lines cannot be matched (a quoted string with escapes that goes on
/// over several lines).
pub fn position_in_scalar(
    text: &str,
    key_line: usize,
    key: &str,
    value: &str,
    line: usize,
    column: usize,
) -> Option<(usize, usize)> {
    let target = char_offset(value, line, column)?;
    let mut lines = text.lines().enumerate().skip(key_line.checked_sub(1)?);
    let (_, first) = lines.next()?;
    // The key's own column: past the `- ` of a list item.
    let key_indent = first.len() - first.trim_start_matches([' ', '-']).len();
    let after_key = first.find(&format!("{key}:")).map(|c| c + key.len() + 1)?;
    let rest = &first[after_key..];
    let head = rest.trim_start();
    let block = head.starts_with('|') || head.starts_with('>');
    let mut cursor = 0usize;
    let mut pieces: Vec<(usize, usize, &str)> = Vec::new();
    if !block {
        let start = after_key + (rest.len() - head.len());
        let quoted = head.starts_with(['"', '\'']);
        if quoted {
            if let Some((cols, close)) = quoted_on_line(first, start) {
                let col = cols.get(target).copied().unwrap_or(close);
                return (target <= cols.len()).then_some((key_line, col));
            }
        }
        let content = if quoted {
            &head[1..]
        } else if first[..after_key].contains(['{', '[']) {
            // A plain scalar in a flow collection ends at a flow indicator.
            head.split([',', '{', '}', '[', ']']).next().unwrap_or(head)
        } else {
            head
        };
        let start = start + usize::from(quoted);
        pieces.push((key_line, first[..start].chars().count(), content));
    }
    for (i, l) in lines {
        if l.trim().is_empty() {
            continue;
        }
        if indent(l) <= key_indent {
            break;
        }
        pieces.push((i + 1, indent(l), l.trim_start()));
    }
    for (line_no, col, piece) in pieces {
        let piece = piece.trim_end();
        let piece = piece.strip_suffix(['"', '\'']).unwrap_or(piece);
        if piece.is_empty() {
            continue;
        }
        let found = value.get(cursor..)?.find(piece)? + cursor;
        let start = value[..found].chars().count();
        let len = piece.chars().count();
        if (start..start + len).contains(&target) {
            return Some((line_no, col + target - start + 1));
        }
        cursor = found + piece.len();
        if cursor >= value.len() {
            break;
        }
    }
    None
}

/// The 1-based columns in `line` of each character of the quoted scalar
/// whose opening quote is at byte `open`, as YAML decodes it (`\"`, `\n`,
/// `\xNN`, `\uNNNN` in double quotes, `''` in single quotes, each one
/// character), and the column of its closing quote; `None` when it does
/// not close on this line.
fn quoted_on_line(line: &str, open: usize) -> Option<(Vec<usize>, usize)> {
    let quote = line[open..].chars().next()?;
    let body = &line[open + 1..];
    let before = line[..open + 1].chars().count();
    let mut cols = Vec::new();
    let mut chars = body.chars().enumerate().peekable();
    while let Some((i, c)) = chars.next() {
        let col = before + i + 1;
        match c {
            '\\' if quote == '"' => {
                let (_, e) = chars.next()?;
                let digits = match e {
                    'x' => 2,
                    'u' => 4,
                    'U' => 8,
                    _ => 0,
                };
                for _ in 0..digits {
                    chars.next()?;
                }
            }
            '\'' if quote == '\'' && chars.peek().map(|p| p.1) == Some('\'') => {
                chars.next();
            }
            c if c == quote => return Some((cols, col)),
            _ => {}
        }
        cols.push(col);
    }
    None
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

/// The character offset of 1-based (line, column) in `s`.
fn char_offset(s: &str, line: usize, column: usize) -> Option<usize> {
    let mut offset = 0;
    for (i, l) in s.split('\n').enumerate() {
        if i + 1 == line {
            return Some(offset + column.checked_sub(1)?);
        }
        offset += l.chars().count() + 1;
    }
    None
}

#[cfg(test)]
#[path = "locate_tests.rs"]
mod tests;
