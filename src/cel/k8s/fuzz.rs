//! No-panic loop: random strings, biased towards each parser's alphabet,
//! through every parser and every operation on what parses.

use super::format::NamedFormat;
use super::net::{Cidr, Ip};
use super::quantity::Quantity;
use super::regex::{compile, find, find_all};
use super::semver::Semver;
use super::url::Url;

// The shared test generator: a failure reproduces from its seed.
use crate::test_rng::Rng;

/// Up to `max_len` characters, mostly from `alphabet`.
fn string(rng: &mut Rng, alphabet: &[char], max_len: usize) -> String {
    const EXTRA: [char; 8] = ['\0', '\n', ' ', 'é', '\u{10ffff}', '\u{fffd}', '%', '\\'];
    let len = rng.below(max_len + 1);
    (0..len)
        .map(|_| {
            if rng.below(10) == 0 {
                EXTRA[rng.below(EXTRA.len())]
            } else {
                alphabet[rng.below(alphabet.len())]
            }
        })
        .collect()
}

fn chars(s: &str) -> Vec<char> {
    s.chars().collect()
}

const ROUNDS: usize = 3000;

#[test]
fn quantity_never_panics() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let alphabet = chars("0123456789.+-eEinumkKMGTP0000");
    let mut last = Quantity::from_i64(1);
    for _ in 0..ROUNDS {
        let s = string(&mut rng, &alphabet, 24);
        let Ok(q) = Quantity::parse(&s) else { continue };
        let _ = (
            q.to_string(),
            q.is_integer(),
            q.as_approximate_float(),
            q.sign(),
        );
        let _ = (q.add(&last), q.sub(&last), q.compare_to(&last));
        let _ = (q.add_int(rng.next() as i64), q.sub_int(i64::MIN));
        last = q;
    }
}

#[test]
fn semver_never_panics() {
    let mut rng = Rng(7);
    let alphabet = chars("0123456789.-+vabcxyz");
    let first = Semver::parse("1.0.0").ok();
    for _ in 0..ROUNDS {
        let s = string(&mut rng, &alphabet, 20);
        for normalize in [false, true] {
            if let (Ok(v), Some(w)) = (Semver::parse_with(&s, normalize), &first) {
                let _ = (v.to_string(), v.compare_to(w), v.major_i64());
            }
        }
    }
}

#[test]
fn net_never_panics() {
    let mut rng = Rng(11);
    let alphabet = chars("0123456789abcdefABCDEF:.%/::..");
    let any = Cidr::parse("::/0").ok();
    for _ in 0..ROUNDS {
        let s = string(&mut rng, &alphabet, 45);
        if let Ok(ip) = Ip::parse(&s) {
            let _ = (ip.to_string(), ip.is_global_unicast(), ip.is_loopback());
        }
        if let Ok(c) = Cidr::parse(&s) {
            let _ = (
                c.to_string(),
                c.masked(),
                c.contains_ip_str(&s),
                c.contains_cidr(&c),
            );
        }
        if let Some(c) = &any {
            let _ = (c.contains_ip_str(&s), c.contains_cidr_str(&s));
        }
        let _ = super::net::ip_is_canonical(&s);
    }
}

#[test]
fn url_never_panics() {
    let mut rng = Rng(13);
    let alphabet = chars("htps:/?#[]@%25&=+;:abc.123-_~!*'(),");
    for _ in 0..ROUNDS {
        let s = string(&mut rng, &alphabet, 40);
        if let Ok(u) = Url::parse(&s) {
            let _ = (u.host(), u.hostname(), u.port(), u.escaped_path());
            let _ = (u.query(), u.to_string(), u == u.clone());
        }
    }
}

#[test]
fn format_never_panics() {
    let mut rng = Rng(17);
    let alphabet = chars("abcXYZ019-._/:T+ZAE=");
    for _ in 0..ROUNDS {
        let s = string(&mut rng, &alphabet, 70);
        for f in NamedFormat::ALL {
            let _ = f.validate(&s);
        }
    }
}

#[test]
fn regex_never_panics() {
    let mut rng = Rng(19);
    let alphabet = chars("ab()[]{}|*+?.^$\\-:,0123dDwWsSpPxQEbBAz<>PiU");
    let mut compiled = 0;
    for _ in 0..ROUNDS {
        let s = string(&mut rng, &alphabet, 16);
        if let Ok(re) = compile(&s) {
            compiled += 1;
            let _ = (find(&re, "ab{1}[x]-0 é"), find_all(&re, "aab\nbb ab", 3));
        }
    }
    assert!(compiled > 100, "the alphabet should produce valid patterns");
}
