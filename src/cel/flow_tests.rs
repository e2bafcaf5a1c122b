use super::*;
use crate::cel::Env;

const LOOKUP: Tag = 7;
const OBJECT: Tag = 1;

fn env() -> Env {
    let mut env = Env::interlock().with_variables(&["object"]);
    env.add_host_function("lookup", &[1]);
    env
}

fn classify(_: usize, _: &[Option<String>]) -> Option<Tag> {
    Some(LOOKUP)
}

fn reads(exprs: &[&str]) -> Reads {
    let env = env();
    let programs: Vec<Program> = exprs.iter().map(|e| env.compile(e).unwrap()).collect();
    let mut flow = Flow::new(&classify, vec![(0, OBJECT)]);
    for p in &programs {
        flow.result(p);
    }
    flow.finish()
}

fn paths(set: &BTreeSet<(Tag, Path)>, tag: Tag) -> Vec<String> {
    set.iter()
        .filter(|(t, _)| *t == tag)
        .map(|(_, p)| p.join("."))
        .collect()
}

#[test]
fn existence_checks_read_no_field() {
    let r = reads(&["lookup('a').hasValue()", "lookup('b').size() > 0"]);
    assert!(paths(&r.whole, LOOKUP).is_empty(), "{r:?}");
    assert!(paths(&r.accessed, LOOKUP).is_empty());
}

#[test]
fn selected_fields_are_followed_through_macros_and_optionals() {
    let r = reads(&[
        "lookup('a').filter(w, w.spec.?replicas.orValue(1) > 2).map(w, w.metadata.name)",
        "lookup('a').value().spec.selector.matchLabels.app == 'x'",
    ]);
    assert_eq!(
        paths(&r.whole, LOOKUP),
        [
            "metadata.name",
            "spec.replicas",
            "spec.selector.matchLabels.app"
        ]
    );
    assert!(paths(&r.accessed, LOOKUP).contains(&"spec.selector".to_string()));
}

#[test]
fn list_concatenation_and_bind_keep_origins() {
    let r = reads(&[
        "cel.bind(all, lookup('a') + lookup('b'), all.map(w, int(w.spec.replicas)).sum())",
    ]);
    assert_eq!(paths(&r.whole, LOOKUP), ["spec.replicas"]);
}

#[test]
fn unknown_uses_read_the_whole_value() {
    let r = reads(&["string(lookup('a').value()) != ''"]);
    assert_eq!(paths(&r.whole, LOOKUP), [""]);
    let r = reads(&["lookup('a').value()[object.metadata.name] == 1"]);
    assert_eq!(paths(&r.whole, LOOKUP), [""]);
}

#[test]
fn iterating_a_field_reads_its_elements() {
    let r = reads(&["lookup('a').all(w, w.spec.containers.all(c, c.image != ''))"]);
    assert_eq!(paths(&r.whole, LOOKUP), ["spec.containers.image"]);
    assert_eq!(paths(&r.ranged, LOOKUP), ["spec.containers"]);
}

#[test]
fn seeded_variables_are_tracked() {
    let r = reads(&["object.spec.rules.map(r, r.host)"]);
    assert_eq!(paths(&r.whole, OBJECT), ["spec.rules.host"]);
    assert_eq!(paths(&r.ranged, OBJECT), ["spec.rules"]);
}

#[test]
fn results_that_leave_cel_are_read_whole() {
    let r = reads(&["lookup('a').map(w, w.metadata)"]);
    assert_eq!(paths(&r.whole, LOOKUP), ["metadata"]);
}
