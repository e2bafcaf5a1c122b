//! Feeds arbitrary bytes to the manifest loader (as YAML and as JSON) and
//! checks that the YAML fast path agrees with the full parser.
//!
//! Run: `cargo +nightly fuzz run manifest` from the repository root.
//! Without cargo-fuzz, `cargo test --lib manifest::fuzz_corpus` runs the
//! same checks over a generated corpus.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    interlock::manifest::fuzz_one(data);
});
