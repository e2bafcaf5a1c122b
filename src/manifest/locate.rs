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
mod tests {
    use super::position_in_scalar;

    fn find(text: &str, key_line: usize, value: &str, at: &str) -> Option<(usize, usize)> {
        // The (line, column) in `value` of the first `at`.
        let off = value.find(at).unwrap();
        let line = value[..off].matches('\n').count() + 1;
        let col = value[..off].rsplit('\n').next().unwrap().chars().count() + 1;
        position_in_scalar(text, key_line, "expression", value, line, col)
    }

    #[test]
    fn literal_block() {
        let text = "spec:\n  validations:\n    - expression: |\n        a &&\n          bogus(x)\n      message: m\n";
        let value = "a &&\n  bogus(x)\n";
        assert_eq!(find(text, 3, value, "bogus"), Some((5, 11)));
    }

    #[test]
    fn folded_block() {
        let text = "x:\n  expression: >-\n    a.b &&\n    c.d(e)\n";
        let value = "a.b && c.d(e)";
        assert_eq!(find(text, 2, value, "d(e)"), Some((4, 7)));
    }

    #[test]
    fn quoted_on_the_key_line() {
        let text = "- expression: \"object.x == 1\"\n";
        assert_eq!(find(text, 1, "object.x == 1", "=="), Some((1, 25)));
    }

    #[test]
    fn flow_mapping_quoted() {
        let text = "    - {expression: \"object.x == 1\", message: m}\n";
        assert_eq!(find(text, 1, "object.x == 1", "=="), Some((1, 30)));
        assert_eq!(&text[29..31], "==");
    }

    #[test]
    fn flow_mapping_plain() {
        let text = "    - {message: m, expression: object.x == 1, reason: Invalid}\n";
        assert_eq!(find(text, 1, "object.x == 1", "1"), Some((1, 44)));
        assert_eq!(&text[43..44], "1");
        let text = "- {expression: a.b(c)}\n";
        assert_eq!(find(text, 1, "a.b(c)", "c"), Some((1, 20)));
    }

    #[test]
    fn escapes_in_a_double_quoted_string() {
        let text = "- expression: \"object.a == \\\"b\\\" && bad(\\u00e9)\"\n";
        let value = "object.a == \"b\" && bad(\u{e9})";
        // `bad` is 2 characters further right in the file than in the value.
        assert_eq!(find(text, 1, value, "bad"), Some((1, 37)));
        assert_eq!(&text[36..39], "bad");
        // The character after an escape: `)` follows the 6-character `\u00e9`.
        assert_eq!(find(text, 1, value, ")"), Some((1, 47)));
        assert_eq!(&text[46..47], ")");
    }

    #[test]
    fn doubled_quotes_in_a_single_quoted_string() {
        let text = "- expression: 'x == ''y'' + zz'\n";
        assert_eq!(find(text, 1, "x == 'y' + zz", "zz"), Some((1, 29)));
        assert_eq!(&text[28..30], "zz");
    }

    #[test]
    fn plain_folded_over_lines() {
        let text = "k:\n  expression: object.a ||\n    object.bad\n";
        let value = "object.a || object.bad";
        assert_eq!(find(text, 2, value, "object.bad"), Some((3, 5)));
        assert_eq!(find(text, 2, value, "||"), Some((2, 24)));
    }
}
