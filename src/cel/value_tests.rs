use super::*;

// The shared test generator (the same xorshift this file kept a copy of).
use crate::test_rng::Rng;

fn below(r: &mut Rng, n: u64) -> u64 {
    r.next() % n
}

/// A JSON text's value, drawn from `r`.
fn json(r: &mut Rng, depth: u32) -> Json {
    match below(r, if depth == 0 { 6 } else { 9 }) {
        0 => Json::Null,
        1 => Json::Bool(below(r, 2) == 0),
        2 => serde_json::json!(below(r, 100) as f64 / 8.0 - 3.0),
        3 => serde_json::json!([i64::MIN, -1, 0, 7, i64::MAX][below(r, 5) as usize]),
        4 => serde_json::json!(u64::MAX - below(r, 2)),
        5 => Json::String(format!("s\\\"{}é", below(r, 10))),
        6 | 7 => Json::Object(
            (0..below(r, 5))
                .map(|_| {
                    (
                        ["a", "b", "c"][below(r, 3) as usize].to_string(),
                        json(r, depth - 1),
                    )
                })
                .collect(),
        ),
        _ => Json::Array((0..below(r, 4)).map(|_| json(r, depth - 1)).collect()),
    }
}

/// The value of a tree, owned: what `from_json_slice` must give.
fn owned(j: &Json) -> Value<'static> {
    match j {
        Json::String(s) => Value::string(s.as_str()),
        Json::Array(a) => Value::list(a.iter().map(owned).collect()),
        Json::Object(m) => Value::map(
            m.iter()
                .map(|(k, v)| (Key::String(Str::Shared(k.as_str().into())), owned(v)))
                .collect(),
        ),
        Json::Null => Value::Null,
        Json::Bool(b) => Value::Bool(*b),
        Json::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Value::Int(i),
            (None, Some(u)) => Value::Uint(u),
            _ => Value::Double(n.as_f64().unwrap_or(f64::NAN)),
        },
    }
}

#[test]
fn json_text_parses_to_the_value_of_its_tree() {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    for _ in 0..20_000 {
        let text = json(&mut rng, 4).to_string();
        let tree: Json = serde_json::from_str(&text).expect("valid");
        let direct = Value::from_json_slice(text.as_bytes()).expect("parses");
        let via_tree = owned(&tree);
        assert_eq!(format!("{direct:?}"), format!("{via_tree:?}"), "{text}");
    }
    // Duplicate keys: the last value, in the first one's place.
    let dup = br#"{"a": 1, "b": 2, "a": 3}"#;
    let tree: Json = serde_json::from_slice(dup).unwrap();
    assert_eq!(
        format!("{:?}", Value::from_json_slice(dup).unwrap()),
        format!("{:?}", owned(&tree))
    );
    assert!(Value::from_json_slice(b"{\"a\": 1e999}").is_err());
    assert!(Value::from_json_slice(b"[1,]").is_err());
}
