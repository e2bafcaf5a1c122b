//! Where a place inside a string value is in the YAML text: a compile error
//! at line 3, column 7 of an expression written as a block scalar (`|`,
//! `>`) or a folded plain or quoted string is on another line of the file
//! than the key.

/// The 1-based (line, column) in `text` of the character at 1-based
/// (`line`, `column`) of `value`, the string of the mapping entry `key`
/// whose key is on `key_line`. Each source line of the scalar is found, in order, in
/// the value (folding joins lines with spaces and block scalars drop the
/// indentation, but the characters of a line stay together). `None` when
/// the lines cannot be matched (escapes in a double-quoted string).
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
        let content = if quoted { &head[1..] } else { head };
        pieces.push((key_line, start + usize::from(quoted), content));
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
    fn plain_folded_over_lines() {
        let text = "k:\n  expression: object.a ||\n    object.bad\n";
        let value = "object.a || object.bad";
        assert_eq!(find(text, 2, value, "object.bad"), Some((3, 5)));
        assert_eq!(find(text, 2, value, "||"), Some((2, 24)));
    }
}
