//! `interlock check` end to end over synthetic clusters of 1k, 10k and 100k
//! objects with the bundled policy library.
//!
//! ```text
//! cargo bench --bench check                          # all sizes, the table
//! cargo bench --bench check -- --sizes 1000,10000 --runs 7
//! cargo bench --bench check -- --phases              # also time load / check in-process
//! cargo bench --bench check -- --keep /tmp/clusters  # keep the generated files
//! cargo bench --bench check -- --pod-refs            # one Pod's cost by its references
//! cargo bench --bench check -- --baseline /path/to/interlock   # A/B against another build
//! cargo bench --bench check -- --one-file 1000000    # the same cluster as one YAML file (~1 GB)
//! cargo bench --bench check -- --binary PATH         # time another binary as "this build"
//! ```
//!
//! `--one-file N`: the cluster of N objects written as one multi-document
//! YAML file (files one after another), checked `--runs` times (default 1):
//! wall, CPU, peak RSS against the file's size. A file over the loader's
//! `stream_above` (64 MiB) is read in windows. With `--baseline`, the
//! other build is run once on the same file and its exit code and first
//! line of standard error are printed (a build that refuses large files
//! says so there).
//!
//! `--baseline BIN`: each run also runs BIN (another build, for example the
//! release binary of the commit before a change, built in a target
//! directory of its own) on the same files, alternating with this build so
//! that both see the same load; prints its medians, the ratios this build /
//! BIN, and whether the two JSON reports are byte for byte the same (the
//! bench fails when they are not).
//!
//! `--pod-refs`: the CPU of checking one Pod whose containers each hold ten
//! `configMapKeyRef`s to ConfigMaps that do not exist (the costliest small
//! body for pod-references-exist), at 10 to 160 containers, with the CPU
//! per reference over that of the smallest: a ratio near 1 is linear.
//!
//! Under `cargo test --all-targets` (no `--bench` argument) it only checks
//! that a 300-object cluster goes through the binary with the right count.
//!
//! Each run starts the release binary (`interlock check -o json DIR`, the
//! report written to a file), measures its wall time and reads its peak
//! resident set (`ru_maxrss` from `wait4`, the same figure as VmHWM).
//! The median of the runs is reported, with objects per second and peak
//! memory over the input's size on disk.

#[path = "support/gen_cluster.rs"]
mod gen_cluster;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_interlock");

struct Opts {
    sizes: Vec<usize>,
    runs: Option<usize>,
    phases: bool,
    keep: Option<PathBuf>,
    pod_refs: bool,
    /// Another build to run alternately on the same files (A/B).
    baseline: Option<PathBuf>,
    /// Under `cargo test`: no targets to compare with.
    smoke: bool,
    /// `--one-file N`: N objects in one YAML file.
    one_file: Option<usize>,
    /// `--binary PATH`: the build measured, instead of the one built with
    /// this bench (a release binary measured by a harness built in debug).
    binary: PathBuf,
}

/// Objects in the smoke test that `cargo test --all-targets` runs.
const SMOKE_OBJECTS: usize = 300;

fn parse_args() -> Result<Opts, String> {
    let mut o = Opts {
        sizes: vec![1_000, 10_000, 100_000],
        runs: None,
        phases: false,
        keep: None,
        pod_refs: false,
        baseline: None,
        smoke: false,
        one_file: None,
        binary: PathBuf::from(BIN),
    };
    // `cargo bench` passes --bench; `cargo test --all-targets` (CI) passes
    // nothing, and then this is a quick smoke test of the generator and the
    // pipeline on a few hundred objects, as criterion does for benches/cel.rs.
    let all: Vec<String> = std::env::args().skip(1).collect();
    if !all.iter().any(|a| a == "--bench") || all.iter().any(|a| a == "--test") {
        o.sizes = vec![SMOKE_OBJECTS];
        o.runs = Some(1);
        o.smoke = true;
    }
    let mut args = all.into_iter();
    while let Some(a) = args.next() {
        match a.as_str() {
            "--sizes" => {
                let v = args.next().ok_or("--sizes needs a value")?;
                o.sizes = v
                    .split(',')
                    .map(|s| {
                        s.trim()
                            .replace('_', "")
                            .parse::<usize>()
                            .map_err(|e| format!("--sizes {s}: {e}"))
                    })
                    .collect::<Result<_, _>>()?;
            }
            "--runs" => {
                let v = args.next().ok_or("--runs needs a value")?;
                o.runs = Some(v.parse().map_err(|e| format!("--runs: {e}"))?);
            }
            "--phases" => o.phases = true,
            "--binary" => o.binary = PathBuf::from(args.next().ok_or("--binary needs a path")?),
            "--one-file" => {
                let v = args.next().ok_or("--one-file needs a number of objects")?;
                let n = v
                    .replace('_', "")
                    .parse()
                    .map_err(|e| format!("--one-file {v}: {e}"))?;
                o.one_file = Some(n);
            }
            "--pod-refs" => o.pod_refs = true,
            "--baseline" => {
                o.baseline = Some(PathBuf::from(
                    args.next().ok_or("--baseline needs a binary")?,
                ))
            }
            "--keep" => {
                o.keep = Some(PathBuf::from(
                    args.next().ok_or("--keep needs a directory")?,
                ))
            }
            // --bench, --test, and filters: handled above or ignored.
            _ => {}
        }
    }
    Ok(o)
}

/// One run of the binary.
struct Run {
    wall: Duration,
    /// User + system CPU time of the child.
    cpu: Duration,
    max_rss_bytes: u64,
    exit: i32,
}

fn run_binary(dir: &Path, out: &Path, err: &Path) -> Result<Run, String> {
    run_bin(Path::new(BIN), dir, out, err)
}

fn run_bin(bin: &Path, dir: &Path, out: &Path, err: &Path) -> Result<Run, String> {
    let stdout = File::create(out).map_err(|e| e.to_string())?;
    let stderr = File::create(err).map_err(|e| e.to_string())?;
    let start = Instant::now();
    let child = Command::new(bin)
        .args(["check", "-o", "json"])
        .arg(dir)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", bin.display()))?;
    let pid = child.id() as libc::pid_t;
    let mut status: libc::c_int = 0;
    // SAFETY: rusage is plain data; wait4 fills it for our own child, which
    // `child` (never waited on through std) does not reap.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let wall = start.elapsed();
    if r != pid {
        return Err(format!("wait4: {}", std::io::Error::last_os_error()));
    }
    let exit = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    Ok(Run {
        wall,
        cpu: tv(usage.ru_utime) + tv(usage.ru_stime),
        // Linux reports ru_maxrss in KiB.
        max_rss_bytes: usage.ru_maxrss as u64 * 1024,
        exit,
    })
}

/// The 1, 5 and 15 minute load averages: other work on the machine makes
/// wall times longer than the CPU time over the cores.
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

fn median<T: Copy + Ord>(v: &mut [T]) -> T {
    v.sort();
    v[v.len() / 2]
}

fn mib(b: u64) -> String {
    format!("{:.1} MiB", b as f64 / (1024.0 * 1024.0))
}

struct Row {
    objects: usize,
    files: usize,
    input_bytes: u64,
    runs: usize,
    wall: Duration,
    min_wall: Duration,
    cpu: Duration,
    rss: u64,
    violations: u64,
    sown: gen_cluster::Generated,
    phases: Option<Phases>,
    /// The baseline build's medians on the same files (`--baseline`).
    baseline: Option<Medians>,
}

/// Medians of one binary's runs.
struct Medians {
    wall: Duration,
    cpu: Duration,
    rss: u64,
}

/// Every run's figures of one binary.
#[derive(Default)]
struct Runs {
    walls: Vec<Duration>,
    cpus: Vec<Duration>,
    rss: Vec<u64>,
}

impl Runs {
    fn push(&mut self, r: &Run) {
        self.walls.push(r.wall);
        self.cpus.push(r.cpu);
        self.rss.push(r.max_rss_bytes);
    }

    fn medians(&mut self) -> Medians {
        Medians {
            wall: median(&mut self.walls),
            cpu: median(&mut self.cpus),
            rss: median(&mut self.rss),
        }
    }
}

/// Runs `bin` once on `dir`; an exit other than 0 or 1 (findings) is an error.
fn checked_run(bin: &Path, dir: &Path, out: &Path, err: &Path, size: usize) -> Result<Run, String> {
    let r = run_bin(bin, dir, out, err)?;
    if r.exit != 0 && r.exit != 1 {
        let stderr = std::fs::read_to_string(err).unwrap_or_default();
        let head: String = stderr.lines().take(20).collect::<Vec<_>>().join("\n");
        return Err(format!(
            "{} check exited {} on {size} objects:\n{head}",
            bin.display(),
            r.exit
        ));
    }
    Ok(r)
}

fn rusage_cpu(who: libc::c_int) -> Duration {
    // SAFETY: getrusage fills a plain-data struct.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(who, &mut u) };
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    tv(u.ru_utime) + tv(u.ru_stime)
}

/// CPU time (user + system) of this process so far, all threads.
fn self_cpu() -> Duration {
    rusage_cpu(libc::RUSAGE_SELF)
}

/// CPU time of the calling thread so far.
fn thread_cpu() -> Duration {
    rusage_cpu(libc::RUSAGE_THREAD)
}

/// Waits until no thread of this process burns CPU (the objects of the
/// previous run are freed on a background thread).
fn settle() {
    let mut last = self_cpu();
    loop {
        std::thread::sleep(Duration::from_millis(100));
        let now = self_cpu();
        if now - last < Duration::from_millis(5) {
            return;
        }
        last = now;
    }
}

/// One in-process measurement: wall time, CPU of every thread, and CPU of
/// the calling thread. The calling thread is not a rayon worker: it does
/// the serial work and waits while the pool does the parallel work.
#[derive(Clone, Copy)]
struct Timed {
    wall: Duration,
    cpu: Duration,
    serial: Duration,
}

impl Timed {
    fn of<T>(f: impl FnOnce() -> T) -> (T, Timed) {
        settle();
        let (t, c, m) = (Instant::now(), self_cpu(), thread_cpu());
        let r = f();
        let timed = Timed {
            wall: t.elapsed(),
            cpu: self_cpu() - c,
            serial: thread_cpu() - m,
        };
        (r, timed)
    }

    /// Wall time on `cores` idle cores, if the parallel work spread evenly.
    fn idle_estimate(&self, cores: usize) -> Duration {
        self.serial + (self.cpu.saturating_sub(self.serial)) / cores.max(1) as u32
    }

    fn median(v: &[Timed]) -> Timed {
        let pick = |f: fn(&Timed) -> Duration| {
            let mut x: Vec<Duration> = v.iter().map(f).collect();
            median(&mut x)
        };
        Timed {
            wall: pick(|t| t.wall),
            cpu: pick(|t| t.cpu),
            serial: pick(|t| t.serial),
        }
    }
}

/// In-process phases, medians: loading the files alone, and the whole
/// `check::run` (which loads them again).
struct Phases {
    load: Timed,
    run: Timed,
}

fn phases(dir: &Path, runs: usize) -> Phases {
    use interlock::check::{self, CheckOptions};
    use interlock::manifest::{self, LoadOptions};
    let opts = CheckOptions {
        policies: vec![],
        inputs: vec![dir.to_path_buf()],
        user: check::DEFAULT_USER.to_string(),
        record_evaluated: false,
        whole_objects: false,
        ..Default::default()
    };
    let (mut loads, mut whole) = (vec![], vec![]);
    for _ in 0..runs {
        let (loaded, t) = Timed::of(|| manifest::load_paths(&opts.inputs, &LoadOptions::default()));
        loads.push(t);
        drop(loaded);
        let (report, t) = Timed::of(|| check::run(&opts));
        whole.push(t);
        std::hint::black_box(report);
    }
    Phases {
        load: Timed::median(&loads),
        run: Timed::median(&whole),
    }
}

fn bench_size(size: usize, o: &Opts) -> Result<Row, String> {
    let tmp = tempfile::tempdir().map_err(|e| e.to_string())?;
    let dir = match &o.keep {
        Some(k) => {
            let d = k.join(format!("cluster-{size}"));
            let _ = std::fs::remove_dir_all(&d);
            std::fs::create_dir_all(&d).map_err(|e| e.to_string())?;
            d
        }
        None => {
            let d = tmp.path().join("cluster");
            std::fs::create_dir(&d).map_err(|e| e.to_string())?;
            d
        }
    };
    let g = gen_cluster::generate(&dir, size).map_err(|e| e.to_string())?;
    let runs = o.runs.unwrap_or(if size >= 50_000 { 3 } else { 5 });
    let out = tmp.path().join("report.json");
    let err = tmp.path().join("stderr.txt");
    let base_out = tmp.path().join("report-baseline.json");
    let (mut this, mut base) = (Runs::default(), Runs::default());
    for _ in 0..runs {
        // Alternated, so that both builds see the same load.
        if let Some(b) = &o.baseline {
            base.push(&checked_run(b, &dir, &base_out, &err, size)?);
        }
        this.push(&checked_run(&o.binary, &dir, &out, &err, size)?);
    }
    if o.baseline.is_some() {
        let (a, b) = (std::fs::read(&base_out), std::fs::read(&out));
        if a.map_err(|e| e.to_string())? != b.map_err(|e| e.to_string())? {
            return Err(format!(
                "at {size} objects the reports of this build and the baseline differ"
            ));
        }
    }
    let report: serde_json::Value =
        serde_json::from_reader(File::open(&out).map_err(|e| e.to_string())?)
            .map_err(|e| format!("report is not JSON: {e}"))?;
    let objects = report["summary"]["objects"].as_u64().unwrap_or(0) as usize;
    if objects != g.objects {
        return Err(format!(
            "generated {} objects, the report counts {objects}",
            g.objects
        ));
    }
    let phases = o.phases.then(|| phases(&dir, runs));
    let files = g.files;
    let input_bytes = g.bytes;
    let min_wall = *this.walls.iter().min().unwrap_or(&Duration::ZERO);
    let m = this.medians();
    Ok(Row {
        objects,
        files,
        input_bytes,
        runs,
        wall: m.wall,
        min_wall,
        cpu: m.cpu,
        rss: m.rss,
        baseline: o.baseline.is_some().then(|| base.medians()),
        violations: report["summary"]["violations"].as_u64().unwrap_or(0),
        sown: g,
        phases,
    })
}

/// A Pod of `containers` containers, each with `refs` env vars read from
/// ConfigMaps that are not there.
fn pod_with_refs(containers: usize, refs: usize) -> String {
    let mut y = String::from(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: refs, namespace: bench}\nspec:\n  containers:\n",
    );
    for c in 0..containers {
        y.push_str(&format!(
            "  - name: c{c}\n    image: registry.example.com/app:1.0.0\n    env:\n"
        ));
        for r in 0..refs {
            y.push_str(&format!(
                "    - {{name: V{r}, valueFrom: {{configMapKeyRef: {{name: cm-{c}-{r}, key: k}}}}}}\n"
            ));
        }
    }
    y
}

/// The CPU of one Pod's check by its number of references (see the top).
fn pod_refs_curve(o: &Opts) -> Result<(), String> {
    let sizes: &[usize] = if o.smoke {
        &[10, 20]
    } else {
        &[10, 20, 40, 80, 160]
    };
    let runs = o.runs.unwrap_or(5);
    let tmp = tempfile::tempdir().map_err(|e| e.to_string())?;
    // The CPU of a check of the same Pod without references (start-up,
    // the library's compilation) is subtracted: what is left is the
    // references' own cost.
    let cpu_of = |containers: usize, refs: usize| -> Result<Duration, String> {
        let dir = tmp.path().join(format!("pod-{containers}-{refs}"));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        std::fs::write(dir.join("pod.yaml"), pod_with_refs(containers, refs))
            .map_err(|e| e.to_string())?;
        let mut cpus = Vec::new();
        for _ in 0..runs {
            let r = run_binary(&dir, &tmp.path().join("out.json"), &tmp.path().join("err"))?;
            // 1: the Pod also has no resource limits.
            if r.exit > 1 {
                return Err(format!(
                    "check of {containers} containers exited {}",
                    r.exit
                ));
            }
            cpus.push(r.cpu);
        }
        Ok(median(&mut cpus))
    };
    println!("| containers | references | body | runs | CPU (median) | without references | CPU per reference | per reference / smallest's |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut first: Option<f64> = None;
    for &n in sizes {
        let with = cpu_of(n, 10)?;
        let without = cpu_of(n, 0)?;
        let per_ref = with.saturating_sub(without).as_secs_f64() / (n * 10) as f64;
        let base = *first.get_or_insert(per_ref.max(1e-9));
        println!(
            "| {n} | {} | {:.1} KiB | {runs} | {:.1} ms | {:.1} ms | {:.1} µs | {:.2}x |",
            n * 10,
            pod_with_refs(n, 10).len() as f64 / 1024.0,
            with.as_secs_f64() * 1e3,
            without.as_secs_f64() * 1e3,
            per_ref * 1e6,
            per_ref / base
        );
    }
    Ok(())
}

/// `--one-file N`: the cluster as one YAML file, checked whole.
fn one_file(size: usize, o: &Opts) -> Result<(), String> {
    let tmp = tempfile::tempdir().map_err(|e| e.to_string())?;
    let dir = o.keep.clone().unwrap_or_else(|| tmp.path().to_path_buf());
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let file = dir.join(format!("cluster-{size}.yaml"));
    let g = gen_cluster::generate_file(&file, size).map_err(|e| e.to_string())?;
    let (out, err) = (
        tmp.path().join("report.json"),
        tmp.path().join("stderr.txt"),
    );
    println!(
        "interlock check of one YAML file, bundled library, binary {}",
        o.binary.display()
    );
    println!(
        "file {} ({}, {} objects)",
        file.display(),
        mib(g.bytes),
        g.objects
    );
    println!("load average before: {}", loadavg());
    println!();
    println!("| run | wall | CPU user+sys | CPU an object | peak RSS | RSS / input | objects | violations |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
    for run in 1..=o.runs.unwrap_or(1) {
        let r = checked_run(&o.binary, &file, &out, &err, size)?;
        let report: serde_json::Value =
            serde_json::from_reader(File::open(&out).map_err(|e| e.to_string())?)
                .map_err(|e| format!("report is not JSON: {e}"))?;
        let objects = report["summary"]["objects"].as_u64().unwrap_or(0);
        if objects != g.objects as u64 {
            return Err(format!(
                "generated {} objects, the report counts {objects}",
                g.objects
            ));
        }
        println!(
            "| {run} | {:.2} s | {:.2} s | {:.1} us | {} | {:.2}x | {objects} | {} |",
            r.wall.as_secs_f64(),
            r.cpu.as_secs_f64(),
            r.cpu.as_secs_f64() * 1e6 / size.max(1) as f64,
            mib(r.max_rss_bytes),
            r.max_rss_bytes as f64 / g.bytes as f64,
            report["summary"]["violations"].as_u64().unwrap_or(0),
        );
    }
    println!("load average after: {}", loadavg());
    if let Some(b) = &o.baseline {
        let r = run_bin(b, &file, &out, &err)?;
        let stderr = std::fs::read_to_string(&err).unwrap_or_default();
        println!(
            "baseline {}: exit {}, {:.2} s, peak RSS {}; {}",
            b.display(),
            r.exit,
            r.wall.as_secs_f64(),
            mib(r.max_rss_bytes),
            stderr
                .lines()
                .next()
                .unwrap_or("(nothing on standard error)")
        );
    }
    Ok(())
}

fn main() {
    let o = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("check bench: {e}");
            std::process::exit(2);
        }
    };
    if let Some(size) = o.one_file.filter(|_| !o.smoke) {
        if let Err(e) = one_file(size, &o) {
            eprintln!("check bench: {e}");
            std::process::exit(1);
        }
        return;
    }
    if o.pod_refs || o.smoke {
        if let Err(e) = pod_refs_curve(&o) {
            eprintln!("check bench: {e}");
            std::process::exit(1);
        }
        if o.pod_refs {
            return;
        }
    }
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    println!(
        "interlock check, bundled library, {cores} cores, binary {}",
        o.binary.display()
    );
    println!("load average before: {}", loadavg());
    println!();
    println!("| objects | files | input on disk | runs | wall (median) | wall (min) | CPU user+sys (median) | objects/s | peak RSS (median) | RSS / input | violations |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut rows = Vec::new();
    for &size in &o.sizes {
        match bench_size(size, &o) {
            Ok(r) => {
                println!(
                    "| {} | {} | {} | {} | {:.3} s | {:.3} s | {:.3} s | {:.0} | {} | {:.2}x | {} |",
                    r.objects,
                    r.files,
                    mib(r.input_bytes),
                    r.runs,
                    r.wall.as_secs_f64(),
                    r.min_wall.as_secs_f64(),
                    r.cpu.as_secs_f64(),
                    r.objects as f64 / r.wall.as_secs_f64(),
                    mib(r.rss),
                    r.rss as f64 / r.input_bytes as f64,
                    r.violations,
                );
                rows.push(r);
            }
            Err(e) => {
                eprintln!("check bench: {e}");
                std::process::exit(1);
            }
        }
    }
    println!();
    println!("load average after: {}", loadavg());
    for r in &rows {
        println!(
            "CPU per object at {} objects: {:.1} us",
            r.objects,
            r.cpu.as_secs_f64() * 1e6 / r.objects.max(1) as f64
        );
    }
    if let Some(b) = &o.baseline {
        println!("baseline: {}", b.display());
        println!("| objects | baseline wall | baseline CPU | baseline peak RSS | wall ratio | CPU ratio | RSS ratio | reports |");
        println!("|---:|---:|---:|---:|---:|---:|---:|---|");
    }
    for r in &rows {
        if let Some(b) = &r.baseline {
            let ratio = |a: f64, b: f64| a / b.max(1e-9);
            println!(
                "| {} | {:.3} s | {:.3} s | {} | {:.2} | {:.2} | {:.2} | identical |",
                r.objects,
                b.wall.as_secs_f64(),
                b.cpu.as_secs_f64(),
                mib(b.rss),
                ratio(r.wall.as_secs_f64(), b.wall.as_secs_f64()),
                ratio(r.cpu.as_secs_f64(), b.cpu.as_secs_f64()),
                ratio(r.rss as f64, b.rss as f64),
            );
        }
    }
    for r in &rows {
        if let Some(p) = &r.phases {
            let s = |d: Duration| d.as_secs_f64();
            println!(
                "in-process at {} objects (medians): check::run {:.3} s wall, {:.3} s CPU of which {:.3} s serial; \
                 loading the files alone {:.3} s wall, {:.3} s CPU of which {:.3} s serial; \
                 estimated wall on {cores} idle cores: {:.3} s (serial + parallel / {cores})",
                r.objects,
                s(p.run.wall),
                s(p.run.cpu),
                s(p.run.serial),
                s(p.load.wall),
                s(p.load.cpu),
                s(p.load.serial),
                s(p.run.idle_estimate(cores)),
            );
        }
    }
    for r in rows.iter().filter(|_| !o.smoke) {
        // Issue 34's targets: 100k objects in 1 s, 20 us of CPU an object,
        // peak RSS at most twice the input (issue 3's were 10 s and 3x).
        if r.objects >= 50_000 {
            let t = r.wall.as_secs_f64();
            println!(
                "target 100k <= 1.0 s wall: {t:.3} s ({})",
                if t <= 1.0 { "met" } else { "MISSED" }
            );
        }
        let per = r.cpu.as_secs_f64() * 1e6 / r.objects.max(1) as f64;
        println!(
            "target <= 20 us CPU an object at {} objects: {per:.1} us ({})",
            r.objects,
            if per <= 20.0 { "met" } else { "MISSED" }
        );
        let ratio = r.rss as f64 / r.input_bytes as f64;
        println!(
            "target peak memory <= 2x input at {} objects: {ratio:.2}x ({})",
            r.objects,
            if ratio <= 2.0 { "met" } else { "MISSED" }
        );
        println!(
            "sown at {} objects: {} duplicate Ingress hosts, {} pod templates with a missing ConfigMap, {} HPAs without target, {} latest tags",
            r.objects, r.sown.duplicate_hosts, r.sown.missing_config_maps, r.sown.dangling_hpas, r.sown.latest_tags
        );
    }
}
