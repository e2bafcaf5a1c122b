//! Feeds arbitrary text to the CEL parser, compiler and evaluator in each
//! environment, with an object bound: no panic, no stack overflow, no hang
//! (the cost budget bounds evaluation).
//!
//! Run: `cargo +nightly fuzz run cel` from the repository root.
#![no_main]

use interlock::cel::{Activation, Env, Value};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let src = String::from_utf8_lossy(data);
    let object = serde_json::json!({"metadata": {"name": "a", "labels": {"x": "y"}},
        "spec": {"containers": [{"name": "c", "image": "r/i:1"}], "replicas": 3}});
    for env in [Env::kubernetes(), Env::interlock(), Env::conformance()] {
        let env = env.with_variables(&["object"]);
        if let Ok(p) = env.compile(&src) {
            let mut act = Activation::new(&env);
            act.set(0, Value::from_json(&object));
            let _ = p.eval(&act);
        }
    }
});
