//! Runs the CEL specification's conformance cases (tests/data/cel-spec, vendored)
//! through our engine, prints the pass rate per file and in total, and fails
//! when the total drops below the ratchet in tests/cel-conformance-ratchet.txt.

use interlock::cel::{Activation, Env, Key, Type, Value};
use serde_json::Value as Json;
use std::collections::BTreeMap;
use std::path::PathBuf;

const SKIP_FILES: &[(&str, &str)] = &[
    ("proto2", "protobuf messages; Kubernetes objects are JSON"),
    ("proto2_ext", "protobuf extensions"),
    ("proto3", "protobuf messages"),
    ("enums", "protobuf enums"),
    ("wrappers", "protobuf wrapper types"),
    ("block_ext", "cel.block is a cel-go internal optimisation"),
    ("unknowns", "empty"),
    (
        "type_deduction",
        "needs a full type checker (counted separately when we have one)",
    ),
];

fn spec_dir() -> PathBuf {
    std::env::var_os("INTERLOCK_CEL_SPEC_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/cel-spec"))
}

/// Why a case does not apply to a Kubernetes-dialect engine, if it doesn't.
fn skip_reason(t: &Json) -> Option<&'static str> {
    let text = t.to_string();
    if text.contains("TestAllTypes") || text.contains("google.protobuf.") {
        return Some("protobuf message types");
    }
    if t.get("container").is_some() {
        return Some("sets a container (protobuf packages)");
    }
    if t.get("typed_result").is_some() {
        return Some("expects a deduced type");
    }
    if t.get("check_only").is_some() {
        return Some("check only");
    }
    None
}

fn value_from_proto(v: &Json) -> Result<Value<'static>, String> {
    let (k, x) = v
        .as_object()
        .and_then(|m| m.iter().next())
        .ok_or("empty value")?;
    Ok(match k.as_str() {
        "null_value" => Value::Null,
        "bool_value" => Value::Bool(x.as_bool().ok_or("bool")?),
        "int64_value" => Value::Int(
            x.as_str()
                .map(|s| s.parse().map_err(|_| "int"))
                .unwrap_or_else(|| x.as_i64().ok_or("int"))?,
        ),
        "uint64_value" => Value::Uint(
            x.as_str()
                .map(|s| s.parse().map_err(|_| "uint"))
                .unwrap_or_else(|| x.as_u64().ok_or("uint"))?,
        ),
        "double_value" => Value::Double(match x {
            Json::String(s) if s == "NaN" => f64::NAN,
            Json::String(s) if s == "Infinity" => f64::INFINITY,
            Json::String(s) if s == "-Infinity" => f64::NEG_INFINITY,
            _ => x.as_f64().ok_or("double")?,
        }),
        "string_value" => Value::string(x.as_str().ok_or("string")?),
        "bytes_value" => {
            use base64::Engine;
            let b = base64::engine::general_purpose::STANDARD
                .decode(x.as_str().ok_or("bytes")?)
                .map_err(|e| e.to_string())?;
            Value::Bytes(b.into())
        }
        "list_value" => {
            let items = x
                .get("values")
                .and_then(Json::as_array)
                .cloned()
                .unwrap_or_default();
            Value::list(
                items
                    .iter()
                    .map(value_from_proto)
                    .collect::<Result<_, _>>()?,
            )
        }
        "map_value" => {
            let mut m = interlock::cel::value::OwnedMap::default();
            for e in x
                .get("entries")
                .and_then(Json::as_array)
                .cloned()
                .unwrap_or_default()
            {
                let k = value_from_proto(e.get("key").ok_or("key")?)?;
                let v = value_from_proto(e.get("value").ok_or("value")?)?;
                m.insert(Key::from_value(&k).map_err(|e| e.to_string())?, v);
            }
            Value::map(m)
        }
        "type_value" => {
            let name = x.as_str().ok_or("type")?;
            Value::Type(Type::from_name(name).unwrap_or(Type::Named(name.into())))
        }
        other => return Err(format!("unsupported expected value kind {other}")),
    })
}

/// Strict equality for checking results: same types all the way down.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Double(x), Value::Double(y)) => (x.is_nan() && y.is_nan()) || x == y,
        (Value::List(x), Value::List(y)) => {
            x.len() == y.len() && x.iter().zip(y.iter()).all(|(p, q)| same(&p, &q))
        }
        (Value::Map(x), Value::Map(y)) => {
            x.len() == y.len()
                && x.entries().iter().all(|(k, v)| {
                    y.entries()
                        .iter()
                        .any(|(k2, v2)| same(k, k2) && same(v, v2))
                })
        }
        _ => a.type_of() == b.type_of() && a.equals(b),
    }
}

enum Outcome {
    Pass,
    Fail(String),
}

fn run_case(t: &Json) -> Outcome {
    let expr = t["expr"].as_str().unwrap_or_default();
    let mut env = Env::conformance();
    env.unchecked = t.get("disable_check").is_some();
    let mut names: Vec<String> = Vec::new();
    if let Some(decls) = t.get("type_env").and_then(Json::as_array) {
        for d in decls.iter().filter(|d| d.get("ident").is_some()) {
            names.push(d["name"].as_str().unwrap_or_default().to_string());
        }
    }
    let bindings = t
        .get("bindings")
        .and_then(Json::as_object)
        .cloned()
        .unwrap_or_default();
    names.extend(bindings.keys().cloned());
    for n in &names {
        env.add_variable(n);
    }
    let expects_error = t.get("eval_error").is_some() || t.get("any_eval_errors").is_some();
    let program = match env.compile(expr) {
        Ok(p) => p,
        Err(e) if expects_error && t.get("disable_check").is_some() => {
            // Without the checker cel-go reports this at run time; we report
            // it one step earlier, which is still an error.
            let _ = e;
            return Outcome::Pass;
        }
        Err(e) => return Outcome::Fail(format!("compile error: {e}")),
    };
    let mut values = Vec::new();
    for (name, b) in &bindings {
        match b.get("value").map(value_from_proto) {
            Some(Ok(v)) => values.push((name.clone(), v)),
            Some(Err(e)) => return Outcome::Fail(format!("binding {name}: {e}")),
            None => return Outcome::Fail(format!("binding {name} has no value")),
        }
    }
    let mut act = Activation::new(&env);
    for (name, v) in values {
        if let Some(slot) = env.variable_slot(&name) {
            act.set(slot, v);
        }
    }
    let got = program.eval(&act);
    // A case with no expectation expects `true` (cel-spec's default).
    let default = serde_json::json!({"bool_value": true});
    let want = match t.get("value") {
        None if !expects_error => Some(&default),
        v => v,
    };
    match (want, got) {
        (Some(want), Ok(got)) => match value_from_proto(want) {
            Ok(w) if same(&w, &got) => Outcome::Pass,
            Ok(w) => Outcome::Fail(format!("want {w}, got {got}")),
            Err(e) => Outcome::Fail(e),
        },
        (Some(want), Err(e)) => Outcome::Fail(format!("want {want}, got error {e}")),
        (None, Err(_)) if expects_error => Outcome::Pass,
        (None, Ok(got)) if expects_error => Outcome::Fail(format!("want an error, got {got}")),
        (None, r) => Outcome::Fail(format!(
            "no expectation understood; got {:?}",
            r.map(|v| v.to_string())
        )),
    }
}

#[test]
fn cel_spec_conformance() {
    let dir = spec_dir();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| {
            panic!(
                "cannot read the CEL conformance cases at {}: {e}; set INTERLOCK_CEL_SPEC_DIR",
                dir.display()
            )
        })
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let verbose = std::env::var_os("CEL_CONFORMANCE_VERBOSE").is_some();
    let (mut pass, mut total) = (0usize, 0usize);
    let mut skipped: BTreeMap<&str, usize> = BTreeMap::new();
    println!("CEL conformance (cel-spec simple tests):");
    for f in files {
        let stem = f
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default()
            .to_string();
        if let Some((_, why)) = SKIP_FILES.iter().find(|(n, _)| *n == stem) {
            println!("  {stem:<14} skipped: {why}");
            continue;
        }
        let doc: Json =
            serde_json::from_str(&std::fs::read_to_string(&f).expect("read")).expect("json");
        let (mut fp, mut ft) = (0, 0);
        for section in doc["section"].as_array().cloned().unwrap_or_default() {
            for t in section["test"].as_array().cloned().unwrap_or_default() {
                if let Some(why) = skip_reason(&t) {
                    *skipped.entry(why).or_default() += 1;
                    continue;
                }
                ft += 1;
                let outcome = std::panic::catch_unwind(|| run_case(&t))
                    .unwrap_or_else(|_| Outcome::Fail("PANIC".into()));
                match outcome {
                    Outcome::Pass => fp += 1,
                    Outcome::Fail(why) => {
                        if verbose {
                            println!(
                                "    FAIL {stem}/{}/{}: {} => {why}",
                                section["name"].as_str().unwrap_or(""),
                                t["name"].as_str().unwrap_or(""),
                                t["expr"].as_str().unwrap_or("")
                            );
                        }
                    }
                }
            }
        }
        println!(
            "  {stem:<14} {fp:>4}/{ft:<4} {:>6.1}%",
            100.0 * fp as f64 / ft.max(1) as f64
        );
        pass += fp;
        total += ft;
    }
    for (why, n) in &skipped {
        println!("  skipped {n} case(s): {why}");
    }
    println!(
        "  TOTAL          {pass:>4}/{total:<4} {:>6.1}%",
        100.0 * pass as f64 / total.max(1) as f64
    );
    let ratchet: usize = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/cel-conformance-ratchet.txt"),
    )
    .ok()
    .and_then(|s| s.trim().parse().ok())
    .unwrap_or(0);
    assert!(
        total >= 1600,
        "expected about 1,673 applicable cases, found {total}: is the data complete?"
    );
    assert!(
        pass >= ratchet,
        "conformance fell to {pass} passing cases, below the ratchet of {ratchet}"
    );
}
