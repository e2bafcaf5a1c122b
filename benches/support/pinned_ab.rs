//! The webhook load bench's pinned form (issue 34): `interlock serve`
//! binaries, each started as its own process on CPU 0 with the bench's
//! cluster as `--inventory`, the load client (this process) on the other
//! CPUs, so that the client never takes turns with the server on its core.
//! `LOAD_SERVER_BIN=path` names the binary measured; `LOAD_BASELINE_BIN`
//! another to set beside it (main's release build, say): `LOAD_RUNS` (3)
//! rounds, the two in alternating order, each started afresh, and the
//! medians of each side with the ratio. Per server and phase: p50/p99 at
//! the fixed rate, saturation req/s, and the server's CPU per request,
//! read from `/proc/PID/task/*/schedstat` of its process.

use super::{measure, Figures, Run, Settings};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// One server binary under test.
pub struct Side {
    pub name: &'static str,
    pub bin: PathBuf,
}

/// The binaries named by `LOAD_SERVER_BIN` and `LOAD_BASELINE_BIN`, the
/// baseline first; empty when the first is not set.
pub fn sides() -> Vec<Side> {
    let named = |var: &str, name: &'static str| {
        std::env::var_os(var).map(|bin| Side {
            name,
            bin: PathBuf::from(bin),
        })
    };
    let Some(server) = named("LOAD_SERVER_BIN", "B (LOAD_SERVER_BIN)") else {
        return Vec::new();
    };
    named("LOAD_BASELINE_BIN", "A (LOAD_BASELINE_BIN)")
        .into_iter()
        .chain([server])
        .collect()
}

/// What one run of one side measured.
#[derive(Clone, Copy)]
struct Measured {
    fixed: Figures,
    sat: Figures,
    fixed_cpu_us: f64,
    sat_cpu_us: f64,
    peak_rss_mib: f64,
}

/// A server process on CPU 0, killed when dropped.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `bin serve` on `port` over `cluster`, pinned to CPU 0.
fn start(bin: &Path, cluster: &Path, certs: &Path, port: u16) -> Result<Server, BoxError> {
    let mut cmd = Command::new(bin);
    cmd.arg("serve")
        .arg("--inventory")
        .arg(cluster)
        .arg("--tls-cert")
        .arg(certs.join("tls.crt"))
        .arg("--tls-key")
        .arg(certs.join("tls.key"))
        .arg("--listen")
        .arg(format!("127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: sched_setaffinity on the calling (child) process between
    // fork and exec; it allocates nothing and touches only `set`.
    unsafe {
        cmd.pre_exec(|| {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(0, &mut set);
            if libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    Ok(Server(cmd.spawn()?))
}

/// CPU time (ns) of every thread of process `pid` so far.
pub fn process_cpu_ns(pid: u32) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// `VmHWM` of process `pid`, in MiB.
fn peak_rss_mib(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

/// Waits until the server answers the first sample as expected.
async fn ready(run: &Run, server: &mut Server) -> Result<(), BoxError> {
    let until = Instant::now() + Duration::from_secs(300);
    let sample = &run.samples[0];
    loop {
        if let Some(status) = server.0.try_wait()? {
            return Err(format!("the server exited while starting: {status}").into());
        }
        if let Ok(mut sender) = super::connect(run.addr, run.tls.clone()).await {
            if super::send(&mut sender, run.path, sample, run.expect(sample))
                .await
                .is_ok()
            {
                return Ok(());
            }
        }
        if Instant::now() > until {
            return Err("the server was not ready within 300 s".into());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// One run of one side: start, wait until ready, both phases, stop.
async fn run_side(
    side: &Side,
    base: &Run,
    cluster: &Path,
    certs: &Path,
    s: &Settings,
) -> Result<(Measured, usize), BoxError> {
    let port = free_port()?;
    let mut server = start(&side.bin, cluster, certs, port)?;
    let run = Arc::new(Run {
        addr: ([127, 0, 0, 1], port).into(),
        tls: base.tls.clone(),
        path: base.path,
        samples: base.samples.clone(),
        engine: base.engine,
    });
    ready(&run, &mut server).await?;
    let pid = server.0.id();
    println!("  {}:", side.name);
    let phases = measure(run, s, Some(pid)).await;
    Ok((
        Measured {
            fixed: phases.0,
            sat: phases.1,
            fixed_cpu_us: phases.0.server_cpu_us,
            sat_cpu_us: phases.1.server_cpu_us,
            peak_rss_mib: peak_rss_mib(pid),
        },
        phases.2,
    ))
}

fn free_port() -> Result<u16, BoxError> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// The pinned A/B: `runs` rounds over `sides` in alternating order; the
/// errors seen.
pub async fn run(
    sides: &[Side],
    base: &Run,
    cluster: &Path,
    certs: &Path,
    s: &Settings,
    runs: usize,
) -> Result<usize, BoxError> {
    // The client's threads (and the idle in-process server runtime's) off
    // CPU 0, which the server processes get alone.
    super::pin_threads()?;
    let mut errors = 0;
    let mut results: Vec<Vec<Measured>> = vec![Vec::new(); sides.len()];
    for round in 0..runs {
        println!("round {} of {runs} (load {}):", round + 1, super::loadavg());
        let mut order: Vec<usize> = (0..sides.len()).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for i in order {
            let (m, e) = run_side(&sides[i], base, cluster, certs, s).await?;
            errors += e;
            results[i].push(m);
        }
    }
    summarize(sides, &results, s.rate);
    Ok(errors)
}

/// Medians of each side, every run's figure, and B / A.
fn summarize(sides: &[Side], results: &[Vec<Measured>], rate: f64) {
    type Pick = fn(&Measured) -> f64;
    let rows: [(&str, Pick); 7] = [
        ("p50 at the fixed rate, ms", |m| m.fixed.p50),
        ("p99 at the fixed rate, ms", |m| m.fixed.p99),
        ("server CPU per request at the fixed rate, us", |m| {
            m.fixed_cpu_us
        }),
        ("saturation of the server's core, req/s", |m| m.sat.rate),
        ("server CPU per request at saturation, us", |m| m.sat_cpu_us),
        ("p99 at saturation, ms", |m| m.sat.p99),
        ("server peak RSS, MiB", |m| m.peak_rss_mib),
    ];
    println!(
        "pinned A/B, {rate:.0} req/s fixed rate, medians of {} runs (every run in brackets):",
        results.first().map_or(0, Vec::len)
    );
    for (label, pick) in rows {
        let medians: Vec<f64> = results
            .iter()
            .map(|r| median(r.iter().map(pick).collect()))
            .collect();
        let mut line = format!("  {label}:");
        for (side, (r, m)) in sides.iter().zip(results.iter().zip(&medians)) {
            let all: Vec<String> = r.iter().map(|x| format!("{:.3}", pick(x))).collect();
            line.push_str(&format!(" {} {m:.3} [{}]", side.name, all.join(" ")));
        }
        if let [a, b] = medians[..] {
            line.push_str(&format!(" | B/A {}", super::ratio(b, a)));
        }
        println!("{line}");
    }
    if let Some(b) = results.last() {
        let p99 = median(b.iter().map(|m| m.fixed.p99).collect());
        let cpu = median(b.iter().map(|m| m.fixed_cpu_us).collect());
        let sat = median(b.iter().map(|m| m.sat.rate).collect());
        let met = |ok: bool| if ok { "met" } else { "MISSED" };
        println!(
            "targets ({}): p99 at {rate:.0}/s {p99:.3} ms (< 1 ms: {}), server CPU per request {cpu:.1} us (< 100 us: {}), saturation of one core {sat:.0} req/s (> 10,000: {})",
            sides.last().map_or("", |s| s.name),
            met(p99 < 1.0),
            met(cpu < 100.0),
            met(sat > 10_000.0),
        );
    }
}
