//! Issue 36: connections an attacker cannot hold. A connection that sends
//! no complete request head within the header timeout is closed, on its
//! first request as on later ones (HTTP/1.1); one source address cannot
//! hold more than its cap; thousands of idle connections leave admission
//! reviews answered promptly.

use super::*;

/// Reads until the server closes the stream (or it fails); when that was.
pub(super) async fn closed_at<S: tokio::io::AsyncRead + Unpin>(mut stream: S) -> Instant {
    let mut buf = vec![0u8; 512];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return Instant::now(),
            Ok(_) => {}
        }
    }
}

/// A TLS connection to `addr` offering `alpn` (none when empty).
async fn handshake(
    addr: SocketAddr,
    config: Arc<rustls::ClientConfig>,
) -> Result<tokio_rustls::client::TlsStream<TcpStream>, BoxError> {
    let tcp = TcpStream::connect(addr).await?;
    let name = ServerName::IpAddress(addr.ip().into());
    Ok(TlsConnector::from(config).connect(name, tcp).await?)
}

pub(super) fn client_config(b: &CertBundle, alpn: &[u8]) -> Arc<rustls::ClientConfig> {
    let mut opts = ClientOpts::trusting(&[b]);
    opts.alpn = if alpn.is_empty() {
        Vec::new()
    } else {
        vec![alpn.to_vec()]
    };
    opts.tls_config()
}

/// The connection cut at the header timeout: not before it (slack for
/// the clocks of client and server), and long before the idle timeout.
fn assert_cut_at_header_timeout(what: &str, took: Duration, header: Duration, slack: Duration) {
    assert!(
        took + Duration::from_millis(200) >= header && took <= header + slack,
        "{what}: closed after {took:?}, header timeout {header:?}"
    );
}

/// Before, a client that completed the TLS handshake and sent nothing was
/// held until `--idle-timeout` (120 s): hyper-util's auto builder reads
/// the HTTP/2 preface with no timer, and HTTP/2 has no header timeout.
/// Now it is closed after the header timeout whatever its ALPN (HTTP/1.1,
/// h2, none), as is a first request head that never completes; an
/// HTTP/1.1 connection waiting for its next request head too. An HTTP/2
/// connection that has served a request keeps the idle timeout (it is how
/// kube-apiserver holds its connections). Each close counts in
/// `interlock_connections_closed_total{reason="header_timeout"}`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_without_a_request_head_is_closed_after_the_header_timeout() {
    let b = bundle();
    let header = Duration::from_secs(1);
    let slack = Duration::from_secs(10);
    let s = start_with(
        &b,
        TestReviewer::ready(),
        |c| c.tls_handshake_timeout = header,
        false,
    )
    .await;

    let mut silent = Vec::new();
    for alpn in [&b"http/1.1"[..], b"h2", b""] {
        let tls = handshake(s.addr, client_config(&b, alpn))
            .await
            .expect("handshake");
        let opened = Instant::now();
        silent.push((
            alpn,
            tokio::spawn(async move { closed_at(tls).await - opened }),
        ));
    }
    // A request head that never completes (no ALPN: the version is sniffed).
    let mut partial = handshake(s.addr, client_config(&b, b""))
        .await
        .expect("handshake");
    partial
        .write_all(b"POST /validate HTTP/1.1\r\nhost: localhost\r\n")
        .await
        .expect("write");
    let opened = Instant::now();
    let partial = tokio::spawn(async move { closed_at(partial).await - opened });

    for (alpn, took) in silent {
        let took = tokio::time::timeout(header + slack, took)
            .await
            .expect("closed")
            .expect("join");
        let what = format!("silent, ALPN {:?}", String::from_utf8_lossy(alpn));
        assert_cut_at_header_timeout(&what, took, header, slack);
    }
    let took = tokio::time::timeout(header + slack, partial)
        .await
        .expect("closed")
        .expect("join");
    assert_cut_at_header_timeout("a partial head", took, header, slack);

    // HTTP/1.1 after a request: hyper's header read timeout.
    let mut h1 = connect(s.addr, &ClientOpts::trusting(&[&b]))
        .await
        .expect("connect");
    assert_eq!(h1.get("/healthz").await.expect("healthz").0, StatusCode::OK);
    tokio::time::sleep(header * 3).await;
    assert!(
        h1.get("/healthz").await.is_err(),
        "an HTTP/1.1 connection outlived the header timeout between requests"
    );

    // HTTP/2 after a request: still open after three header timeouts.
    let mut opts = ClientOpts::trusting(&[&b]);
    opts.alpn = vec![b"h2".to_vec()];
    let mut h2 = connect(s.addr, &opts).await.expect("connect");
    assert_eq!(h2.alpn.as_deref(), Some(&b"h2"[..]));
    assert_eq!(h2.get("/healthz").await.expect("healthz").0, StatusCode::OK);
    tokio::time::sleep(header * 3).await;
    assert_eq!(
        h2.get("/healthz").await.expect("still open").0,
        StatusCode::OK
    );

    let (status, text) = h2.get("/metrics").await.expect("metrics");
    assert_eq!(status, StatusCode::OK);
    let text = String::from_utf8_lossy(&text);
    assert!(
        metric(
            &text,
            "interlock_connections_closed_total{reason=\"header_timeout\"}"
        )
        .is_some_and(|n| n >= 5.0),
        "{text}"
    );
    drop(h2);
    s.shutdown().await;
}

/// A TCP connection to `addr` from the loopback address `from`.
async fn connect_from(from: [u8; 4], addr: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.bind(SocketAddr::from((from, 0)))?;
    socket.connect(addr).await
}

/// Past `max_connections_per_source` from one address, a new connection
/// is closed as it is accepted, with a count by reason and a log line,
/// while another address is still served; the global cap is not reached.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_source_cannot_hold_more_than_its_cap_of_connections() {
    capture_logs();
    let b = bundle();
    let s = start_with(
        &b,
        TestReviewer::ready(),
        |c| c.max_connections_per_source = 2,
        false,
    )
    .await;
    let config = client_config(&b, b"http/1.1");
    let name = ServerName::IpAddress(s.addr.ip().into());
    let mut held = Vec::new();
    for _ in 0..2 {
        let tcp = connect_from([127, 0, 0, 1], s.addr).await.expect("tcp");
        let tls = TlsConnector::from(config.clone())
            .connect(name.clone(), tcp)
            .await
            .expect("within the cap");
        held.push(tls);
    }
    let tcp = connect_from([127, 0, 0, 1], s.addr).await.expect("tcp");
    let third = tokio::time::timeout(
        Duration::from_secs(5),
        TlsConnector::from(config.clone()).connect(name.clone(), tcp),
    )
    .await
    .expect("refused at once, not queued");
    assert!(
        third.is_err(),
        "a third connection from one source was served"
    );

    // Another source is served, and its /metrics shows the refusal.
    let tcp = connect_from([127, 0, 0, 2], s.addr).await.expect("tcp");
    let tls = TlsConnector::from(config.clone())
        .connect(name, tcp)
        .await
        .expect("another source is served");
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .expect("http");
    tokio::spawn(conn);
    let req = Request::get("/metrics")
        .header("host", "localhost")
        .body(Full::new(Bytes::new()).boxed())
        .expect("request");
    let resp = sender.send_request(req).await.expect("metrics");
    assert_eq!(resp.status(), StatusCode::OK);
    let text = resp.into_body().collect().await.expect("body").to_bytes();
    let text = String::from_utf8_lossy(&text);
    assert_eq!(
        metric(
            &text,
            "interlock_refused_connections_total{reason=\"max_connections_per_source\"}"
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        metric(
            &text,
            "interlock_refused_connections_total{reason=\"max_connections\"}"
        ),
        None,
        "{text}"
    );
    let logged = eventually(Duration::from_secs(5), || {
        String::from_utf8_lossy(&LOGS.lock().expect("logs")).contains(
            "connection refused: --max-connections-per-source connections are open from this address",
        )
    })
    .await;
    assert!(
        logged,
        "{}",
        String::from_utf8_lossy(&LOGS.lock().expect("logs"))
    );
    drop(held);
    s.shutdown().await;
}
