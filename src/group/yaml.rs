//! JSON values written as block-style YAML, for the manifests the binary
//! prints (`interlock crd`). The project reads YAML but had no writer; the
//! output only needs to be readable and to read back as the same value, so
//! anything not obviously a plain string is written JSON-quoted (a JSON
//! string is a valid YAML double-quoted scalar).

use serde_json::Value;
use std::fmt::Write as _;

/// `value` as a YAML document (no leading `---`), ending with a newline.
pub fn to_yaml(value: &Value) -> String {
    let mut out = String::new();
    match value {
        Value::Object(m) if !m.is_empty() => write_map(m, 0, &mut out),
        Value::Array(a) if !a.is_empty() => write_list(a, 0, &mut out),
        scalar => {
            out.push_str(&scalar_text(scalar));
            out.push('\n');
        }
    }
    out
}

fn write_map(map: &serde_json::Map<String, Value>, indent: usize, out: &mut String) {
    for (key, value) in map {
        pad(indent, out);
        out.push_str(&string_text(key));
        out.push(':');
        write_child(value, indent, out);
    }
}

fn write_list(list: &[Value], indent: usize, out: &mut String) {
    for item in list {
        pad(indent, out);
        out.push('-');
        match item {
            // The first key shares the line with the dash; the rest line up
            // under it.
            Value::Object(m) if !m.is_empty() => {
                let mut rest = String::new();
                write_map(m, indent + 2, &mut rest);
                out.push(' ');
                out.push_str(&rest[indent + 2..]);
            }
            Value::Array(a) if !a.is_empty() => {
                out.push('\n');
                write_list(a, indent + 2, out);
            }
            scalar => {
                out.push(' ');
                out.push_str(&scalar_text(scalar));
                out.push('\n');
            }
        }
    }
}

/// What follows `key:`: a scalar on the same line, a collection below.
fn write_child(value: &Value, indent: usize, out: &mut String) {
    match value {
        Value::Object(m) if !m.is_empty() => {
            out.push('\n');
            write_map(m, indent + 2, out);
        }
        // Lists sit at their key's indentation, as kubectl writes them.
        Value::Array(a) if !a.is_empty() => {
            out.push('\n');
            write_list(a, indent, out);
        }
        scalar => {
            out.push(' ');
            out.push_str(&scalar_text(scalar));
            out.push('\n');
        }
    }
}

fn pad(indent: usize, out: &mut String) {
    let _ = write!(out, "{:indent$}", "");
}

fn scalar_text(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => string_text(s),
        Value::Object(_) => "{}".into(),
        Value::Array(_) => "[]".into(),
    }
}

fn string_text(s: &str) -> String {
    if is_plain_safe(s) {
        s.to_string()
    } else {
        // Serialising a string cannot fail.
        serde_json::to_string(s).unwrap_or_default()
    }
}

/// Whether `s` reads back as the same string when written unquoted, under
/// YAML 1.1 (sigs.k8s.io/yaml) and 1.2 alike. Deliberately narrow: starts
/// with a letter, `_` or `/`, holds no indicator that could end or retype
/// the scalar, and is not a word YAML 1.1 reads as a boolean or null.
fn is_plain_safe(s: &str) -> bool {
    let Some(first) = s.chars().next() else {
        return false;
    };
    if !(first.is_ascii_alphabetic() || first == '_' || first == '/') || s.ends_with(' ') {
        return false;
    }
    const SPECIAL: [&str; 11] = [
        "y", "n", "yes", "no", "on", "off", "true", "false", "null", "~", "<<",
    ];
    if SPECIAL.iter().any(|w| s.eq_ignore_ascii_case(w)) {
        return false;
    }
    let plain_char =
        |c: char| c.is_ascii_alphanumeric() || " _./-()',;=+<>!?@$%^&*".contains(c) || c == ':';
    s.chars().all(plain_char) && !s.contains(": ") && !s.ends_with(':') && !s.contains(" #")
}

#[cfg(test)]
#[path = "yaml_tests.rs"]
mod tests;
