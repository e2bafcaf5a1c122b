//! Issue 36: thousands of idle TLS connections, the attack that kept every
//! `--max-connections` slot full, against the server's real listener on
//! loopback while a client sends AdmissionReviews.

use super::*;

/// Idle connections held at once (fewer only if the file-descriptor limit
/// cannot be raised that far: client and server ends are both here).
const IDLE: usize = 5000;
/// Handshakes in flight at once while they are opened.
const STEP: usize = 100;
/// The server's header timeout: longer than opening them all takes on a
/// loaded 2-core machine in a debug build (22 to 53 s measured, the slower
/// while other builds ran), so that all are held together.
const HEADER: Duration = Duration::from_secs(120);
/// How late after the header timeout a close may come.
const SLACK: Duration = Duration::from_secs(20);

/// Raise this process's soft RLIMIT_NOFILE to its hard limit; the
/// connections it then allows (two descriptors each, with room to spare).
fn raise_fd_limit() -> usize {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit read or write the struct given; no
    // memory is shared.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit), 0);
        limit.rlim_cur = limit.rlim_max;
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &limit), 0);
    }
    let fds = usize::try_from(limit.rlim_cur).unwrap_or(usize::MAX);
    fds.saturating_sub(1000) / 2
}

/// One review's answer: when it was sent, how long it took, and whether it
/// was the right AdmissionReview answer.
struct Answer {
    sent: Instant,
    took: Duration,
    ok: Result<(), String>,
}

/// Sends reviews on one HTTP/2 connection (as kube-apiserver does) until
/// `stop`, one at a time with a short pause.
async fn review_loop(addr: SocketAddr, b: CertBundle, stop: Arc<AtomicBool>) -> Vec<Answer> {
    let mut opts = ClientOpts::trusting(&[&b]);
    opts.alpn = vec![b"h2".to_vec()];
    let mut conn = connect(addr, &opts).await.expect("reviewer connects");
    let mut answers = Vec::new();
    let mut n = 0u64;
    while !stop.load(Ordering::SeqCst) {
        n += 1;
        let uid = format!("flood-{n}");
        let sent = Instant::now();
        let answer = conn.post("/validate", review_bytes(&uid)).await;
        let took = sent.elapsed();
        let ok = match answer {
            Ok((StatusCode::OK, body)) => {
                let r = response_of(&body);
                if r["uid"] == uid.as_str() && r["allowed"] == true {
                    Ok(())
                } else {
                    Err(format!("wrong answer: {r}"))
                }
            }
            Ok((status, body)) => Err(format!("{status}: {}", String::from_utf8_lossy(&body))),
            Err(e) => Err(e.to_string()),
        };
        answers.push(Answer { sent, took, ok });
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    answers
}

fn p99(mut took: Vec<Duration>) -> Duration {
    took.sort();
    took[(took.len() * 99).div_ceil(100).saturating_sub(1)]
}

/// Opens `count` idle TLS connections, `STEP` handshakes at a time, half
/// offering HTTP/1.1 and half h2; for each, when its handshake completed
/// and a task that resolves when the server closes it.
async fn open_idle(
    addr: SocketAddr,
    count: usize,
) -> Vec<(Instant, tokio::task::JoinHandle<Instant>)> {
    // An attacker verifies nothing: neither does this client, which spares
    // the machine the chain verification (the server's side is full).
    let configs = [
        super::certificate::trusting_anything(b"http/1.1"),
        super::certificate::trusting_anything(b"h2"),
    ];
    let mut idle = Vec::with_capacity(count);
    while idle.len() < count {
        let step = STEP.min(count - idle.len());
        let mut opening = tokio::task::JoinSet::new();
        for i in 0..step {
            let config = configs[(idle.len() + i) % 2].clone();
            opening.spawn(async move {
                let tcp = TcpStream::connect(addr).await?;
                let name = ServerName::IpAddress(addr.ip().into());
                let tls = TlsConnector::from(config).connect(name, tcp).await?;
                Ok::<_, std::io::Error>((Instant::now(), tls))
            });
        }
        while let Some(opened) = opening.join_next().await {
            let (at, tls) = opened
                .expect("join")
                .unwrap_or_else(|e| panic!("idle connection {} failed: {e}", idle.len()));
            idle.push((at, tokio::spawn(super::connections::closed_at(tls))));
        }
    }
    idle
}

/// `IDLE` idle TLS connections are opened in steps and held while a
/// client sends AdmissionReviews on its own connection: every review is
/// answered correctly, those sent while all are held are answered in a
/// median under 100 ms and a p99 under 1 s (see below), and each idle connection
/// is closed by the server within the header timeout of its handshake
/// (not before it, at most `SLACK` after it), counted by reason.
///
/// The server runs on a runtime of its own, as in production; the clients
/// share the test's. The per-source cap is raised: every connection here
/// comes from 127.0.0.1 (`one_source_cannot_hold_more_than_its_cap_of_connections`
/// tests the cap).
#[test]
fn thousands_of_idle_connections_are_held_and_cut_while_reviews_are_answered() {
    let idle_count = IDLE.min(raise_fd_limit());
    assert!(
        idle_count >= 1000,
        "the descriptor limit allows only {idle_count} connections"
    );
    let b = bundle();
    let tmp = tempfile::tempdir().expect("tempdir");
    write_plain(tmp.path(), &b);
    let mut config = config_for(tmp.path());
    config.tls_handshake_timeout = HEADER;
    config.max_connections = idle_count + 100;
    config.max_connections_per_source = idle_count + 100;
    let server_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("server runtime");
    let server = server_rt
        .block_on(Server::bind(config, TestReviewer::ready()))
        .expect("bind");
    let addr = server.local_addr();
    let (stop_server, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = server_rt.spawn(server.serve(async move {
        let _ = stopped.await;
    }));

    let client_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("client runtime");
    client_rt.block_on(async {
        let stop = Arc::new(AtomicBool::new(false));
        let reviews = tokio::spawn(review_loop(addr, b.clone(), stop.clone()));
        let started = Instant::now();
        let idle = open_idle(addr, idle_count).await;
        let all_open = Instant::now();
        let first_open = idle.iter().map(|(at, _)| *at).min().expect("some");
        eprintln!(
            "{idle_count} idle connections opened in {:?}",
            all_open - started
        );
        let text = scrape(addr, &b).await;
        let open = metric(&text, "interlock_open_connections").unwrap_or(0.0);
        assert!(
            open >= idle_count as f64,
            "only {open} connections open on the server once all {idle_count} were opened \
             (opening took {:?}, the header timeout is {HEADER:?})",
            all_open - started
        );
        let held_until = first_open + HEADER;
        // Reviews while all are held; then wait for every close.
        tokio::time::sleep_until(held_until.into()).await;
        let mut late = Vec::new();
        for (i, (opened, closed)) in idle.into_iter().enumerate() {
            let closed = tokio::time::timeout_at((opened + HEADER + SLACK).into(), closed)
                .await
                .unwrap_or_else(|_| {
                    panic!("idle connection {i} still open {SLACK:?} after the header timeout")
                })
                .expect("join");
            let took = closed - opened;
            if took + Duration::from_millis(500) < HEADER || took > HEADER + SLACK {
                late.push((i, took));
            }
        }
        assert!(
            late.is_empty(),
            "closed outside the header timeout: {late:?}"
        );
        stop.store(true, Ordering::SeqCst);
        let answers = reviews.await.expect("reviewer");

        let failed: Vec<_> = answers.iter().filter_map(|a| a.ok.clone().err()).collect();
        assert!(
            failed.is_empty(),
            "{} of {} reviews failed: {:?}",
            failed.len(),
            answers.len(),
            &failed[..failed.len().min(5)]
        );
        let held: Vec<Duration> = answers
            .iter()
            .filter(|a| a.sent >= all_open && a.sent + a.took <= held_until)
            .map(|a| a.took)
            .collect();
        assert!(
            held.len() >= 20,
            "only {} reviews while all connections were held",
            held.len()
        );
        let all: Vec<Duration> = answers.iter().map(|a| a.took).collect();
        let (p99_held, p99_all) = (p99(held.clone()), p99(all.clone()));
        eprintln!(
            "reviews: {} while held, p99 {p99_held:?}; {} in all, p99 {p99_all:?}",
            held.len(),
            all.len()
        );
        // Measured alone: p99 about 10 ms. The whole suite runs beside it
        // on two cores in a debug build, so the bounds here are the ones a
        // starved listener would break by far (reviews queued behind idle
        // connections wait seconds), not the figure itself.
        let p50_held = {
            let mut h = held.clone();
            h.sort();
            h[h.len() / 2]
        };
        assert!(
            p50_held < Duration::from_millis(100),
            "median {p50_held:?} while held"
        );
        assert!(
            p99_held < Duration::from_secs(1),
            "p99 {p99_held:?} while held"
        );

        let text = scrape(addr, &b).await;
        assert!(
            metric(
                &text,
                "interlock_connections_closed_total{reason=\"header_timeout\"}"
            )
            .is_some_and(|n| n >= idle_count as f64),
            "{text}"
        );
    });
    let _ = stop_server.send(());
    let _ =
        server_rt.block_on(async { tokio::time::timeout(Duration::from_secs(20), serving).await });
    server_rt.shutdown_background();
    client_rt.shutdown_background();
}
