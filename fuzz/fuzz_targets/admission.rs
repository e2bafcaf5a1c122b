//! Feeds arbitrary bytes as the body of `POST /validate` and `/mutate` to the
//! function the server answers with, over the real engine (bundled
//! policies, a small inventory), and checks the answer is well-formed:
//! 200 with an AdmissionReview carrying the request's uid, or 4xx/5xx with
//! a JSON AdmissionReview body.
//!
//! Run: `cargo +nightly fuzz run admission -- -max_total_time=180` from the
//! repository root. `tests/integration/admission_robustness.rs` runs seeded mutations
//! of the same kind in the normal test suite.
#![no_main]

#[path = "../../tests/support/admission_engine.rs"]
mod admission_engine;

use interlock::admission::Engine;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use std::sync::OnceLock;

fn engine() -> &'static Engine {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    ENGINE.get_or_init(admission_engine::engine)
}

/// The request uid, if the body is JSON with a string `request.uid`.
fn uid_of(data: &[u8]) -> Option<String> {
    let v: Value = serde_json::from_slice(data).ok()?;
    v.get("request")?.get("uid")?.as_str().map(str::to_owned)
}

fuzz_target!(|data: &[u8]| {
    let engine = engine();
    for mutate in [false, true] {
        let (status, body) = interlock::server::answer_body(engine, mutate, data);
        let answer: Value = serde_json::from_slice(&body).expect("the answer is JSON");
        assert_eq!(answer["kind"], "AdmissionReview", "{answer}");
        let resp = &answer["response"];
        assert!(resp["allowed"].is_boolean(), "{answer}");
        match status {
            200 => {
                let uid = uid_of(data).expect("a 200 answers a request with a uid");
                assert_eq!(resp["uid"], Value::String(uid), "{answer}");
            }
            400..=599 => {
                assert_eq!(resp["allowed"], false, "{answer}");
                assert_eq!(resp["status"]["code"], status, "{answer}");
            }
            other => panic!("unexpected status {other}: {answer}"),
        }
    }
});
