//! Hostile expressions get errors, never a panic, a stack overflow or a hang:
//! deep nesting, huge inputs, runaway comprehensions, and mutations of every
//! conformance expression.

use crate::support::rng;

use interlock::cel::{Activation, Env};
use rng::Rng;
use serde_json::Value as Json;
use std::path::PathBuf;

fn compile_and_run(env: &Env, src: &str) {
    if let Ok(p) = env.compile(src) {
        let act = Activation::new(env);
        let _ = p.eval(&act);
    }
}

#[test]
fn deep_nesting_is_a_compile_error_not_a_stack_overflow() {
    let env = Env::kubernetes();
    for (open, close) in [
        ("(", ")"),
        ("[", "]"),
        ("{1: ", "}"),
        // A run of one prefix operator is flat in cel-go's grammar (an even
        // run cancels out); with parentheses each one nests.
        ("!(", ")"),
        ("-(", ")"),
        ("a.all(x, ", ")"),
    ] {
        let src = format!("{}1{}", open.repeat(10_000), close.repeat(10_000));
        let err = env
            .compile(&src)
            .expect_err("10,000 levels must not compile");
        assert!(
            err.message.contains("recursion limit") || err.message.contains("exceeds limit"),
            "{open}: {}",
            err.message
        );
    }
    // 100 levels are fine.
    assert!(env
        .compile(&format!("{}1{}", "(".repeat(100), ")".repeat(100)))
        .is_ok());
}

#[test]
fn oversized_expressions_are_refused() {
    let env = Env::kubernetes();
    let src = "1 + ".repeat(30_000) + "1";
    let err = env.compile(&src).expect_err("too long");
    assert!(err.message.contains("exceeds limit"), "{}", err.message);
}

#[test]
fn runaway_evaluation_hits_the_cost_limit() {
    let env = Env::interlock();
    let p = env
        .compile(
            "lists.range(1000).map(x, lists.range(1000).map(y, lists.range(1000).size())).size()",
        )
        .unwrap();
    let err = p.eval(&Activation::new(&env)).expect_err("must be cut off");
    assert!(err.message().contains("cost limit"), "{err}");
    let p = env.compile("'ab'.repeat(1)").map(|_| ()).err();
    assert!(p.is_some(), "unknown functions are compile errors");
}

#[test]
fn compile_errors_show_position_and_caret() {
    let env = Env::kubernetes().with_variables(&["object"]);
    let err = env.compile("object.x && objct.y").unwrap_err();
    let text = err.to_string();
    assert!(
        text.starts_with("ERROR: <input>:1:13: undeclared reference to 'objct'"),
        "{text}"
    );
    assert!(text.ends_with(" | ............^"), "{text}");
    assert!(
        env.compile("size(1, 2, 3)").is_err(),
        "wrong arity is a compile error"
    );
    assert!(
        env.compile("[1, 'a']").is_err(),
        "mixed literal is a compile error"
    );
    assert!(
        env.compile("duration('1x')").is_err(),
        "bad duration literal is a compile error"
    );
    assert!(
        env.compile("'a'.matches('(')").is_err(),
        "bad regex literal is a compile error"
    );
    assert!(
        env.compile("cel.bind(x, 1, x)").is_err(),
        "cel.bind is not in the Kubernetes environment"
    );
    assert!(Env::interlock().compile("cel.bind(x, 1, x)").is_ok());
}

fn conformance_expressions() -> Vec<String> {
    let dir = std::env::var_os("INTERLOCK_CEL_SPEC_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/cel-spec"));
    let mut out = Vec::new();
    for e in std::fs::read_dir(&dir).expect("conformance data").flatten() {
        let Ok(text) = std::fs::read_to_string(e.path()) else {
            continue;
        };
        let Ok(doc) = serde_json::from_str::<Json>(&text) else {
            continue;
        };
        for s in doc["section"].as_array().into_iter().flatten() {
            for t in s["test"].as_array().into_iter().flatten() {
                if let Some(x) = t["expr"].as_str() {
                    out.push(x.to_string());
                }
            }
        }
    }
    out
}

#[test]
fn mutated_expressions_never_panic() {
    let exprs = conformance_expressions();
    assert!(exprs.len() > 1000);
    let envs = [Env::kubernetes(), Env::interlock(), Env::conformance()];
    let tokens = [
        "(",
        ")",
        "[",
        "]",
        "{",
        "}",
        ".",
        ".?",
        "?",
        ":",
        ",",
        "'",
        "\"",
        "\\",
        "u",
        "-",
        "!",
        "&&",
        "||",
        "in",
        "map",
        "all(",
        "x",
        "1u",
        "1.5",
        "b'",
        "r'",
        "''' ",
        "\u{1F600}",
        "\u{0}",
        "9223372036854775808",
        "e",
        "has(",
    ];
    // CEL_FUZZ_ROUNDS raises the mutations per expression for a longer run.
    let rounds: usize = std::env::var("CEL_FUZZ_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4);
    let seed: u64 = std::env::var("CEL_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x9E37_79B9_7F4A_7C15);
    let mut rng = Rng(seed);
    for (i, src) in exprs.iter().enumerate() {
        let env = &envs[i % envs.len()];
        compile_and_run(env, src);
        for _ in 0..rounds {
            let mut s: Vec<char> = src.chars().collect();
            match rng.below(3) {
                0 if !s.is_empty() => {
                    let at = rng.below(s.len());
                    s.remove(at);
                }
                1 => {
                    let at = rng.below(s.len() + 1);
                    let tok = tokens[rng.below(tokens.len())];
                    for (k, c) in tok.chars().enumerate() {
                        s.insert(at + k, c);
                    }
                }
                _ if !s.is_empty() => {
                    let a = rng.below(s.len());
                    let b = rng.below(s.len());
                    s.swap(a, b);
                }
                _ => {}
            }
            compile_and_run(env, &s.into_iter().collect::<String>());
        }
    }
}

#[test]
fn huge_format_precision_is_an_error_not_a_panic() {
    let env = Env::kubernetes();
    // A literal format call is validated when it compiles.
    let err = match env.compile("'%.99999f'.format([1.0])") {
        Err(e) => e.message,
        Ok(p) => p
            .eval(&Activation::new(&env))
            .expect_err("precision is bounded")
            .message()
            .to_string(),
    };
    assert!(err.contains("precision"), "{err}");
}
