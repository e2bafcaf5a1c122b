//! `serde_json::Value::pointer` without its allocations: serde_json makes a
//! `String` of every segment (to undo `~1` and `~0`), and `check` reads a
//! dozen fixed pointers of every object it loads.

use std::borrow::Cow;

use serde_json::Value as Json;

/// [`Json::pointer`] and [`Json::pointer_mut`], with the same answers.
pub(crate) trait JsonAt {
    fn at(&self, pointer: &str) -> Option<&Json>;
    fn at_mut(&mut self, pointer: &str) -> Option<&mut Json>;
}

impl JsonAt for Json {
    fn at(&self, pointer: &str) -> Option<&Json> {
        segments(pointer)?.try_fold(self, |v, segment| step(v, &segment))
    }

    fn at_mut(&mut self, pointer: &str) -> Option<&mut Json> {
        segments(pointer)?.try_fold(self, |v, segment| step_mut(v, &segment))
    }
}

/// The pointer's reference tokens, unescaped; `None` when it is not a
/// pointer at all (non-empty without a leading `/`).
fn segments(pointer: &str) -> Option<impl Iterator<Item = Cow<'_, str>>> {
    let tokens = match pointer {
        "" => None,
        p => Some(p.strip_prefix('/')?.split('/')),
    };
    Some(tokens.into_iter().flatten().map(unescape))
}

/// The segment with `~1` and `~0` undone (RFC 6901), borrowed when it has
/// none.
fn unescape(segment: &str) -> Cow<'_, str> {
    if segment.contains('~') {
        Cow::Owned(segment.replace("~1", "/").replace("~0", "~"))
    } else {
        Cow::Borrowed(segment)
    }
}

fn step<'v>(v: &'v Json, segment: &str) -> Option<&'v Json> {
    match v {
        Json::Object(m) => m.get(segment),
        Json::Array(a) => index(segment).and_then(|i| a.get(i)),
        _ => None,
    }
}

fn step_mut<'v>(v: &'v mut Json, segment: &str) -> Option<&'v mut Json> {
    match v {
        Json::Object(m) => m.get_mut(segment),
        Json::Array(a) => index(segment).and_then(move |i| a.get_mut(i)),
        _ => None,
    }
}

/// A list index as serde_json reads one: digits, no sign, no leading zero.
fn index(segment: &str) -> Option<usize> {
    if segment.starts_with('+') || (segment.starts_with('0') && segment.len() != 1) {
        return None;
    }
    segment.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::JsonAt;
    use serde_json::json;

    #[test]
    fn answers_as_serde_json_pointer() {
        let mut v = json!({"a/b": {"c~d": [1, {"e": 2}]}, "": {"x": 3}, "l": [0, 1]});
        for p in [
            "",
            "/",
            "/a~1b",
            "/a~1b/c~0d",
            "/a~1b/c~0d/1/e",
            "/a~1b/c~0d/01",
            "/a~1b/c~0d/+1",
            "/a~1b/c~0d/2",
            "//x",
            "/l/0",
            "/l/-1",
            "/missing/x",
            "a",
            "/l/1/z",
        ] {
            assert_eq!(v.at(p), v.pointer(p), "{p}");
            let expected = v.pointer(p).cloned();
            assert_eq!(v.at_mut(p).map(|x| x.clone()), expected, "{p}");
        }
        *v.at_mut("/a~1b/c~0d/1/e").unwrap() = json!(5);
        assert_eq!(v["a/b"]["c~d"][1]["e"], 5);
    }
}
