use super::*;

#[test]
fn keys_and_indexes_do_not_collide() {
    assert_ne!(child_key(ROOT, "0"), child_index(ROOT, 0));
    assert_ne!(
        child_key(child_key(ROOT, "a"), "bc"),
        child_key(child_key(ROOT, "ab"), "c")
    );
    assert_ne!(child_index(ROOT, 1), child_index(ROOT, 256));
}

#[test]
fn index_lookup() {
    let a = child_key(ROOT, "a");
    let b = child_key(ROOT, "b");
    let idx = PositionIndex::from_entries(vec![(b, 7), (a, 3)]);
    assert_eq!(idx.get(a), Some(3));
    assert_eq!(idx.get(b), Some(7));
    assert_eq!(idx.get(ROOT), None);
    assert_eq!(idx.len(), 2);
}
