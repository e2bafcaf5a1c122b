//! The cost and memory budgets and the interrupt: expressions that used to
//! run for seconds or build gigabytes within their cost budget now stop
//! early with kube-apiserver's error, and a set interrupt stops a running
//! evaluation.

use super::interrupt::{self, Interrupt};
use super::{Activation, Env, EvalResult, Value};
use serde_json::json;
use std::time::{Duration, Instant};

const COST_ERROR: &str = "operation cancelled: actual cost limit exceeded";
const MIB: usize = 1 << 20;

/// Evaluates `src` with `object` bound to `{s, t: two equal 1 MiB strings,
/// small: 200 bytes}` under `limit` (kube-apiserver's per-expression limit
/// unless told otherwise).
fn run(src: &str, limit: Option<u64>) -> EvalResult<bool> {
    let object = json!({
        "s": "a".repeat(MIB),
        "t": "a".repeat(MIB),
        "small": "b".repeat(200),
    });
    let mut env = Env::interlock();
    let slot = env.add_variable("object");
    let program = env.compile(src).expect("compiles");
    let mut act = Activation::new(&env).with_current_interrupt();
    if let Some(limit) = limit {
        act = act.with_cost_limit(limit);
    }
    act.set(slot, Value::from_json(&object));
    match program.eval(&act)? {
        Value::Bool(b) => Ok(b),
        other => panic!("{src}: not a bool: {other:?}"),
    }
}

fn assert_over_budget(src: &str, limit: Option<u64>) {
    let started = Instant::now();
    match run(src, limit) {
        Err(e) => assert_eq!(e.message(), COST_ERROR, "{src}"),
        Ok(v) => panic!("{src}: evaluated to {v}, expected the cost error"),
    }
    // Generous: only proves it did not build gigabytes first.
    assert!(started.elapsed() < Duration::from_secs(20), "{src}");
}

/// `join` is charged by the size of its result (Kubernetes: 0.2 per
/// byte), not by the number of parts: a thousand references to one 1 MiB
/// string cost a thousand units to list and would join into a gigabyte.
#[test]
fn join_is_charged_by_the_size_of_its_result() {
    assert_over_budget(
        "lists.range(1000).map(i, object.s).join('').size() > 0",
        None,
    );
    // The same with no cost limit to speak of: the memory budget stops it.
    assert_over_budget(
        "lists.range(1000).map(i, object.s).join('').size() > 0",
        Some(u64::MAX / 4),
    );
    // A small join is still fine.
    assert_eq!(
        run(
            "['a', 'b', string(object.small)].join('-').size() == 204",
            None
        ),
        Ok(true)
    );
}

/// `split` costs a traversal plus its result (0.2 per byte): six splits of
/// a 1 MiB string spend more than the 1M budget (at 0.1 per byte, they
/// passed, and built a million strings each).
#[test]
fn split_is_charged_for_its_result() {
    assert_eq!(
        run("lists.range(2).all(i, object.s.split('').size() > 0)", None),
        Ok(true)
    );
    assert_over_budget("lists.range(6).all(i, object.s.split('').size() > 0)", None);
}

/// String equality traverses the shorter string (0.1 per byte), as
/// cel-go charges it; it was one unit whatever the length.
#[test]
fn string_equality_and_ordering_are_charged_by_length() {
    assert_eq!(run("object.s == object.t", None), Ok(true));
    assert_over_budget("lists.range(20).all(i, object.s == object.t)", None);
    assert_over_budget("lists.range(20).all(i, object.s <= object.t)", None);
    // Scalars still cost one unit: a million comparisons of ints pass.
    assert_eq!(
        run("lists.range(100000).all(i, i == i)", Some(1_000_000)),
        Ok(true)
    );
}

/// `replace` may multiply its input (an empty pattern matches between
/// every character); the result is accounted for before it is built.
#[test]
fn replace_that_multiplies_its_input_hits_the_memory_budget() {
    assert_over_budget("object.small.replace('', object.s).size() > 0", None);
    assert_eq!(
        run("object.small.replace('b', 'cc').size() == 400", None),
        Ok(true)
    );
}

/// Concatenations are charged by length, strings and lists alike, and
/// count against the memory budget.
#[test]
fn concatenation_is_charged_by_length() {
    assert_over_budget(
        "lists.range(10).map(i, object.s + object.small).size() == 10",
        None,
    );
    assert_over_budget(
        "lists.range(3000).map(i, lists.range(3000)).flatten().size() > 0",
        Some(u64::MAX / 4),
    );
}

/// A spent budget ends the whole evaluation: an `||` whose other side is
/// a constant does not turn the error into a result.
#[test]
fn a_spent_budget_is_not_absorbed_by_logical_operators() {
    assert_over_budget("lists.range(2000000).size() > 0 || true", None);
    assert_over_budget("[1].all(x, lists.range(2000000).size() > 0 || true)", None);
}

/// A running evaluation stops at its next charge once its interrupt is
/// set, with cel-go's error, and the interrupt counts it.
#[test]
fn an_interrupt_stops_a_running_evaluation() {
    let interrupt = Interrupt::new();
    let setter = {
        let interrupt = interrupt.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            interrupt.cancel();
        })
    };
    let started = Instant::now();
    // 10^10 iterations (hours without the interrupt), over one list: no
    // allocation in the loop, so no budget stops it first.
    let r = interrupt::scope(&interrupt, || {
        run(
            "cel.bind(r, lists.range(100000), r.all(i, r.all(j, i >= 0)))",
            Some(u64::MAX / 4),
        )
    });
    setter.join().expect("setter");
    assert_eq!(
        r.map_err(|e| e.message().to_owned()),
        Err("operation interrupted".to_owned())
    );
    assert!(started.elapsed() < Duration::from_secs(20));
    let stats = interrupt.stats();
    assert_eq!(
        (
            stats.expression_errors,
            stats.interrupted,
            stats.cost_limit_exceeded
        ),
        (1, 1, 0)
    );
    // Outside the scope, activations carry no interrupt.
    assert_eq!(run("[1, 2].all(x, x > 0)", None), Ok(true));
    // Nor do activations that do not ask for the current one.
    interrupt::scope(&interrupt, || {
        let env = Env::interlock();
        let program = env.compile("[1, 2].all(x, x > 0)").expect("compiles");
        assert!(program
            .eval(&Activation::new(&env))
            .is_ok_and(|v| v.equals(&Value::Bool(true))));
    });
}

/// Budget failures are counted on the interrupt as such.
#[test]
fn budget_failures_are_counted() {
    let interrupt = Interrupt::new();
    interrupt::scope(&interrupt, || {
        let _ = run("lists.range(2000000).size() > 0", None);
        let _ = run("object.missing == 1", None);
        let _ = run("true", None);
    });
    let stats = interrupt.stats();
    assert_eq!(
        (
            stats.expression_errors,
            stats.cost_limit_exceeded,
            stats.interrupted
        ),
        (2, 1, 0)
    );
}
