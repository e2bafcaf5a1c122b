use super::*;

#[test]
fn a_literal_is_kept_once_and_long_ones_are_shared() {
    let a = literal(&Arc::from("interned-literal"));
    let b = literal(&Arc::from("interned-literal"));
    match (a, b) {
        (Str::Borrowed(a), Str::Borrowed(b)) => {
            assert!(std::ptr::eq(a, b), "one copy per distinct literal")
        }
        other => panic!("not interned: {other:?}"),
    }
    let long: Arc<str> = "x".repeat(MAX_LEN + 1).into();
    assert!(matches!(literal(&long), Str::Shared(s) if Arc::ptr_eq(&s, &long)));
}
