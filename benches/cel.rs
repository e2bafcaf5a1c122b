//! CEL engine benchmark: compile and evaluation time of typical policy
//! expressions on a realistic Pod, with `cel` 0.13 + `kube-cel` 0.8 as a
//! yardstick in the same run.
//!
//! ```text
//! cargo bench --bench cel                 # criterion, every benchmark
//! cargo bench --bench cel -- eval/        # criterion, a filter
//! cargo bench --bench cel -- --report     # the table in docs/PERFORMANCE.md
//! cargo bench --bench cel -- --profile images_registry_small 1000000
//!                                          # our eval only, for a profiler
//! ```
//!
//! What is timed, per expression:
//! - `compile/interlock`, `compile/yardstick`: source text to program.
//! - `eval/interlock`: what one admission evaluation costs us: a fresh
//!   `Activation`, the object bound as a borrowed view (no copy), `eval`.
//! - `eval/yardstick`: what one evaluation costs the yardstick at the
//!   least: the object converted to `cel::Value` (it cannot read
//!   `serde_json`), a child context for it over a root context built once
//!   (default functions plus `kube-cel`'s), `execute`.
//! - `eval/yardstick-fresh`: the same with the root context built per
//!   evaluation (`Context::default().with_all()`, as kube-cel's README does).
//! - `eval/yardstick-only`: `execute` alone on a context that already holds
//!   the converted object (what it would cost if conversion were free).
//!
//! The headline ratio is `eval/yardstick` over `eval/interlock`; the ratio
//! over `eval/yardstick-only` is reported next to it.

use criterion::{BenchmarkId, Criterion};
use interlock::cel::{Activation, Env, Program, Value};
use kube_cel::cel as ycel;
use kube_cel::KubeCelExt;
use serde_json::Value as Json;
use std::hint::black_box;
use std::time::{Duration, Instant};

const POD_LARGE: &str = include_str!("data/pod-large.json");
const POD_SMALL: &str = include_str!("data/pod-small.json");

#[derive(Clone, Copy, PartialEq, Eq)]
enum Pod {
    /// About 10 KB of JSON: four containers, two init containers, env,
    /// volumes, probes, resources, securityContext, affinity.
    Large,
    /// Two containers, no more than `kubectl run` would write.
    Small,
}

struct Case {
    name: &'static str,
    pod: Pod,
    expr: &'static str,
}

/// Typical policy expressions: the shapes that Pod Security, image and
/// label policies use.
const CASES: &[Case] = &[
    Case {
        name: "images_registry_small",
        pod: Pod::Small,
        expr: "object.spec.containers.all(c, c.image.startsWith('registry.example.com/'))",
    },
    Case {
        name: "images_registry",
        pod: Pod::Large,
        expr: "object.spec.containers.all(c, c.image.startsWith('registry.example.com/'))",
    },
    Case {
        name: "run_as_non_root_opt",
        pod: Pod::Large,
        expr: "object.spec.?securityContext.?runAsNonRoot.orValue(false)",
    },
    Case {
        name: "run_as_non_root_has",
        pod: Pod::Large,
        expr: "has(object.spec.securityContext) && has(object.spec.securityContext.runAsNonRoot) && object.spec.securityContext.runAsNonRoot == true",
    },
    Case {
        name: "no_privileged_opt",
        pod: Pod::Large,
        expr: "object.spec.containers.all(c, !c.?securityContext.?privileged.orValue(false))",
    },
    Case {
        name: "env_secret_exists",
        pod: Pod::Large,
        expr: "object.spec.containers.exists(c, has(c.env) && c.env.exists(e, e.name == 'DATABASE_URL' && has(e.valueFrom) && has(e.valueFrom.secretKeyRef)))",
    },
    Case {
        name: "limits_filter_size",
        pod: Pod::Large,
        expr: "object.spec.containers.filter(c, !has(c.resources) || !has(c.resources.limits) || !('memory' in c.resources.limits)).size() == 0",
    },
    Case {
        name: "configmap_names_map",
        pod: Pod::Large,
        expr: "object.spec.volumes.filter(v, has(v.configMap)).map(v, v.configMap.name)",
    },
    Case {
        name: "image_tag_strings",
        pod: Pod::Large,
        expr: "object.spec.containers.all(c, c.image.split(':').size() == 2 && !c.image.endsWith(':latest') && c.image.lowerAscii() == c.image)",
    },
    Case {
        name: "image_regex",
        pod: Pod::Large,
        expr: "object.spec.containers.all(c, c.image.matches('^[a-z0-9.-]+(:[0-9]+)?/[a-z0-9/_.-]+(:[A-Za-z0-9_.-]+|@sha256:[a-f0-9]{64})$'))",
    },
    Case {
        name: "name_regex",
        pod: Pod::Large,
        expr: "object.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$') && size(object.metadata.name) <= 63",
    },
    Case {
        name: "label_lookup",
        pod: Pod::Large,
        expr: "'team' in object.metadata.labels && object.metadata.labels['app.kubernetes.io/name'] == 'checkout' && object.metadata.labels['environment'] in ['production', 'staging']",
    },
    Case {
        name: "annotation_opt_index",
        pod: Pod::Large,
        expr: "object.metadata.?annotations[?'example.com/owner'].orValue('').endsWith('@example.com')",
    },
    Case {
        name: "probes_all",
        pod: Pod::Large,
        expr: "object.spec.containers.filter(c, c.name != 'log-shipper').all(c, has(c.livenessProbe) && has(c.readinessProbe) && c.readinessProbe.periodSeconds <= 30)",
    },
    Case {
        name: "host_namespaces",
        pod: Pod::Large,
        expr: "!(has(object.spec.hostNetwork) && object.spec.hostNetwork) && !(has(object.spec.hostPID) && object.spec.hostPID) && !(has(object.spec.hostIPC) && object.spec.hostIPC)",
    },
];

fn pod_json(p: Pod) -> Json {
    let text = match p {
        Pod::Large => POD_LARGE,
        Pod::Small => POD_SMALL,
    };
    serde_json::from_str(text).expect("benches/data pods are valid JSON")
}

/// Our engine, set up for one expression.
struct Ours {
    env: Env,
    slot: usize,
    program: Program,
}

impl Ours {
    fn new(expr: &str) -> Result<Ours, String> {
        let mut env = Env::kubernetes();
        let slot = env.add_variable("object");
        let program = env.compile(expr).map_err(|e| e.to_string())?;
        Ok(Ours { env, slot, program })
    }

    fn eval(&self, object: &Json) -> Result<Json, String> {
        let mut act = Activation::new(&self.env);
        act.set(self.slot, Value::from_json(object));
        self.program
            .eval(&act)
            .map(|v| v.to_json())
            .map_err(|e| e.to_string())
    }
}

/// One evaluation as it runs in admission: activation, borrowed object, eval.
fn ours_eval_once(o: &Ours, object: &Json) -> bool {
    let mut act = Activation::new(&o.env);
    act.set(o.slot, Value::from_json(object));
    o.program.eval(&act).is_ok()
}

fn root_context() -> ycel::Context<'static> {
    ycel::Context::default().with_all()
}

/// Yardstick: converted object in a child scope of a shared root context.
fn yard_eval_once(p: &ycel::Program, root: &ycel::Context<'_>, object: &Json) -> bool {
    let mut ctx = root.new_inner_scope();
    if ctx.add_variable("object", object).is_err() {
        return false;
    }
    p.execute(&ctx).is_ok()
}

/// Yardstick: a fresh root context per evaluation.
fn yard_fresh_once(p: &ycel::Program, object: &Json) -> bool {
    let mut ctx = root_context();
    if ctx.add_variable("object", object).is_err() {
        return false;
    }
    p.execute(&ctx).is_ok()
}

fn yard_to_json(v: &ycel::Value) -> Json {
    use ycel::objects::Key;
    match v {
        ycel::Value::Null => Json::Null,
        ycel::Value::Bool(b) => Json::Bool(*b),
        ycel::Value::Int(i) => Json::from(*i),
        ycel::Value::UInt(u) => Json::from(*u),
        ycel::Value::Float(f) => Json::from(*f),
        ycel::Value::String(s) => Json::String(s.to_string()),
        ycel::Value::List(l) => Json::Array(l.iter().map(yard_to_json).collect()),
        ycel::Value::Map(m) => Json::Object(
            m.map
                .iter()
                .map(|(k, v)| {
                    let k = match k {
                        Key::String(s) => s.to_string(),
                        Key::Int(i) => i.to_string(),
                        Key::Uint(u) => u.to_string(),
                        Key::Bool(b) => b.to_string(),
                    };
                    (k, yard_to_json(v))
                })
                .collect(),
        ),
        _ => Json::String("<other>".into()),
    }
}

/// The yardstick for one expression, or why it cannot run it.
enum Yard {
    Ok(ycel::Program),
    Unsupported(String),
}

impl Yard {
    fn new(expr: &str, object: &Json, expected: &Result<Json, String>) -> Yard {
        let program = match ycel::Program::compile(expr) {
            Ok(p) => p,
            Err(e) => {
                return Yard::Unsupported(format!("parse error: {}", first_line(&e.to_string())))
            }
        };
        let root = root_context();
        let mut ctx = root.new_inner_scope();
        if let Err(e) = ctx.add_variable("object", object) {
            return Yard::Unsupported(format!("conversion: {e}"));
        }
        match program.execute(&ctx) {
            Err(e) => Yard::Unsupported(format!("eval error: {}", first_line(&e.to_string()))),
            Ok(v) => match expected {
                Ok(want) if *want == yard_to_json(&v) => Yard::Ok(program),
                Ok(want) => {
                    Yard::Unsupported(format!("wrong answer: {} (want {want})", yard_to_json(&v)))
                }
                Err(_) => Yard::Ok(program),
            },
        }
    }
}

fn first_line(s: &str) -> String {
    let l = s.lines().next().unwrap_or("").trim();
    if l.chars().count() > 60 {
        format!("{}...", l.chars().take(60).collect::<String>())
    } else {
        l.to_string()
    }
}

struct Prepared {
    case: &'static Case,
    object: Json,
    ours: Ours,
    yard: Yard,
}

fn prepare() -> Vec<Prepared> {
    CASES
        .iter()
        .map(|case| {
            let object = pod_json(case.pod);
            let ours = Ours::new(case.expr).unwrap_or_else(|e| panic!("{}: {e}", case.name));
            let expected = ours.eval(&object);
            if let Err(e) = &expected {
                panic!("{}: our engine fails: {e}", case.name);
            }
            let yard = Yard::new(case.expr, &object, &expected);
            Prepared {
                case,
                object,
                ours,
                yard,
            }
        })
        .collect()
}

fn criterion_benches(c: &mut Criterion, cases: &[Prepared]) {
    let root = root_context();
    {
        let mut g = c.benchmark_group("compile");
        for p in cases {
            let env = &p.ours.env;
            g.bench_with_input(
                BenchmarkId::new("interlock", p.case.name),
                p.case.expr,
                |b, e| b.iter(|| env.compile(black_box(e)).is_ok()),
            );
            if let Yard::Ok(_) = p.yard {
                g.bench_with_input(
                    BenchmarkId::new("yardstick", p.case.name),
                    p.case.expr,
                    |b, e| b.iter(|| ycel::Program::compile(black_box(e)).is_ok()),
                );
            }
        }
        g.finish();
    }
    let mut g = c.benchmark_group("eval");
    for p in cases {
        g.bench_function(BenchmarkId::new("interlock", p.case.name), |b| {
            b.iter(|| ours_eval_once(&p.ours, black_box(&p.object)))
        });
        if let Yard::Ok(program) = &p.yard {
            g.bench_function(BenchmarkId::new("yardstick", p.case.name), |b| {
                b.iter(|| yard_eval_once(program, &root, black_box(&p.object)))
            });
            g.bench_function(BenchmarkId::new("yardstick-fresh", p.case.name), |b| {
                b.iter(|| yard_fresh_once(program, black_box(&p.object)))
            });
            let mut ctx = root.new_inner_scope();
            ctx.add_variable("object", &p.object)
                .expect("converted at prepare");
            g.bench_function(BenchmarkId::new("yardstick-only", p.case.name), |b| {
                b.iter(|| program.execute(black_box(&ctx)).is_ok())
            });
        }
    }
    g.finish();
}

// ---------------------------------------------------------------------------
// --report: medians measured here (no criterion), printed as Markdown.

/// Median time per call of `f`: `samples` batches of about `batch` each.
fn median_ns(samples: usize, batch: Duration, mut f: impl FnMut() -> bool) -> f64 {
    // Warm up and calibrate the iterations per batch.
    let mut n: u64 = 1;
    loop {
        let t = Instant::now();
        for _ in 0..n {
            black_box(f());
        }
        let e = t.elapsed();
        if e >= batch / 4 {
            n = ((n as f64) * batch.as_secs_f64() / e.as_secs_f64())
                .ceil()
                .max(1.0) as u64;
            break;
        }
        n *= 2;
    }
    let mut per_iter: Vec<f64> = (0..samples)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..n {
                black_box(f());
            }
            t.elapsed().as_nanos() as f64 / n as f64
        })
        .collect();
    median(&mut per_iter)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn fmt_ns(ns: f64) -> String {
    if ns >= 1_000_000.0 {
        format!("{:.2} ms", ns / 1_000_000.0)
    } else if ns >= 1_000.0 {
        format!("{:.2} µs", ns / 1_000.0)
    } else {
        format!("{ns:.0} ns")
    }
}

fn report(cases: &[Prepared], samples: usize, batch: Duration) {
    let root = root_context();
    let large = POD_LARGE.len();
    let compact = serde_json::to_string(&pod_json(Pod::Large))
        .map(|s| s.len())
        .unwrap_or(0);
    let small = serde_json::to_string(&pod_json(Pod::Small))
        .map(|s| s.len())
        .unwrap_or(0);
    println!(
        "CEL benchmark report: median of {samples} samples of ~{} ms each",
        batch.as_millis()
    );
    println!(
        "pods: large {compact} bytes of compact JSON ({large} pretty-printed), small {small} bytes"
    );
    println!();
    println!("| expression | pod | compile (ours) | compile (yardstick) | eval (ours) | eval (yardstick: convert + scope + execute) | eval (yardstick, fresh context) | eval (yardstick, execute only) | ratio | ratio (execute only) |");
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut ratios = Vec::new();
    let mut ratios_only = Vec::new();
    let mut unsupported = Vec::new();
    for p in cases {
        let env = &p.ours.env;
        let expr = p.case.expr;
        let c_ours = median_ns(samples, batch, || env.compile(black_box(expr)).is_ok());
        let e_ours = median_ns(samples, batch, || {
            ours_eval_once(&p.ours, black_box(&p.object))
        });
        let pod = match p.case.pod {
            Pod::Large => "large",
            Pod::Small => "small",
        };
        match &p.yard {
            Yard::Ok(program) => {
                let c_y = median_ns(samples, batch, || {
                    ycel::Program::compile(black_box(expr)).is_ok()
                });
                let e_y = median_ns(samples, batch, || {
                    yard_eval_once(program, &root, black_box(&p.object))
                });
                let e_fresh = median_ns(samples, batch, || {
                    yard_fresh_once(program, black_box(&p.object))
                });
                let mut ctx = root.new_inner_scope();
                ctx.add_variable("object", &p.object)
                    .expect("converted at prepare");
                let e_only = median_ns(samples, batch, || program.execute(black_box(&ctx)).is_ok());
                let r = e_y / e_ours;
                let r_only = e_only / e_ours;
                ratios.push(r);
                ratios_only.push(r_only);
                println!(
                    "| `{}` | {pod} | {} | {} | {} | {} | {} | {} | {r:.0}x | {r_only:.1}x |",
                    p.case.name,
                    fmt_ns(c_ours),
                    fmt_ns(c_y),
                    fmt_ns(e_ours),
                    fmt_ns(e_y),
                    fmt_ns(e_fresh),
                    fmt_ns(e_only)
                );
            }
            Yard::Unsupported(why) => {
                unsupported.push((p.case.name, why.clone()));
                println!(
                    "| `{}` | {pod} | {} | unsupported | {} | unsupported | unsupported | unsupported | - | - |",
                    p.case.name,
                    fmt_ns(c_ours),
                    fmt_ns(e_ours)
                );
            }
        }
    }
    println!();
    let m = median(&mut ratios);
    let m_only = median(&mut ratios_only);
    println!(
        "median ratio over the {} expressions both engines run: {m:.1}x (yardstick per evaluation / ours), {m_only:.1}x counting the yardstick's execute alone",
        ratios.len()
    );
    println!(
        "target: >= 5x (median ratio): {}",
        if m >= 5.0 { "met" } else { "MISSED" }
    );
    if let Some(p) = cases
        .iter()
        .find(|p| p.case.name == "images_registry_small")
    {
        let e = median_ns(samples, batch, || {
            ours_eval_once(&p.ours, black_box(&p.object))
        });
        println!(
            "target: < 1 µs for containers.all(startsWith) on the two-container Pod: {} ({})",
            fmt_ns(e),
            if e < 1_000.0 { "met" } else { "MISSED" }
        );
    }
    if !unsupported.is_empty() {
        println!();
        println!("unsupported by the yardstick:");
        for (name, why) in unsupported {
            println!("- `{name}`: {why}");
        }
    }
    println!();
    println!("expressions:");
    for p in cases {
        println!("- `{}`: `{}`", p.case.name, p.case.expr);
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--profile") {
        let name = args.get(i + 1).map(String::as_str).unwrap_or("");
        let n: u64 = args
            .get(i + 2)
            .and_then(|s| s.parse().ok())
            .unwrap_or(1_000_000);
        let Some(case) = CASES.iter().find(|c| c.name == name) else {
            eprintln!("--profile NAME [N]: no case named {name:?}");
            std::process::exit(2);
        };
        let object = pod_json(case.pod);
        let ours = Ours::new(case.expr).unwrap_or_else(|e| panic!("{}: {e}", case.name));
        let t = Instant::now();
        let ok = (0..n)
            .filter(|_| ours_eval_once(&ours, black_box(&object)))
            .count();
        let per = t.elapsed().as_nanos() as f64 / n as f64;
        println!("{name}: {n} evaluations ({ok} ok), {}", fmt_ns(per));
        return;
    }
    let cases = prepare();
    if args.iter().any(|a| a == "--report") {
        let samples = std::env::var("CEL_REPORT_SAMPLES")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(31);
        let batch_ms = std::env::var("CEL_REPORT_BATCH_MS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(5);
        report(&cases, samples, Duration::from_millis(batch_ms));
        return;
    }
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2))
        .configure_from_args();
    criterion_benches(&mut c, &cases);
    c.final_summary();
}
