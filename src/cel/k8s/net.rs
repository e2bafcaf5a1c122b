//! The Kubernetes CEL `ip` and `cidr` libraries (k8s.io/apiserver/pkg/cel/
//! library/ip.go and cidr.go), which sit on Go's `net/netip`.
//!
//! Parsing follows `netip.ParseAddr` / `netip.ParsePrefix` byte for byte
//! (no leading zeros in IPv4 octets, at most 4 hex digits per group, an
//! embedded IPv4 tail only in the last 32 bits), then the library's extra
//! rules: no zones and no IPv4-mapped IPv6 addresses. Strings are printed as
//! `netip.Addr.String()` does.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::goquote::quote;

/// Errors with kube-apiserver's messages.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NetError {
    /// `ip()` on a string `netip.ParseAddr` rejects; `detail` is Go's error.
    #[error("IP Address {quoted} parse error during conversion from string: {detail}", quoted = quote(.input))]
    IpParse { input: String, detail: String },
    #[error("IP address {quoted} with zone value is not allowed", quoted = quote(.0))]
    IpZone(String),
    #[error("IPv4-mapped IPv6 address {quoted} is not allowed", quoted = quote(.0))]
    IpMapped(String),
    /// `cidr()` on a string `netip.ParsePrefix` rejects (the library really
    /// repeats its prefix twice).
    #[error("network address parse error during conversion from string: network address parse error during conversion from string: {detail}")]
    CidrParse { detail: String },
    #[error("network address parse error during conversion from string: IPv4-mapped IPv6 address {quoted} is not allowed", quoted = quote(.0))]
    CidrMapped(String),
    /// `containsIP(string)` with a string `ip()` rejects: the library checks
    /// the wrong argument for an error and reports this instead.
    #[error("no such overload")]
    NoSuchOverload,
}

/// A CEL `net.IP` value: an IPv4 or IPv6 address without zone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ip(pub IpAddr);

/// A CEL `net.CIDR` value: an address and a prefix length, not necessarily
/// masked (`cidr('10.0.0.1/8') != cidr('10.0.0.0/8')`, as in Go).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cidr {
    addr: IpAddr,
    bits: u8,
}

/// `isIP(s)`.
pub fn is_ip(s: &str) -> bool {
    Ip::parse(s).is_ok()
}

/// `ip.isCanonical(s)`: whether `s` is exactly how the address prints.
pub fn ip_is_canonical(s: &str) -> Result<bool, NetError> {
    Ok(Ip::parse(s)?.to_string() == s)
}

/// `isCIDR(s)`.
pub fn is_cidr(s: &str) -> bool {
    Cidr::parse(s).is_ok()
}

impl Ip {
    /// `ip(s)`.
    pub fn parse(s: &str) -> Result<Ip, NetError> {
        let (addr, zone) = parse_addr(s).map_err(|e| NetError::IpParse {
            input: s.to_string(),
            detail: e.to_string(),
        })?;
        if zone.is_some() {
            return Err(NetError::IpZone(s.to_string()));
        }
        if is_4in6(&addr) {
            return Err(NetError::IpMapped(s.to_string()));
        }
        Ok(Ip(addr))
    }

    /// `family()`: 4 or 6.
    pub fn family(&self) -> i64 {
        match self.0 {
            IpAddr::V4(_) => 4,
            IpAddr::V6(_) => 6,
        }
    }

    /// `isUnspecified()`.
    pub fn is_unspecified(&self) -> bool {
        self.0.is_unspecified()
    }

    /// `isLoopback()` (IPv4: 127/8; IPv6: ::1).
    pub fn is_loopback(&self) -> bool {
        match unmap(self.0) {
            IpAddr::V4(a) => a.octets()[0] == 127,
            IpAddr::V6(a) => a == Ipv6Addr::LOCALHOST,
        }
    }

    /// `isLinkLocalMulticast()` (224.0.0/24, ff02::/16 with any flags).
    pub fn is_link_local_multicast(&self) -> bool {
        match unmap(self.0) {
            IpAddr::V4(a) => a.octets()[..3] == [224, 0, 0],
            IpAddr::V6(a) => a.segments()[0] & 0xff0f == 0xff02,
        }
    }

    /// `isLinkLocalUnicast()` (169.254/16, fe80::/10).
    pub fn is_link_local_unicast(&self) -> bool {
        match unmap(self.0) {
            IpAddr::V4(a) => a.octets()[..2] == [169, 254],
            IpAddr::V6(a) => a.segments()[0] & 0xffc0 == 0xfe80,
        }
    }

    /// `isGlobalUnicast()`: netip's definition, which includes private ranges.
    pub fn is_global_unicast(&self) -> bool {
        let a = unmap(self.0);
        if let IpAddr::V4(v4) = a {
            if v4.is_unspecified() || v4.is_broadcast() {
                return false;
            }
        }
        let multicast = match a {
            IpAddr::V4(v4) => v4.octets()[0] & 0xf0 == 0xe0,
            IpAddr::V6(v6) => v6.octets()[0] == 0xff,
        };
        let ip = Ip(a);
        a != IpAddr::V6(Ipv6Addr::UNSPECIFIED)
            && !ip.is_loopback()
            && !multicast
            && !ip.is_link_local_unicast()
    }
}

fn is_4in6(a: &IpAddr) -> bool {
    matches!(a, IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some())
}

fn unmap(a: IpAddr) -> IpAddr {
    match a {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(a, IpAddr::V4),
        v4 => v4,
    }
}

impl Cidr {
    /// `cidr(s)`.
    pub fn parse(s: &str) -> Result<Cidr, NetError> {
        let cidr = parse_prefix(s).map_err(|e| NetError::CidrParse {
            detail: e.to_string(),
        })?;
        if is_4in6(&cidr.addr) {
            return Err(NetError::CidrMapped(s.to_string()));
        }
        Ok(cidr)
    }

    /// `ip()`: the address as written, not masked.
    pub fn ip(&self) -> Ip {
        Ip(self.addr)
    }

    /// `prefixLength()`.
    pub fn prefix_length(&self) -> i64 {
        i64::from(self.bits)
    }

    /// `masked()`.
    pub fn masked(&self) -> Cidr {
        Cidr {
            addr: mask(self.addr, self.bits),
            bits: self.bits,
        }
    }

    /// `containsIP(ip)`.
    pub fn contains_ip(&self, ip: &Ip) -> bool {
        same_family(self.addr, ip.0) && mask(ip.0, self.bits) == mask(self.addr, self.bits)
    }

    /// `containsIP(string)`: the string goes through `ip()` first; if that
    /// fails the result is a "no such overload" error (not the parse error).
    pub fn contains_ip_str(&self, s: &str) -> Result<bool, NetError> {
        let ip = Ip::parse(s).map_err(|_| NetError::NoSuchOverload)?;
        Ok(self.contains_ip(&ip))
    }

    /// `containsCIDR(cidr)`: overlapping and at least as long a prefix.
    pub fn contains_cidr(&self, other: &Cidr) -> bool {
        self.overlaps(other) && self.bits <= other.bits
    }

    /// `containsCIDR(string)`: the parse error of `cidr()` if it fails.
    pub fn contains_cidr_str(&self, s: &str) -> Result<bool, NetError> {
        Ok(self.contains_cidr(&Cidr::parse(s)?))
    }

    /// `netip.Prefix.Overlaps`.
    fn overlaps(&self, o: &Cidr) -> bool {
        if self == o {
            return true;
        }
        if !same_family(self.addr, o.addr) {
            return false;
        }
        let bits = self.bits.min(o.bits);
        bits == 0 || mask(self.addr, bits) == mask(o.addr, bits)
    }
}

fn same_family(a: IpAddr, b: IpAddr) -> bool {
    a.is_ipv4() == b.is_ipv4()
}

fn mask(a: IpAddr, bits: u8) -> IpAddr {
    match a {
        IpAddr::V4(v4) => {
            let m = u32::MAX.checked_shl(32 - u32::from(bits)).unwrap_or(0);
            IpAddr::V4(Ipv4Addr::from(u32::from(v4) & m))
        }
        IpAddr::V6(v6) => {
            let m = u128::MAX.checked_shl(128 - u32::from(bits)).unwrap_or(0);
            IpAddr::V6(Ipv6Addr::from(u128::from(v6) & m))
        }
    }
}

impl fmt::Display for Ip {
    /// `netip.Addr.String()`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            IpAddr::V4(a) => write!(f, "{a}"),
            IpAddr::V6(a) => match a.to_ipv4_mapped() {
                Some(v4) => write!(f, "::ffff:{v4}"),
                None => f.write_str(&format_v6(&a)),
            },
        }
    }
}

impl fmt::Display for Cidr {
    /// `netip.Prefix.String()`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", Ip(self.addr), self.bits)
    }
}

/// RFC 5952 form as netip prints it: the first longest run of two or more
/// zero groups becomes "::", hex in lower case without leading zeros.
fn format_v6(a: &Ipv6Addr) -> String {
    let seg = a.segments();
    let (mut best_start, mut best_len) = (usize::MAX, 1);
    let mut i = 0;
    while i < 8 {
        let run = seg[i..].iter().take_while(|&&s| s == 0).count();
        if run > best_len {
            (best_start, best_len) = (i, run);
        }
        i += run.max(1);
    }
    let mut out = String::new();
    let mut i = 0;
    while i < 8 {
        if i == best_start {
            out.push_str("::");
            i += best_len;
            continue;
        }
        if i > 0 && !out.ends_with(':') {
            out.push(':');
        }
        out.push_str(&format!("{:x}", seg[i]));
        i += 1;
    }
    out
}

// ---------------------------------------------------------------------------
// netip.ParseAddr and netip.ParsePrefix

/// A `netip` parse error (`ParseAddr("in"): msg (at "rest")`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AddrError {
    input: String,
    msg: &'static str,
    at: Option<String>,
}

impl fmt::Display for AddrError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ParseAddr({}): {}", quote(&self.input), self.msg)?;
        match &self.at {
            Some(at) if !at.is_empty() => write!(f, " (at {})", quote(at)),
            _ => Ok(()),
        }
    }
}

fn addr_err(input: &str, msg: &'static str, at: Option<&[u8]>) -> AddrError {
    AddrError {
        input: input.to_string(),
        msg,
        at: at.map(|b| String::from_utf8_lossy(b).into_owned()),
    }
}

/// `netip.ParseAddr` for the URL parser: whether the address is IPv4, or
/// Go's error text.
pub(crate) fn go_parse_addr(s: &str) -> Result<bool, AddrError> {
    parse_addr(s).map(|(a, _)| a.is_ipv4())
}

/// `netip.ParseAddr`: the address and its zone, if any.
fn parse_addr(s: &str) -> Result<(IpAddr, Option<String>), AddrError> {
    for &c in s.as_bytes() {
        match c {
            b'.' => return parse_v4(s).map(|a| (IpAddr::V4(a), None)),
            b':' => return parse_v6(s),
            b'%' => return Err(addr_err(s, "missing IPv6 address", None)),
            _ => {}
        }
    }
    Err(addr_err(s, "unable to parse IP", None))
}

fn parse_v4(s: &str) -> Result<Ipv4Addr, AddrError> {
    let mut fields = [0u8; 4];
    parse_v4_fields(s, s.as_bytes(), &mut fields)?;
    Ok(Ipv4Addr::from(fields))
}

/// `parseIPv4Fields` over `part` (a suffix of `input`).
fn parse_v4_fields(input: &str, part: &[u8], fields: &mut [u8; 4]) -> Result<(), AddrError> {
    let (mut val, mut pos, mut dig_len) = (0u32, 0usize, 0);
    for (i, &c) in part.iter().enumerate() {
        if c.is_ascii_digit() {
            if dig_len == 1 && val == 0 {
                return Err(addr_err(
                    input,
                    "IPv4 field has octet with leading zero",
                    None,
                ));
            }
            val = val * 10 + u32::from(c - b'0');
            dig_len += 1;
            if val > 255 {
                return Err(addr_err(input, "IPv4 field has value >255", None));
            }
        } else if c == b'.' {
            if i == 0 || i == part.len() - 1 || part[i - 1] == b'.' {
                let msg = "IPv4 field must have at least one digit";
                return Err(addr_err(input, msg, Some(&part[i..])));
            }
            if pos == 3 {
                return Err(addr_err(input, "IPv4 address too long", None));
            }
            fields[pos] = val as u8;
            (pos, val, dig_len) = (pos + 1, 0, 0);
        } else {
            return Err(addr_err(input, "unexpected character", Some(&part[i..])));
        }
    }
    if pos < 3 {
        return Err(addr_err(input, "IPv4 address too short", None));
    }
    fields[3] = val as u8;
    Ok(())
}

fn parse_v6(input: &str) -> Result<(IpAddr, Option<String>), AddrError> {
    let (body, zone) = match input.find('%') {
        Some(i) if i + 1 == input.len() => {
            return Err(addr_err(input, "zone must be a non-empty string", None))
        }
        Some(i) => (&input[..i], Some(input[i + 1..].to_string())),
        None => (input, None),
    };
    let ip = parse_v6_body(input, body.as_bytes())?;
    Ok((IpAddr::V6(Ipv6Addr::from(ip)), zone))
}

/// The group loop of `parseIPv6`.
fn parse_v6_body(input: &str, mut s: &[u8]) -> Result<[u8; 16], AddrError> {
    let mut ip = [0u8; 16];
    let mut ellipsis: Option<usize> = None;
    if s.starts_with(b"::") {
        ellipsis = Some(0);
        s = &s[2..];
        if s.is_empty() {
            return Ok(ip);
        }
    }
    let mut i = 0;
    while i < 16 {
        let (acc, off) = parse_hex_group(input, s)?;
        if off < s.len() && s[off] == b'.' {
            if ellipsis.is_none() && i != 12 {
                let msg = "embedded IPv4 address must replace the final 2 fields of the address";
                return Err(addr_err(input, msg, Some(s)));
            }
            if i + 4 > 16 {
                let msg = "too many hex fields to fit an embedded IPv4 at the end of the address";
                return Err(addr_err(input, msg, Some(s)));
            }
            let mut fields = [0u8; 4];
            parse_v4_fields(input, s, &mut fields)?;
            ip[i..i + 4].copy_from_slice(&fields);
            s = &[];
            i += 4;
            break;
        }
        ip[i] = (acc >> 8) as u8;
        ip[i + 1] = acc as u8;
        i += 2;
        s = &s[off..];
        if s.is_empty() {
            break;
        }
        if s[0] != b':' {
            return Err(addr_err(input, "unexpected character, want colon", Some(s)));
        }
        if s.len() == 1 {
            return Err(addr_err(
                input,
                "colon must be followed by more characters",
                Some(s),
            ));
        }
        s = &s[1..];
        if s[0] == b':' {
            if ellipsis.is_some() {
                return Err(addr_err(input, "multiple :: in address", Some(s)));
            }
            ellipsis = Some(i);
            s = &s[1..];
            if s.is_empty() {
                break;
            }
        }
    }
    if !s.is_empty() {
        return Err(addr_err(input, "trailing garbage after address", Some(s)));
    }
    expand_ellipsis(input, ip, i, ellipsis)
}

/// Up to four hex digits: (value, digits consumed).
fn parse_hex_group(input: &str, s: &[u8]) -> Result<(u32, usize), AddrError> {
    let mut acc = 0u32;
    let mut off = 0;
    while off < s.len() {
        let Some(d) = char::from(s[off]).to_digit(16) else {
            break;
        };
        acc = (acc << 4) + d;
        if off > 3 {
            return Err(addr_err(
                input,
                "each group must have 4 or less digits",
                Some(s),
            ));
        }
        if acc > 0xffff {
            return Err(addr_err(input, "IPv6 field has value >=2^16", Some(s)));
        }
        off += 1;
    }
    if off == 0 {
        let msg = "each colon-separated field must have at least one digit";
        return Err(addr_err(input, msg, Some(s)));
    }
    Ok((acc, off))
}

fn expand_ellipsis(
    input: &str,
    mut ip: [u8; 16],
    i: usize,
    ellipsis: Option<usize>,
) -> Result<[u8; 16], AddrError> {
    match ellipsis {
        None if i < 16 => Err(addr_err(input, "address string too short", None)),
        Some(_) if i >= 16 => Err(addr_err(
            input,
            "the :: must expand to at least one field of zeros",
            None,
        )),
        Some(e) => {
            let n = 16 - i;
            ip.copy_within(e..i, e + n);
            ip[e..e + n].fill(0);
            Ok(ip)
        }
        None => Ok(ip),
    }
}

/// A `netip.ParsePrefix` error, in Go's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("netip.ParsePrefix({}): {msg}", quote(.input))]
struct PrefixError {
    input: String,
    msg: String,
}

/// `netip.ParsePrefix`; the error is Go's full message.
fn parse_prefix(s: &str) -> Result<Cidr, PrefixError> {
    let err = |msg: &str| PrefixError {
        input: s.to_string(),
        msg: msg.to_string(),
    };
    let Some(slash) = s.rfind('/') else {
        return Err(err("no '/'"));
    };
    let (addr, zone) = parse_addr(&s[..slash]).map_err(|e| err(&e.to_string()))?;
    if addr.is_ipv6() && zone.is_some() {
        return Err(err("IPv6 zones cannot be present in a prefix"));
    }
    let bits_str = &s[slash + 1..];
    let bad_bits = || err(&format!("bad bits after slash: {}", quote(bits_str)));
    let b = bits_str.as_bytes();
    if b.len() > 1 && !(b'1'..=b'9').contains(&b[0]) {
        return Err(bad_bits());
    }
    let bits = go_atoi(bits_str).ok_or_else(bad_bits)?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    if !(0..=max).contains(&bits) {
        return Err(err("prefix length out of range"));
    }
    Ok(Cidr {
        addr,
        bits: bits as u8,
    })
}

/// `strconv.Atoi`: optional sign and decimal digits, within int64.
fn go_atoi(s: &str) -> Option<i64> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    s.strip_prefix('+').unwrap_or(s).parse().ok()
}

#[cfg(test)]
#[path = "net_tests.rs"]
mod tests;
