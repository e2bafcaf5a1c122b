//! The YAML loader under random and damaged input.

use super::*;

// The shared test generator: a failure reproduces from its seed.
use crate::test_rng::Rng;

fn pick<'a>(rng: &mut Rng, items: &[&'a str]) -> &'a str {
    items[rng.below(items.len())]
}

const SCALARS: &[&str] = &[
    "a",
    "web",
    "yes",
    "No",
    "on",
    "~",
    "null",
    "",
    "0",
    "-1",
    "0x1F",
    "0o17",
    "017",
    "08",
    "1_000",
    "1.5",
    ".5",
    "1e3",
    ".inf",
    "-.Inf",
    ".nan",
    "2024-01-01",
    "1.2.3",
    "500m",
    "http://h:80/p",
    "a#b",
    "a #c",
    "'q'",
    "'it''s'",
    "\"d\\n\\u00e9\"",
    "\"\\x41\"",
    "\"bad\\q\"",
    "[]",
    "{}",
    "[a, 'b', 1]",
    "{a: 1, b: x}",
    "[a, [b]]",
    "&x v",
    "*x",
    "!!str 1",
    "!!int x",
    "|",
    "|-",
    ">",
    "ü",
    "a: b",
    "- x",
    "@x",
    "`x",
    "<<",
    "%x",
    "\"unterminated",
    "[a,]",
    "\t",
    "x\ty",
];
const KEYS: &[&str] = &[
    "a", "b", "name", "on", "1", "1.5", "~", "\"q k\"", "'s'", "<<", "a b", "k:", "-k", "? k",
    "x#y", "ü",
];

/// A random YAML document, mostly in the fast path's subset.
fn random_yaml(rng: &mut Rng, depth: usize, indent: usize, out: &mut String) {
    let pad = " ".repeat(indent);
    let entries = 1 + rng.below(4);
    let seq = rng.below(3) == 0;
    for i in 0..entries {
        if rng.below(12) == 0 {
            out.push_str(&format!("{pad}# comment {i}\n"));
        }
        if rng.below(15) == 0 {
            out.push('\n');
        }
        let lead = if seq {
            format!("{pad}- ")
        } else {
            format!("{pad}{}:", pick(rng, KEYS))
        };
        match rng.below(6) {
            0 | 1 if depth > 0 => {
                if seq && rng.below(2) == 0 {
                    // Compact mapping in a sequence item.
                    out.push_str(&format!(
                        "{lead}{}: {}\n",
                        pick(rng, KEYS),
                        pick(rng, SCALARS)
                    ));
                    random_yaml(rng, depth - 1, indent + 2, out);
                } else {
                    out.push_str(lead.trim_end());
                    out.push('\n');
                    let extra = if !seq && rng.below(4) == 0 { 0 } else { 2 };
                    random_yaml(rng, depth - 1, indent + extra, out);
                }
            }
            2 => {
                let chomp = pick(rng, &["|", "|-", "|+", ">", "|2"]);
                let sep = if seq { "" } else { " " };
                out.push_str(&format!("{lead}{sep}{chomp}\n"));
                for _ in 0..rng.below(4) {
                    let extra = " ".repeat(rng.below(3));
                    let text = pick(rng, SCALARS);
                    if rng.below(5) == 0 {
                        out.push('\n');
                    }
                    out.push_str(&format!("{pad}  {extra}{text}\n"));
                }
            }
            _ => {
                let sep = if seq { "" } else { " " };
                let mut v = pick(rng, SCALARS).to_string();
                if rng.below(8) == 0 {
                    v.push_str(" # trailing");
                }
                if rng.below(10) == 0 {
                    v.push(' ');
                }
                out.push_str(&format!("{lead}{sep}{v}\n"));
            }
        }
    }
}

/// Byte-level damage: flips, inserts of YAML-significant bytes, deletions.
fn mutate(rng: &mut Rng, s: &str) -> Vec<u8> {
    let mut b = s.as_bytes().to_vec();
    for _ in 0..rng.below(4) {
        let at = rng.below(b.len() + 1);
        match rng.below(4) {
            0 if !b.is_empty() => {
                let end = (at + rng.below(8)).min(b.len());
                b.drain(at.min(end)..end);
            }
            1 => {
                let ins = *b": -#'\"[]{}&*!|>\t\r\n ,?%@\\"
                    .get(rng.below(25))
                    .unwrap_or(&b' ');
                b.insert(at, ins);
            }
            2 if !b.is_empty() => {
                let i = at.min(b.len() - 1);
                b[i] ^= 1 << rng.below(8);
            }
            _ => {
                let end = (at + rng.below(16)).min(b.len());
                let piece = b[at.min(end)..end].to_vec();
                b.splice(at..at, piece);
            }
        }
    }
    b
}

/// The fuzz target's checks over a generated corpus, for machines without
/// cargo-fuzz: `INTERLOCK_FUZZ_ITERATIONS=200000 cargo test --release --lib
/// manifest::tests::fuzz::fuzz_corpus` runs longer.
#[test]
fn fuzz_corpus() {
    let iterations: usize = std::env::var("INTERLOCK_FUZZ_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let seeds = [
        CM.to_string(),
        synthetic_stream(4),
        "{\"apiVersion\": \"v1\", \"kind\": \"List\", \"items\": [{\"a\": [1, 2.0, \"x\"]}]}"
            .to_string(),
        "a: &x [1, 2]\nb: *x\nc:\n  <<: {d: 1}\n".to_string(),
    ];
    let mut fast_taken = 0;
    for i in 0..iterations {
        let mut doc = String::new();
        if i % 3 == 0 {
            doc.push_str(&seeds[rng.below(seeds.len())]);
        } else {
            if rng.below(4) == 0 {
                doc.push_str("---\n");
            }
            random_yaml(&mut rng, 3, 0, &mut doc);
        }
        let bytes = if rng.below(3) == 0 {
            mutate(&mut rng, &doc)
        } else {
            doc.into_bytes()
        };
        fuzz_one(&bytes);
        if let Ok(t) = std::str::from_utf8(&bytes) {
            fast_taken += yaml::compare_paths(t, &LoadOptions::default()).unwrap_or(0);
        }
    }
    assert!(
        fast_taken > iterations / 10,
        "the fast path took only {fast_taken} of {iterations} inputs"
    );
}
