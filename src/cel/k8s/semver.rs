//! The Kubernetes CEL semver library (k8s.io/apiserver/pkg/cel/library/
//! semverlib.go, version 1: `semver(s)`, `semver(s, normalize)`,
//! `isSemver(s)`, `isSemver(s, normalize)`), with github.com/blang/semver/v4
//! parsing, printing and precedence.

use std::cmp::Ordering;
use std::fmt;

use super::goquote::quote;

/// Parse errors, with blang/semver's (and the library's) messages.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SemverError {
    #[error("Version string empty")]
    Empty,
    #[error("No Major.Minor.Patch elements found")]
    NoMajorMinorPatch,
    #[error("Invalid character(s) found in {0} number {quoted}", quoted = quote(.1))]
    InvalidNumberChars(&'static str, String),
    #[error("{0} number must not contain leading zeroes {quoted}", quoted = quote(.1))]
    LeadingZeroes(&'static str, String),
    /// `strconv.ParseUint` failure (empty or out of range).
    #[error("strconv.ParseUint: parsing {quoted}: {1}", quoted = quote(.0))]
    ParseUint(String, &'static str),
    #[error("Prerelease is empty")]
    EmptyPrerelease,
    #[error("Numeric PreRelease version must not contain leading zeroes {quoted}", quoted = quote(.0))]
    PrereleaseLeadingZeroes(String),
    #[error("Invalid character(s) found in prerelease {quoted}", quoted = quote(.0))]
    InvalidPrerelease(String),
    #[error("Build meta data is empty")]
    EmptyBuild,
    #[error("Invalid character(s) found in build meta data {quoted}", quoted = quote(.0))]
    InvalidBuild(String),
    /// From the library's normalisation.
    #[error("short version cannot contain PreRelease/Build meta data")]
    ShortWithMetadata,
}

/// One dot-separated prerelease identifier.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PreRelease {
    Numeric(u64),
    Alphanumeric(String),
}

/// A semantic version (blang `semver.Version`).
///
/// `==` and ordering follow semver precedence (build metadata is ignored),
/// which is what CEL equality on `kubernetes.Semver` uses.
#[derive(Debug, Clone)]
pub struct Semver {
    pub major: u64,
    pub minor: u64,
    pub patch: u64,
    pub pre: Vec<PreRelease>,
    pub build: Vec<String>,
}

/// `isSemver(s)` / `isSemver(s, normalize)`.
pub fn is_semver(s: &str, normalize: bool) -> bool {
    Semver::parse_with(s, normalize).is_ok()
}

impl Semver {
    /// `semver(s)`: strict blang `semver.Parse`.
    pub fn parse(s: &str) -> Result<Semver, SemverError> {
        if s.is_empty() {
            return Err(SemverError::Empty);
        }
        let parts: Vec<&str> = s.splitn(3, '.').collect();
        let [major, minor, rest] = parts[..] else {
            return Err(SemverError::NoMajorMinorPatch);
        };
        let major = parse_number("Major", major)?;
        let minor = parse_number("Minor", minor)?;
        let (rest, build) = match rest.split_once('+') {
            Some((r, b)) => (r, Some(b)),
            None => (rest, None),
        };
        let (patch, pre) = match rest.split_once('-') {
            Some((p, pre)) => (p, Some(pre)),
            None => (rest, None),
        };
        let patch = parse_number("Patch", patch)?;
        let pre = match pre {
            Some(p) => p
                .split('.')
                .map(parse_prerelease)
                .collect::<Result<_, _>>()?,
            None => Vec::new(),
        };
        let build = match build {
            Some(b) => b.split('.').map(parse_build).collect::<Result<_, _>>()?,
            None => Vec::new(),
        };
        Ok(Semver {
            major,
            minor,
            patch,
            pre,
            build,
        })
    }

    /// `semver(s, normalize)`.
    pub fn parse_with(s: &str, normalize: bool) -> Result<Semver, SemverError> {
        if normalize {
            Semver::parse(&normalize_version(s)?)
        } else {
            Semver::parse(s)
        }
    }

    /// `major()` as CEL returns it (Go converts the uint64 to int64).
    pub fn major_i64(&self) -> i64 {
        self.major as i64
    }

    /// `minor()` as CEL returns it.
    pub fn minor_i64(&self) -> i64 {
        self.minor as i64
    }

    /// `patch()` as CEL returns it.
    pub fn patch_i64(&self) -> i64 {
        self.patch as i64
    }

    /// `compareTo()`: -1, 0 or 1.
    pub fn compare_to(&self, other: &Semver) -> i64 {
        self.cmp(other) as i64
    }

    /// `isLessThan()`.
    pub fn is_less_than(&self, other: &Semver) -> bool {
        self < other
    }

    /// `isGreaterThan()`.
    pub fn is_greater_than(&self, other: &Semver) -> bool {
        self > other
    }
}

/// The library's `normalizeAndParse` preprocessing: drop one leading 'v',
/// strip leading zeros of the first three dot-separated parts, pad missing
/// minor/patch with 0.
fn normalize_version(s: &str) -> Result<String, SemverError> {
    let s = s.strip_prefix('v').unwrap_or(s);
    let mut parts: Vec<String> = s.splitn(3, '.').map(strip_zeros).collect();
    if parts.len() < 3 {
        let last = parts.last().map(String::as_str).unwrap_or("");
        if last.contains(['+', '-']) {
            return Err(SemverError::ShortWithMetadata);
        }
        parts.resize(3, "0".to_string());
    }
    Ok(parts.join("."))
}

fn strip_zeros(p: &str) -> String {
    if p.len() <= 1 {
        return p.to_string();
    }
    let t = p.trim_start_matches('0');
    if t.as_bytes().first().is_some_and(u8::is_ascii_digit) {
        t.to_string()
    } else {
        format!("0{t}")
    }
}

fn parse_number(what: &'static str, s: &str) -> Result<u64, SemverError> {
    if !s.bytes().all(|c| c.is_ascii_digit()) {
        return Err(SemverError::InvalidNumberChars(lower(what), s.to_string()));
    }
    if s.len() > 1 && s.starts_with('0') {
        return Err(SemverError::LeadingZeroes(what, s.to_string()));
    }
    parse_uint(s)
}

/// blang's message for invalid characters says "major number" in lower case.
fn lower(what: &'static str) -> &'static str {
    match what {
        "Major" => "major",
        "Minor" => "minor",
        _ => "patch",
    }
}

/// `strconv.ParseUint(s, 10, 64)` on a string of ASCII digits.
fn parse_uint(s: &str) -> Result<u64, SemverError> {
    if s.is_empty() {
        return Err(SemverError::ParseUint(String::new(), "invalid syntax"));
    }
    s.parse()
        .map_err(|_| SemverError::ParseUint(s.to_string(), "value out of range"))
}

fn is_alphanum(s: &str) -> bool {
    s.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-')
}

fn parse_prerelease(s: &str) -> Result<PreRelease, SemverError> {
    if s.is_empty() {
        return Err(SemverError::EmptyPrerelease);
    }
    if s.bytes().all(|c| c.is_ascii_digit()) {
        if s.len() > 1 && s.starts_with('0') {
            return Err(SemverError::PrereleaseLeadingZeroes(s.to_string()));
        }
        return parse_uint(s).map(PreRelease::Numeric);
    }
    if is_alphanum(s) {
        return Ok(PreRelease::Alphanumeric(s.to_string()));
    }
    Err(SemverError::InvalidPrerelease(s.to_string()))
}

fn parse_build(s: &str) -> Result<String, SemverError> {
    if s.is_empty() {
        return Err(SemverError::EmptyBuild);
    }
    if !is_alphanum(s) {
        return Err(SemverError::InvalidBuild(s.to_string()));
    }
    Ok(s.to_string())
}

impl PartialOrd for PreRelease {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for PreRelease {
    /// Numeric identifiers sort before alphanumeric ones; strings compare
    /// bytewise.
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (PreRelease::Numeric(a), PreRelease::Numeric(b)) => a.cmp(b),
            (PreRelease::Numeric(_), PreRelease::Alphanumeric(_)) => Ordering::Less,
            (PreRelease::Alphanumeric(_), PreRelease::Numeric(_)) => Ordering::Greater,
            (PreRelease::Alphanumeric(a), PreRelease::Alphanumeric(b)) => a.cmp(b),
        }
    }
}

impl PartialEq for Semver {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Semver {}

impl PartialOrd for Semver {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Semver {
    /// blang `Version.Compare`: a version without prerelease is greater
    /// than one with; otherwise identifiers compare pairwise, then by count.
    fn cmp(&self, other: &Self) -> Ordering {
        let core =
            (self.major, self.minor, self.patch).cmp(&(other.major, other.minor, other.patch));
        if core != Ordering::Equal {
            return core;
        }
        match (self.pre.is_empty(), other.pre.is_empty()) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Greater,
            (false, true) => Ordering::Less,
            (false, false) => self.pre.cmp(&other.pre),
        }
    }
}

impl fmt::Display for PreRelease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PreRelease::Numeric(n) => write!(f, "{n}"),
            PreRelease::Alphanumeric(s) => f.write_str(s),
        }
    }
}

impl fmt::Display for Semver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)?;
        for (i, p) in self.pre.iter().enumerate() {
            f.write_str(if i == 0 { "-" } else { "." })?;
            write!(f, "{p}")?;
        }
        if !self.build.is_empty() {
            write!(f, "+{}", self.build.join("."))?;
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "semver_tests.rs"]
mod tests;
