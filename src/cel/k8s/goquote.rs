//! Go's `strconv.Quote`, used by the Go error messages these libraries copy
//! (`%q` in `fmt`). Printability follows `unicode.IsPrint` closely enough for
//! error text: ASCII is exact; outside ASCII, controls, spaces other than
//! U+0020, the common format characters and private-use code points are
//! escaped, everything else is kept.

use std::fmt::Write;

/// Quote `s` the way Go's `strconv.Quote` does.
pub(crate) fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        push_escaped(&mut out, c);
    }
    out.push('"');
    out
}

fn push_escaped(out: &mut String, c: char) {
    match c {
        '"' => out.push_str("\\\""),
        '\\' => out.push_str("\\\\"),
        '\x07' => out.push_str("\\a"),
        '\x08' => out.push_str("\\b"),
        '\x0c' => out.push_str("\\f"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\x0b' => out.push_str("\\v"),
        c if is_print(c) => out.push(c),
        c if (c as u32) < 0x80 => {
            let _ = write!(out, "\\x{:02x}", c as u32);
        }
        c if (c as u32) < 0x10000 => {
            let _ = write!(out, "\\u{:04x}", c as u32);
        }
        c => {
            let _ = write!(out, "\\U{:08x}", c as u32);
        }
    }
}

fn is_print(c: char) -> bool {
    let u = c as u32;
    if u < 0x80 {
        return (0x20..0x7f).contains(&u);
    }
    if c.is_control() || c.is_whitespace() {
        return false;
    }
    let format_chars = matches!(
        u,
        0xad | 0x600..=0x605 | 0x61c | 0x6dd | 0x70f | 0x180e | 0x200b..=0x200f
            | 0x2028..=0x202e | 0x2060..=0x206f | 0xfeff | 0xfff9..=0xfffb
    );
    let private_or_non = matches!(u, 0xe000..=0xf8ff | 0xf0000.. | 0xfffe | 0xffff);
    !(format_chars || private_or_non)
}

#[cfg(test)]
#[path = "goquote_tests.rs"]
mod tests;
