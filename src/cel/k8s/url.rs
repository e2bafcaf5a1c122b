//! The Kubernetes CEL URL library (k8s.io/apiserver/pkg/cel/library/urls.go)
//! over a port of Go 1.26's `net/url` parser.
//!
//! `url(s)` and `isURL(s)` accept what `url.ParseRequestURI` accepts (an
//! absolute URI or an absolute path, no fragment cut off, so
//! `http://h#frag` is rejected); the value kept is `url.Parse(s)`, whose
//! getters the library exposes.

use std::fmt;

use indexmap::IndexMap;

use super::goquote::quote;

/// Go allows at most this many `&`-separated query parameters.
const MAX_QUERY_PARAMS: usize = 10000;

/// A `url()` failure; the message is kube-apiserver's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("URL parse error during conversion from string: parse {quoted}: {detail}", quoted = quote(.input))]
pub struct UrlError {
    /// The string given to `url()` (or the part before '#').
    pub input: String,
    /// Go's `net/url` error.
    pub detail: UrlDetail,
}

/// Go's `net/url` errors, in its words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlDetail {
    #[error("net/url: invalid control character in URL")]
    ControlCharacter,
    #[error("empty url")]
    Empty,
    #[error("invalid URI for request")]
    NotForRequest,
    #[error("first path segment in URL cannot contain colon")]
    ColonInFirstSegment,
    #[error("missing protocol scheme")]
    MissingScheme,
    #[error("net/url: invalid userinfo")]
    InvalidUserinfo,
    #[error("invalid IP-literal")]
    InvalidIpLiteral,
    #[error("invalid port {} after host", quote(.0))]
    InvalidPort(String),
    #[error("missing ']' in host")]
    MissingBracket,
    /// `netip.ParseAddr`'s message.
    #[error("invalid host: {0}")]
    InvalidHost(String),
    #[error("invalid character {} in host name", quote(.0))]
    HostCharacter(String),
    #[error("invalid URL escape {}", quote(.0))]
    Escape(String),
}

/// The parsed URL (Go's `url.URL` fields that matter here).
#[derive(Debug, Clone, Default)]
pub struct Url {
    scheme: String,
    opaque: String,
    user: Option<(String, Option<String>)>,
    host: String,
    path: String,
    raw_path: String,
    omit_host: bool,
    force_query: bool,
    raw_query: String,
    fragment: String,
    raw_fragment: String,
}

/// `isURL(s)`.
pub fn is_url(s: &str) -> bool {
    parse(s, true).is_ok()
}

impl Url {
    /// `url(s)`.
    pub fn parse(s: &str) -> Result<Url, UrlError> {
        parse(s, true).map_err(|detail| UrlError {
            input: s.to_string(),
            detail,
        })?;
        Url::parse_reference(s)
    }

    /// The error text of Go's `url.ParseRequestURI(s)`, if it fails (what the
    /// `uri` named format reports).
    pub fn parse_request_uri_error(s: &str) -> Option<String> {
        let detail = parse(s, true).err()?;
        Some(format!("parse {}: {}", quote(s), detail))
    }

    /// Go's `url.Parse` (fragment allowed).
    fn parse_reference(s: &str) -> Result<Url, UrlError> {
        let (u, frag) = s.split_once('#').unwrap_or((s, ""));
        let err = |input: &str, detail| UrlError {
            input: input.to_string(),
            detail,
        };
        let mut url = parse(u, false).map_err(|d| err(u, d))?;
        if !frag.is_empty() {
            url.set_fragment(frag).map_err(|d| err(s, d))?;
        }
        Ok(url)
    }

    /// `getScheme()` (lower-cased, as Go stores it).
    pub fn scheme(&self) -> &str {
        &self.scheme
    }

    /// `getHost()`: host and port as written (brackets kept for IPv6).
    pub fn host(&self) -> &str {
        &self.host
    }

    /// `getHostname()`: the host without port or IPv6 brackets.
    pub fn hostname(&self) -> &str {
        split_host_port(&self.host).0
    }

    /// `getPort()`: the port digits, empty if none.
    pub fn port(&self) -> &str {
        split_host_port(&self.host).1
    }

    /// `getEscapedPath()`.
    pub fn escaped_path(&self) -> String {
        if !self.raw_path.is_empty() && valid_encoded(&self.raw_path, Mode::Path) {
            if let Ok(p) = unescape(&self.raw_path, Mode::Path) {
                if p == self.path {
                    return self.raw_path.clone();
                }
            }
        }
        if self.path == "*" {
            return "*".to_string();
        }
        escape(&self.path, Mode::Path)
    }

    /// `getQuery()`: Go's `url.Values`, keys in first-seen order; malformed
    /// pairs are skipped as Go skips them.
    pub fn query(&self) -> IndexMap<String, Vec<String>> {
        parse_query(&self.raw_query)
    }

    fn set_fragment(&mut self, f: &str) -> Result<(), UrlDetail> {
        let frag = unescape(f, Mode::Fragment)?;
        self.raw_fragment = if escape(&frag, Mode::Fragment) == f {
            String::new()
        } else {
            f.to_string()
        };
        self.fragment = frag;
        Ok(())
    }

    fn escaped_fragment(&self) -> String {
        if !self.raw_fragment.is_empty() && valid_encoded(&self.raw_fragment, Mode::Fragment) {
            if let Ok(f) = unescape(&self.raw_fragment, Mode::Fragment) {
                if f == self.fragment {
                    return self.raw_fragment.clone();
                }
            }
        }
        escape(&self.fragment, Mode::Fragment)
    }
}

impl PartialEq for Url {
    /// CEL equality on URLs compares `String()`.
    fn eq(&self, other: &Self) -> bool {
        self.to_string() == other.to_string()
    }
}

impl fmt::Display for Url {
    /// Go's `URL.String()`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut buf = String::new();
        if !self.scheme.is_empty() {
            buf.push_str(&self.scheme);
            buf.push(':');
        }
        if !self.opaque.is_empty() {
            buf.push_str(&self.opaque);
        } else {
            self.write_authority(&mut buf);
            let path = self.escaped_path();
            if !path.is_empty() && !path.starts_with('/') && !self.host.is_empty() {
                buf.push('/');
            }
            if buf.is_empty() && path.split('/').next().is_some_and(|seg| seg.contains(':')) {
                buf.push_str("./");
            }
            buf.push_str(&path);
        }
        if self.force_query || !self.raw_query.is_empty() {
            buf.push('?');
            buf.push_str(&self.raw_query);
        }
        if !self.fragment.is_empty() {
            buf.push('#');
            buf.push_str(&self.escaped_fragment());
        }
        f.write_str(&buf)
    }
}

impl Url {
    fn write_authority(&self, buf: &mut String) {
        let has_authority = !self.scheme.is_empty() || !self.host.is_empty() || self.user.is_some();
        if !has_authority || (self.omit_host && self.host.is_empty() && self.user.is_none()) {
            return;
        }
        if !self.host.is_empty() || !self.path.is_empty() || self.user.is_some() {
            buf.push_str("//");
        }
        if let Some((name, password)) = &self.user {
            buf.push_str(&escape(name, Mode::UserPassword));
            if let Some(p) = password {
                buf.push(':');
                buf.push_str(&escape(p, Mode::UserPassword));
            }
            buf.push('@');
        }
        buf.push_str(&escape(&self.host, Mode::Host));
    }
}

// ---------------------------------------------------------------------------
// net/url parse

/// Go's `url.parse(rawURL, viaRequest)`; the error is Go's inner message.
fn parse(raw: &str, via_request: bool) -> Result<Url, UrlDetail> {
    if raw.bytes().any(|b| b < b' ' || b == 0x7f) {
        return Err(UrlDetail::ControlCharacter);
    }
    if raw.is_empty() && via_request {
        return Err(UrlDetail::Empty);
    }
    let mut url = Url::default();
    if raw == "*" {
        url.path = "*".to_string();
        return Ok(url);
    }
    let (scheme, mut rest) = get_scheme(raw)?;
    url.scheme = scheme.to_ascii_lowercase();
    if rest.ends_with('?') && rest.matches('?').count() == 1 {
        url.force_query = true;
        rest = &rest[..rest.len() - 1];
    } else if let Some((r, q)) = rest.split_once('?') {
        rest = r;
        url.raw_query = q.to_string();
    }
    if !rest.starts_with('/') {
        if !url.scheme.is_empty() {
            url.opaque = rest.to_string();
            return Ok(url);
        }
        if via_request {
            return Err(UrlDetail::NotForRequest);
        }
        if rest.split('/').next().is_some_and(|seg| seg.contains(':')) {
            return Err(UrlDetail::ColonInFirstSegment);
        }
    }
    let authority_form = !url.scheme.is_empty() || (!via_request && !rest.starts_with("///"));
    if authority_form && rest.starts_with("//") {
        let after = &rest[2..];
        let (authority, path) = match after.find('/') {
            Some(i) => (&after[..i], &after[i..]),
            None => (after, ""),
        };
        let (user, host) = parse_authority(&url.scheme, authority)?;
        url.user = user;
        url.host = host;
        rest = path;
    } else if !url.scheme.is_empty() && rest.starts_with('/') {
        url.omit_host = true;
    }
    url.path = unescape(rest, Mode::Path)?;
    url.raw_path = if escape(&url.path, Mode::Path) == rest {
        String::new()
    } else {
        rest.to_string()
    };
    Ok(url)
}

/// Go's `getScheme`: (scheme, rest).
fn get_scheme(raw: &str) -> Result<(&str, &str), UrlDetail> {
    for (i, c) in raw.bytes().enumerate() {
        match c {
            b'a'..=b'z' | b'A'..=b'Z' => {}
            b'0'..=b'9' | b'+' | b'-' | b'.' if i > 0 => {}
            b':' if i == 0 => return Err(UrlDetail::MissingScheme),
            b':' => return Ok((&raw[..i], &raw[i + 1..])),
            _ => return Ok(("", raw)),
        }
    }
    Ok(("", raw))
}

type UserInfo = Option<(String, Option<String>)>;

fn parse_authority(scheme: &str, authority: &str) -> Result<(UserInfo, String), UrlDetail> {
    let at = authority.rfind('@');
    let host = parse_host(scheme, at.map_or(authority, |i| &authority[i + 1..]))?;
    let Some(i) = at else {
        return Ok((None, host));
    };
    let userinfo = &authority[..i];
    if !valid_userinfo(userinfo) {
        return Err(UrlDetail::InvalidUserinfo);
    }
    let user = match userinfo.split_once(':') {
        None => (unescape(userinfo, Mode::UserPassword)?, None),
        Some((name, pass)) => (
            unescape(name, Mode::UserPassword)?,
            Some(unescape(pass, Mode::UserPassword)?),
        ),
    };
    Ok((Some(user), host))
}

fn valid_userinfo(s: &str) -> bool {
    s.chars()
        .all(|c| c.is_ascii_alphanumeric() || "-._:~!$&'()*+,;=%@".contains(c))
}

fn parse_host(scheme: &str, host: &str) -> Result<String, UrlDetail> {
    match host.rfind('[') {
        Some(i) if i > 0 => return Err(UrlDetail::InvalidIpLiteral),
        Some(_) => return parse_bracketed_host(host),
        None => {}
    }
    if let Some(first) = host.find(':') {
        let last = host.rfind(':').unwrap_or(first);
        // Go 1.26 (urlstrictcolons): http(s) hosts keep the first colon.
        let i = if last != first && scheme != "http" && scheme != "https" {
            last
        } else {
            first
        };
        let colon_port = &host[i..];
        if !valid_optional_port(colon_port) {
            return Err(UrlDetail::InvalidPort(colon_port.to_string()));
        }
    }
    unescape(host, Mode::Host)
}

/// `[IPv6]:port`: the literal must be an IPv6 address (zone allowed).
fn parse_bracketed_host(host: &str) -> Result<String, UrlDetail> {
    let Some(close) = host.rfind(']') else {
        return Err(UrlDetail::MissingBracket);
    };
    let colon_port = &host[close + 1..];
    if !valid_optional_port(colon_port) {
        return Err(UrlDetail::InvalidPort(colon_port.to_string()));
    }
    let colon_port = unescape(colon_port, Mode::Host)?;
    let hostname = &host[1..close];
    let unescaped = match hostname.find("%25") {
        Some(z) => unescape(&hostname[..z], Mode::Host)? + &unescape(&hostname[z..], Mode::Zone)?,
        None => unescape(hostname, Mode::Host)?,
    };
    match super::net::go_parse_addr(&unescaped) {
        Err(e) => Err(UrlDetail::InvalidHost(e.to_string())),
        Ok(true) => Err(UrlDetail::InvalidIpLiteral),
        Ok(false) => Ok(format!("[{unescaped}]{colon_port}")),
    }
}

fn valid_optional_port(port: &str) -> bool {
    port.is_empty()
        || port
            .strip_prefix(':')
            .is_some_and(|p| p.bytes().all(|b| b.is_ascii_digit()))
}

/// Go's `splitHostPort` as used by `Hostname()` and `Port()`.
fn split_host_port(host_port: &str) -> (&str, &str) {
    let (mut host, mut port) = (host_port, "");
    if let Some(colon) = host_port.rfind(':') {
        if valid_optional_port(&host_port[colon..]) {
            (host, port) = (&host_port[..colon], &host_port[colon + 1..]);
        }
    }
    if host.len() >= 2 && host.starts_with('[') && host.ends_with(']') {
        host = &host[1..host.len() - 1];
    }
    (host, port)
}

fn parse_query(query: &str) -> IndexMap<String, Vec<String>> {
    let mut m: IndexMap<String, Vec<String>> = IndexMap::new();
    if query.matches('&').count() + 1 > MAX_QUERY_PARAMS {
        return m;
    }
    for pair in query.split('&') {
        if pair.contains(';') || pair.is_empty() {
            continue;
        }
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let (Ok(key), Ok(value)) = (
            unescape(key, Mode::QueryComponent),
            unescape(value, Mode::QueryComponent),
        ) else {
            continue;
        };
        m.entry(key).or_default().push(value);
    }
    m
}

// ---------------------------------------------------------------------------
// Escaping (net/url shouldEscape, escape, unescape)

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Path,
    Host,
    Zone,
    UserPassword,
    QueryComponent,
    Fragment,
}

fn should_escape(c: u8, mode: Mode) -> bool {
    if c.is_ascii_alphanumeric() {
        return false;
    }
    if matches!(mode, Mode::Host | Mode::Zone) && b"!$&'()*+,;=:[]<>\"".contains(&c) {
        return false;
    }
    match c {
        b'-' | b'_' | b'.' | b'~' => return false,
        b'$' | b'&' | b'+' | b',' | b'/' | b':' | b';' | b'=' | b'?' | b'@' => match mode {
            Mode::Path => return c == b'?',
            Mode::UserPassword => return matches!(c, b'@' | b'/' | b'?' | b':'),
            Mode::QueryComponent => return true,
            Mode::Fragment => return false,
            Mode::Host | Mode::Zone => {}
        },
        _ => {}
    }
    !(mode == Mode::Fragment && matches!(c, b'!' | b'(' | b')' | b'*'))
}

fn escape(s: &str, mode: Mode) -> String {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = Vec::with_capacity(s.len());
    for &c in s.as_bytes() {
        if c == b' ' && mode == Mode::QueryComponent {
            out.push(b'+');
        } else if should_escape(c, mode) {
            out.extend_from_slice(&[b'%', HEX[usize::from(c >> 4)], HEX[usize::from(c & 15)]]);
        } else {
            out.push(c);
        }
    }
    // Only ASCII bytes were added and multi-byte sequences were either kept
    // whole or fully escaped, so this is UTF-8.
    String::from_utf8_lossy(&out).into_owned()
}

fn valid_encoded(s: &str, mode: Mode) -> bool {
    s.bytes()
        .all(|c| b"!$&'()*+,;=:@[]%".contains(&c) || !should_escape(c, mode))
}

/// Go's `unescape`; errors are Go's messages.
fn unescape(s: &str, mode: Mode) -> Result<String, UrlDetail> {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                check_percent(s, i, mode)?;
                i += 3;
            }
            c if matches!(mode, Mode::Host | Mode::Zone) && c < 0x80 && should_escape(c, mode) => {
                return Err(UrlDetail::HostCharacter(s[i..i + 1].to_string()));
            }
            _ => i += 1,
        }
    }
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                out.push(unhex(b[i + 1]) << 4 | unhex(b[i + 2]));
                i += 3;
                continue;
            }
            b'+' if mode == Mode::QueryComponent => out.push(b' '),
            c => out.push(c),
        }
        i += 1;
    }
    // Go strings may hold invalid UTF-8 after unescaping; ours cannot.
    Ok(String::from_utf8_lossy(&out).into_owned())
}

fn check_percent(s: &str, i: usize, mode: Mode) -> Result<(), UrlDetail> {
    let b = s.as_bytes();
    if i + 2 >= b.len() || !b[i + 1].is_ascii_hexdigit() || !b[i + 2].is_ascii_hexdigit() {
        let end = (i + 3).min(b.len());
        return Err(escape_error(&b[i..end]));
    }
    let escape_err = || Err(escape_error(&b[i..i + 3]));
    if mode == Mode::Host && unhex(b[i + 1]) < 8 && &s[i..i + 3] != "%25" {
        return escape_err();
    }
    if mode == Mode::Zone {
        let v = unhex(b[i + 1]) << 4 | unhex(b[i + 2]);
        if &s[i..i + 3] != "%25" && v != b' ' && should_escape(v, Mode::Host) {
            return escape_err();
        }
    }
    Ok(())
}

fn escape_error(bytes: &[u8]) -> UrlDetail {
    UrlDetail::Escape(String::from_utf8_lossy(bytes).into_owned())
}

fn unhex(c: u8) -> u8 {
    match c {
        b'0'..=b'9' => c - b'0',
        b'a'..=b'f' => c - b'a' + 10,
        _ => c.wrapping_sub(b'A').wrapping_add(10),
    }
}

#[cfg(test)]
#[path = "url_tests.rs"]
mod tests;
