//! The Kubernetes CEL format library (k8s.io/apiserver/pkg/cel/library/
//! format.go): `format.named(name)`, `format.<name>()` and
//! `<format>.validate(s)`, with the messages of the apimachinery validators
//! it calls (k8s.io/apimachinery/pkg/util/validation and
//! pkg/api/validate/content) and kube-openapi's strfmt checks.
//!
//! The validators work on bytes, as Go's do: the `*Prefix` formats cut the
//! string at a byte offset and only ASCII can ever be valid.

use super::url;

/// A named format (`kubernetes.NamedFormat`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NamedFormat {
    Dns1123Label,
    Dns1123Subdomain,
    Dns1035Label,
    QualifiedName,
    Dns1123LabelPrefix,
    Dns1123SubdomainPrefix,
    Dns1035LabelPrefix,
    LabelValue,
    Uri,
    Uuid,
    Byte,
    Date,
    Datetime,
}

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const DNS1035_LABEL_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const DNS1035_LABEL_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character";
const LABEL_KEY_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_KEY_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

impl NamedFormat {
    /// Every format, in the order of the Go table.
    pub const ALL: [NamedFormat; 13] = [
        NamedFormat::Dns1123Label,
        NamedFormat::Dns1123Subdomain,
        NamedFormat::Dns1035Label,
        NamedFormat::QualifiedName,
        NamedFormat::Dns1123LabelPrefix,
        NamedFormat::Dns1123SubdomainPrefix,
        NamedFormat::Dns1035LabelPrefix,
        NamedFormat::LabelValue,
        NamedFormat::Uri,
        NamedFormat::Uuid,
        NamedFormat::Byte,
        NamedFormat::Date,
        NamedFormat::Datetime,
    ];

    /// `format.named(name)`: `None` for an unknown name (CEL `optional.none()`).
    pub fn named(name: &str) -> Option<NamedFormat> {
        NamedFormat::ALL.into_iter().find(|f| f.key() == name)
    }

    /// The name in `format.named(...)` and `format.<key>()`.
    pub fn key(self) -> &'static str {
        match self {
            NamedFormat::Dns1123Label => "dns1123Label",
            NamedFormat::Dns1123Subdomain => "dns1123Subdomain",
            NamedFormat::Dns1035Label => "dns1035Label",
            NamedFormat::QualifiedName => "qualifiedName",
            NamedFormat::Dns1123LabelPrefix => "dns1123LabelPrefix",
            NamedFormat::Dns1123SubdomainPrefix => "dns1123SubdomainPrefix",
            NamedFormat::Dns1035LabelPrefix => "dns1035LabelPrefix",
            NamedFormat::LabelValue => "labelValue",
            NamedFormat::Uri => "uri",
            NamedFormat::Uuid => "uuid",
            NamedFormat::Byte => "byte",
            NamedFormat::Date => "date",
            NamedFormat::Datetime => "datetime",
        }
    }

    /// Go's `Format.Name` (what CEL equality on formats compares).
    pub fn name(self) -> &'static str {
        match self {
            NamedFormat::Dns1123Label => "DNS1123Label",
            NamedFormat::Dns1123Subdomain => "DNS1123Subdomain",
            NamedFormat::Dns1035Label => "DNS1035Label",
            NamedFormat::QualifiedName => "QualifiedName",
            NamedFormat::Dns1123LabelPrefix => "DNS1123LabelPrefix",
            NamedFormat::Dns1123SubdomainPrefix => "DNS1123SubdomainPrefix",
            NamedFormat::Dns1035LabelPrefix => "DNS1035LabelPrefix",
            NamedFormat::LabelValue => "LabelValue",
            NamedFormat::Uri => "URI",
            NamedFormat::Uuid => "uuid",
            NamedFormat::Byte => "byte",
            NamedFormat::Date => "date",
            NamedFormat::Datetime => "datetime",
        }
    }

    /// Go's `Format.MaxRegexSize`, which the cost estimator uses.
    pub fn max_regex_size(self) -> usize {
        match self {
            NamedFormat::Dns1123Label
            | NamedFormat::Dns1035Label
            | NamedFormat::Dns1123LabelPrefix
            | NamedFormat::Dns1035LabelPrefix => 30,
            NamedFormat::Dns1123Subdomain
            | NamedFormat::QualifiedName
            | NamedFormat::Dns1123SubdomainPrefix => 60,
            NamedFormat::LabelValue => 40,
            NamedFormat::Uri => 1103,
            NamedFormat::Uuid => 70,
            NamedFormat::Byte => 84,
            NamedFormat::Date | NamedFormat::Datetime => 71,
        }
    }

    /// `<format>.validate(s)`: `None` when valid (CEL `optional.none()`),
    /// otherwise the error messages.
    pub fn validate(self, s: &str) -> Option<Vec<String>> {
        let errs = self.errors(s.as_bytes(), s);
        (!errs.is_empty()).then_some(errs)
    }

    fn errors(self, b: &[u8], s: &str) -> Vec<String> {
        match self {
            NamedFormat::Dns1123Label => dns1123_label(b),
            NamedFormat::Dns1123Subdomain => dns1123_subdomain(b, "characters"),
            NamedFormat::Dns1035Label => dns1035_label(b),
            NamedFormat::QualifiedName => label_key(b),
            NamedFormat::Dns1123LabelPrefix => dns1123_label(&mask_trailing_dash(b)),
            NamedFormat::Dns1123SubdomainPrefix => {
                dns1123_subdomain(&mask_trailing_dash(b), "characters")
            }
            NamedFormat::Dns1035LabelPrefix => dns1035_label(&mask_trailing_dash(b)),
            NamedFormat::LabelValue => label_value(b),
            NamedFormat::Uri => match url::Url::parse_request_uri_error(s) {
                Some(e) => vec![e],
                None => Vec::new(),
            },
            NamedFormat::Uuid => fixed(is_uuid(b), "does not match the UUID format"),
            NamedFormat::Byte => fixed(is_base64(b), "invalid base64"),
            NamedFormat::Date => fixed(is_date(b), "invalid date"),
            NamedFormat::Datetime => fixed(is_datetime(s), "invalid datetime"),
        }
    }
}

fn fixed(ok: bool, msg: &str) -> Vec<String> {
    if ok {
        Vec::new()
    } else {
        vec![msg.to_string()]
    }
}

/// apimachinery's `maskTrailingDash`: it drops the last *two* bytes and
/// appends "a" (so "ab-" is checked as "aa").
fn mask_trailing_dash(b: &[u8]) -> Vec<u8> {
    if b.len() > 1 && b.ends_with(b"-") {
        let mut v = b[..b.len() - 2].to_vec();
        v.push(b'a');
        return v;
    }
    b.to_vec()
}

/// `RegexError`.
fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    let mut out = format!("{msg} (e.g. ");
    for (i, e) in examples.iter().enumerate() {
        if i > 0 {
            out.push_str(" or ");
        }
        out.push_str(&format!("'{e}', "));
    }
    out + &format!("regex used for validation is '{fmt}')")
}

/// `MaxLenError` ("characters" in util/validation, "bytes" in content).
fn max_len_error(n: usize, unit: &str) -> String {
    format!("must be no more than {n} {unit}")
}

fn is_lower_alnum(c: u8) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

/// `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$` (or `[a-z]` first for DNS-1035).
fn matches_label(b: &[u8], alpha_first: bool) -> bool {
    let (Some(&first), Some(&last)) = (b.first(), b.last()) else {
        return false;
    };
    let first_ok = if alpha_first {
        first.is_ascii_lowercase()
    } else {
        is_lower_alnum(first)
    };
    first_ok && is_lower_alnum(last) && b.iter().all(|&c| is_lower_alnum(c) || c == b'-')
}

fn matches_subdomain(b: &[u8]) -> bool {
    b.split(|&c| c == b'.')
        .all(|part| matches_label(part, false))
}

/// `util/validation.IsDNS1123Label`.
fn dns1123_label(b: &[u8]) -> Vec<String> {
    let mut errs = Vec::new();
    if b.len() > 63 {
        errs.push(max_len_error(63, "characters"));
    }
    if !matches_label(b, false) {
        if matches_subdomain(b) {
            errs.push("must not contain dots".to_string());
        } else {
            let examples = ["my-name", "123-abc"];
            errs.push(regex_error(DNS1123_LABEL_MSG, DNS1123_LABEL_FMT, &examples));
        }
    }
    errs
}

/// `IsDNS1123Subdomain` (util/validation says "characters", content "bytes").
fn dns1123_subdomain(b: &[u8], unit: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if b.len() > 253 {
        errs.push(max_len_error(253, unit));
    }
    if !matches_subdomain(b) {
        let examples = ["example.com"];
        errs.push(regex_error(
            DNS1123_SUBDOMAIN_MSG,
            DNS1123_SUBDOMAIN_FMT,
            &examples,
        ));
    }
    errs
}

/// `util/validation.IsDNS1035Label`.
fn dns1035_label(b: &[u8]) -> Vec<String> {
    let mut errs = Vec::new();
    if b.len() > 63 {
        errs.push(max_len_error(63, "characters"));
    }
    if !matches_label(b, true) {
        let examples = ["my-name", "abc-123"];
        errs.push(regex_error(DNS1035_LABEL_MSG, DNS1035_LABEL_FMT, &examples));
    }
    errs
}

/// `^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`.
fn matches_label_key(b: &[u8]) -> bool {
    let (Some(&first), Some(&last)) = (b.first(), b.last()) else {
        return false;
    };
    first.is_ascii_alphanumeric()
        && last.is_ascii_alphanumeric()
        && b.iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

const LABEL_KEY_EXAMPLES: [&str; 3] = ["MyName", "my.name", "123-abc"];

/// `content.IsLabelKey` (the `qualifiedName` format).
fn label_key(b: &[u8]) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&[u8]> = b.split(|&c| c == b'/').collect();
    let name = match parts[..] {
        [name] => name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                let msgs = dns1123_subdomain(prefix, "bytes");
                errs.extend(msgs.into_iter().map(|m| format!("prefix part {m}")));
            }
            name
        }
        _ => {
            let re = regex_error(LABEL_KEY_MSG, LABEL_KEY_FMT, &LABEL_KEY_EXAMPLES);
            let msg = format!("a valid label key {re} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')");
            return vec![msg];
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errs.push(format!("name part {}", max_len_error(63, "bytes")));
    }
    if !matches_label_key(name) {
        let re = regex_error(LABEL_KEY_MSG, LABEL_KEY_FMT, &LABEL_KEY_EXAMPLES);
        errs.push(format!("name part {re}"));
    }
    errs
}

/// `content.IsLabelValue`.
fn label_value(b: &[u8]) -> Vec<String> {
    let mut errs = Vec::new();
    if b.len() > 63 {
        errs.push(max_len_error(63, "bytes"));
    }
    if !b.is_empty() && !matches_label_key(b) {
        let examples = ["MyValue", "my_value", "12345"];
        errs.push(regex_error(LABEL_VALUE_MSG, LABEL_VALUE_FMT, &examples));
    }
    errs
}

/// `(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$`.
fn is_uuid(b: &[u8]) -> bool {
    let mut rest = b;
    for (i, len) in [8, 4, 4, 4, 12].into_iter().enumerate() {
        if i > 0 {
            rest = rest.strip_prefix(b"-").unwrap_or(rest);
        }
        if rest.len() < len || !rest[..len].iter().all(u8::is_ascii_hexdigit) {
            return false;
        }
        rest = &rest[len..];
    }
    rest.is_empty()
}

/// govalidator's base64 pattern: groups of four, padding only at the end,
/// at least one group.
fn is_base64(b: &[u8]) -> bool {
    let alpha = |c: &u8| c.is_ascii_alphanumeric() || *c == b'+' || *c == b'/';
    if b.is_empty() || !b.len().is_multiple_of(4) {
        return false;
    }
    let (body, last) = b.split_at(b.len() - 4);
    let last_ok = match last {
        [a, b2, b'=', b'='] => alpha(a) && alpha(b2),
        [a, b2, c, b'='] => alpha(a) && alpha(b2) && alpha(c),
        _ => last.iter().all(alpha),
    };
    last_ok && body.iter().all(alpha)
}

/// Go `time.Parse("2006-01-02", s)` succeeds.
fn is_date(b: &[u8]) -> bool {
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    if !(digits(0..4) && digits(5..7) && digits(8..10)) {
        return false;
    }
    let num =
        |r: std::ops::Range<usize>| b[r].iter().fold(0u32, |n, &c| n * 10 + u32::from(c - b'0'));
    let (year, month, day) = (num(0..4), num(5..7), num(8..10));
    (1..=12).contains(&month) && day >= 1 && day <= days_in(month, year)
}

fn days_in(month: u32, year: u32) -> u32 {
    match month {
        2 if year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400)) => {
            29
        }
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// strfmt's `IsDateTime`: lower-case, split on 't', a date before the
/// first 't', a time with zone after it (later parts are ignored, as in Go).
fn is_datetime(s: &str) -> bool {
    if s.len() < 4 {
        return false;
    }
    let lower: String = s.chars().map(go_to_lower).collect();
    let mut parts = lower.split('t');
    let (Some(date), Some(time)) = (parts.next(), parts.next()) else {
        return false;
    };
    is_date(date.as_bytes()) && is_time(time)
}

/// Go's `unicode.ToLower` (simple case mapping).
fn go_to_lower(c: char) -> char {
    if c == '\u{130}' {
        return 'i';
    }
    let mut lower = c.to_lowercase();
    match (lower.next(), lower.next()) {
        (Some(l), None) => l,
        _ => c,
    }
}

/// `^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$`
/// with hour <= 23, minute <= 59, second <= 59.
fn is_time(t: &str) -> bool {
    let b = t.as_bytes();
    let two = |i: usize| b.len() >= i + 2 && b[i..i + 2].iter().all(u8::is_ascii_digit);
    if !(two(0) && two(3) && two(6)) || b[2] != b':' || b[5] != b':' {
        return false;
    }
    if &t[0..2] > "23" || &t[3..5] > "59" || &t[6..8] > "59" {
        return false;
    }
    let rest = &t[8..];
    is_zone(rest) || fraction_then_zone(rest)
}

fn fraction_then_zone(rest: &str) -> bool {
    let mut chars = rest.chars();
    match chars.next() {
        Some(c) if c != '\n' => {}
        _ => return false,
    }
    let after = chars.as_str();
    let digits = after.bytes().take_while(u8::is_ascii_digit).count();
    digits > 0 && is_zone(&after[digits..])
}

fn is_zone(z: &str) -> bool {
    let b = z.as_bytes();
    z == "z"
        || (b.len() == 6
            && matches!(b[0], b'+' | b'-')
            && b[1..3].iter().all(u8::is_ascii_digit)
            && b[3] == b':'
            && b[4..6].iter().all(u8::is_ascii_digit))
}

#[cfg(test)]
#[path = "format_tests.rs"]
mod tests;
