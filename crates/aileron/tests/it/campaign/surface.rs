//! The local HTTP surface campaign: a real daemon process (its API, console and LLM gateway on
//! one loopback port) under the attacks a hostile page, a prompt-injected agent or another local
//! process can make — forged `Host`, foreign `Origin`, cross-site writes, slowloris, idle
//! connections by the thousand, oversized headers and bodies, and request-smuggling framings —
//! each refused or bounded, with the daemon answering `/v1/health` throughout.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aileron::surfaces::daemon::api::{Auth, ROUTES};
use serde_json::{Value, json};

use super::{Report, percentile, rss_and_fds, scaled};
use crate::cli::Cli;
use crate::support::ActionSpec;

/// A daemon started by the CLI on its own home, with the gateway's OpenAI upstream pointed at a
/// loopback recorder.
struct Rig {
    cli: Cli,
    addr: SocketAddr,
    token: String,
    pid: i32,
    upstream: Recorder,
    _runtime: tokio::runtime::Runtime,
}

/// The gateway's upstream: every request it receives, as `(method, path, body)`.
#[derive(Clone, Default)]
struct Recorder {
    seen: Arc<Mutex<Vec<(String, String, Vec<u8>)>>>,
}

impl Rig {
    fn start() -> Rig {
        aileron::platform::process::install_crypto_provider();
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let upstream = Recorder::default();
        let recorded = upstream.clone();
        let upstream_addr = runtime.block_on(async move {
            let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
            let addr = listener.local_addr().unwrap();
            let app = axum::Router::new().fallback(move |request: axum::extract::Request| {
                let recorded = recorded.clone();
                async move {
                    let (parts, body) = request.into_parts();
                    // A body the gateway cut off (over its cap) arrives aborted: recorded as such.
                    let bytes = axum::body::to_bytes(body, 128 * 1024 * 1024)
                        .await
                        .map_or_else(|_| b"<aborted>".to_vec(), |b| b.to_vec());
                    recorded.seen.lock().unwrap().push((parts.method.to_string(), parts.uri.path().to_string(), bytes));
                    axum::Json(json!({"id": "chatcmpl-surface", "object": "chat.completion", "choices": []}))
                }
            });
            tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
            addr
        });
        let cli = Cli::new();
        let upstream_url = format!("http://{upstream_addr}");
        let started = cli.run_with(&["daemon", "start"], &[("AILERON_OPENAI_UPSTREAM", upstream_url.as_str())], None);
        assert!(started.status.success(), "{}", String::from_utf8_lossy(&started.stderr));
        let hash = cli.install_guest("echo", &[]);
        cli.add_action(&ActionSpec::new("echo", "echo", &hash, "echo"));
        let info: Value =
            serde_json::from_str(&std::fs::read_to_string(cli.home.join("daemon.json")).unwrap()).unwrap();
        let addr: SocketAddr = info["url"].as_str().unwrap().trim_start_matches("http://").parse().unwrap();
        Rig {
            addr,
            token: info["token"].as_str().unwrap().to_string(),
            pid: info["pid"].as_i64().unwrap() as i32,
            cli,
            upstream,
            _runtime: runtime,
        }
    }

    fn host(&self) -> String {
        format!("127.0.0.1:{}", self.addr.port())
    }

    /// Writes `bytes` on a fresh connection and reads until the daemon closes it or `wait` passes
    /// without a byte.
    fn raw(&self, bytes: &[u8], wait: Duration) -> Vec<u8> {
        let mut stream = TcpStream::connect(self.addr).unwrap();
        stream.set_read_timeout(Some(wait)).unwrap();
        // The daemon may answer and close before it has read everything (a refused body).
        let _ = stream.write_all(bytes);
        let mut answer = Vec::new();
        let mut buffer = [0u8; 16 * 1024];
        loop {
            match stream.read(&mut buffer) {
                Ok(0) | Err(_) => break,
                Ok(n) => answer.extend_from_slice(&buffer[..n]),
            }
        }
        answer
    }

    /// `GET /v1/health` on a fresh connection: its latency, or why it failed.
    fn health(&self) -> Result<Duration, String> {
        Rig::probe_only(self.addr, self.host())()
    }

    fn audit_records(&self) -> usize {
        let mut count = 0;
        for entry in std::fs::read_dir(self.cli.home.join("audit")).unwrap().flatten() {
            count += std::fs::read_to_string(entry.path()).unwrap_or_default().lines().count();
        }
        count
    }
}

/// Polls `/v1/health` every few milliseconds on a fresh connection while an attack runs.
struct Prober {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<(Vec<u64>, Vec<String>)>,
}

impl Prober {
    fn start(rig: &Rig) -> Prober {
        let stop = Arc::new(AtomicBool::new(false));
        let (addr, host, flag) = (rig.addr, rig.host(), stop.clone());
        let thread = std::thread::spawn(move || {
            let probe = Rig::probe_only(addr, host);
            let (mut latencies, mut failures) = (Vec::new(), Vec::new());
            while !flag.load(Ordering::Relaxed) {
                match probe() {
                    Ok(latency) => latencies.push(latency.as_micros() as u64),
                    Err(error) => failures.push(error),
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            (latencies, failures)
        });
        Prober { stop, thread }
    }

    /// Health probes made, their p50 and p99 in µs; fails the campaign on any failed probe.
    fn finish(self, attack: &str) -> (usize, u64, u64) {
        self.stop.store(true, Ordering::Relaxed);
        let (mut latencies, failures) = self.thread.join().unwrap();
        assert!(
            failures.is_empty(),
            "{attack}: the daemon stopped answering /v1/health: {:?}",
            &failures[..failures.len().min(3)]
        );
        assert!(!latencies.is_empty(), "{attack}: no health probe ran");
        latencies.sort_unstable();
        (latencies.len(), percentile(&latencies, 50.0), percentile(&latencies, 99.0))
    }
}

impl Rig {
    fn probe_only(addr: SocketAddr, host: String) -> impl Fn() -> Result<Duration, String> {
        move || {
            let started = Instant::now();
            let mut stream =
                TcpStream::connect_timeout(&addr, Duration::from_secs(5)).map_err(|e| format!("connect: {e}"))?;
            stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            write!(stream, "GET /v1/health HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")
                .map_err(|e| format!("write: {e}"))?;
            let mut answer = Vec::new();
            stream.read_to_end(&mut answer).map_err(|e| format!("read: {e}"))?;
            if answer.starts_with(b"HTTP/1.1 200") {
                Ok(started.elapsed())
            } else {
                Err(String::from_utf8_lossy(&answer).into_owned())
            }
        }
    }
}

/// The status codes of every response in `answer` (a pipelined second response would show).
fn statuses(answer: &[u8]) -> Vec<u16> {
    let text = String::from_utf8_lossy(answer);
    text.match_indices("HTTP/1.1 ")
        .filter(|(at, _)| *at == 0 || text[..*at].ends_with('\n'))
        .filter_map(|(at, _)| text.get(at + 9..at + 12)?.parse().ok())
        .collect()
}

/// A route's path with its parameters filled in.
fn concrete(path: &str) -> String {
    path.replace("{name}", "echo").replace("{id}", "0000").replace("{*path}", "p/q")
}

/// Every route, with a forged `Host`, a foreign `Origin` (a hostile page's fetch), and — for
/// the console's cookie — a write without the page's CSRF secret or without any `Origin`: each
/// refused with 403 before any handler runs, and nothing is written (the audit log does not move).
#[test]
fn every_route_refuses_forged_hosts_foreign_origins_and_cross_site_writes() {
    let rig = Rig::start();
    let before = rig.audit_records();
    let client = reqwest::blocking::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let base = format!("http://{}", rig.addr);
    let login: Value = client
        .post(format!("{base}/v1/web/login-tickets"))
        .bearer_auth(&rig.token)
        .json(&json!({}))
        .send()
        .unwrap()
        .json()
        .unwrap();
    let signed_in =
        client.get(format!("{base}/approvals/login?ticket={}", login["ticket"].as_str().unwrap())).send().unwrap();
    let cookie = signed_in.headers()["set-cookie"].to_str().unwrap().split(';').next().unwrap().to_string();
    let own_origin = format!("http://{}", rig.host());
    let forged_hosts = ["evil.example", "127.0.0.1.evil.example", "localhost.evil.example:80", "127.0.0.2", "[::1]:1"];
    let foreign_origins = ["http://evil.example", "null", "http://127.0.0.1", "https://127.0.0.1:1", "file://"];
    let mut attempts = 0;
    let mut refused = 0;
    let mut problems = Vec::new();
    let mut check = |what: String, response: reqwest::blocking::Response| {
        attempts += 1;
        if response.status() == 403 {
            refused += 1;
        } else {
            problems.push(format!("{what}: {}", response.status()));
        }
    };
    for route in ROUTES {
        let method = reqwest::Method::from_bytes(route.method.as_bytes()).unwrap();
        let url = format!("{base}{}", concrete(route.path));
        let body = || json!({"args": {}, "approved": true, "path": "x", "value": "y"});
        for host in forged_hosts {
            let response = client
                .request(method.clone(), &url)
                .header("host", host)
                .bearer_auth(&rig.token)
                .json(&body())
                .send()
                .unwrap();
            check(format!("{} {} with Host {host}", route.method, route.path), response);
        }
        for origin in foreign_origins {
            let response = client
                .request(method.clone(), &url)
                .header("origin", origin)
                .bearer_auth(&rig.token)
                .json(&body())
                .send()
                .unwrap();
            check(format!("{} {} with Origin {origin}", route.method, route.path), response);
        }
        let cookie_reaches = route.path.starts_with("/v1/")
            && !matches!(route.auth, Auth::Public | Auth::OAuthState | Auth::Upstream | Auth::McpBearer);
        if cookie_reaches && !method.is_safe() {
            let response = client
                .request(method.clone(), &url)
                .header("cookie", &cookie)
                .header("origin", &own_origin)
                .json(&body())
                .send()
                .unwrap();
            check(format!("{} {} by cookie without the CSRF secret", route.method, route.path), response);
            let response = client
                .request(method.clone(), &url)
                .header("cookie", &cookie)
                .header("x-aileron-csrf", "0".repeat(64))
                .json(&body())
                .send()
                .unwrap();
            check(format!("{} {} by cookie without an Origin", route.method, route.path), response);
        }
    }
    assert!(problems.is_empty(), "not refused:\n{}", problems.join("\n"));
    assert_eq!(rig.audit_records(), before, "a refused request wrote nothing");
    assert!(rig.upstream.seen.lock().unwrap().is_empty(), "a refused gateway request never reached the upstream");
    let mut report = Report::new("surface-origins");
    report.set("routes", ROUTES.len());
    report.set("attempts", attempts);
    report.set("refused", refused);
    report.finish();
}

/// Request framings a front end and the daemon could disagree on (CL.TE, TE.CL, obfuscated
/// `Transfer-Encoding`, duplicate or signed `Content-Length`, bare LF, oversized chunk sizes),
/// each hiding a second request for the gateway's upstream: the daemon answers at most one
/// response per connection for them, and the hidden request never reaches the upstream.
#[test]
fn request_smuggling_framings_never_reach_the_upstream_as_a_second_request() {
    let rig = Rig::start();
    let host = rig.host();
    let hidden = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: 12\r\n\r\n{{\"SMUGGLED\"}}"
    );
    let body = |prefix: &str| format!("{prefix}{hidden}");
    let head = |extra: &str| {
        format!("POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n{extra}\r\n")
    };
    let zero_chunk = body("0\r\n\r\n");
    let forms: Vec<(&str, String)> = vec![
        (
            "CL.TE",
            format!(
                "{}{zero_chunk}",
                head(&format!("Content-Length: {}\r\nTransfer-Encoding: chunked\r\n", zero_chunk.len()))
            ),
        ),
        ("TE.CL", format!("{}{zero_chunk}", head("Transfer-Encoding: chunked\r\nContent-Length: 3\r\n"))),
        (
            "TE obfuscated: xchunked",
            format!(
                "{}{zero_chunk}",
                head(&format!("Content-Length: {}\r\nTransfer-Encoding: xchunked\r\n", zero_chunk.len()))
            ),
        ),
        (
            "TE obfuscated: space before colon",
            format!(
                "{}{zero_chunk}",
                head(&format!("Content-Length: {}\r\nTransfer-Encoding : chunked\r\n", zero_chunk.len()))
            ),
        ),
        (
            "TE obfuscated: chunked, identity",
            format!(
                "{}{zero_chunk}",
                head(&format!("Content-Length: {}\r\nTransfer-Encoding: chunked, identity\r\n", zero_chunk.len()))
            ),
        ),
        ("TE twice", format!("{}{zero_chunk}", head("Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n"))),
        (
            "TE tab",
            format!(
                "{}{zero_chunk}",
                head(&format!("Content-Length: {}\r\nTransfer-Encoding:\tchunked\r\n", zero_chunk.len()))
            ),
        ),
        (
            "TE line folding",
            format!(
                "{}{zero_chunk}",
                head(&format!("Content-Length: {}\r\nTransfer-Encoding:\r\n chunked\r\n", zero_chunk.len()))
            ),
        ),
        ("CL twice, different", format!("{}{}", head("Content-Length: 2\r\nContent-Length: 200\r\n"), body("{}"))),
        ("CL list", format!("{}{}", head("Content-Length: 2, 200\r\n"), body("{}"))),
        ("CL signed", format!("{}{}", head("Content-Length: +2\r\n"), body("{}"))),
        ("CL hex", format!("{}{}", head("Content-Length: 0x2\r\n"), body("{}"))),
        (
            "chunk size overflow",
            format!("{}{}", head("Transfer-Encoding: chunked\r\n"), body("1000000000000000002\r\n{}\r\n0\r\n\r\n")),
        ),
        // The hidden request as chunk data after a chunk extension with a NUL and a bare CR: only
        // a parser that split the chunk line differently would read it as a request.
        (
            "chunk extension junk",
            format!(
                "{}2;\0x\rq\r\n{{}}\r\n{:x}\r\n{hidden}\r\n0\r\n\r\n",
                head("Transfer-Encoding: chunked\r\n"),
                hidden.len()
            ),
        ),
        (
            "bare LF",
            format!(
                "POST /v1/chat/completions HTTP/1.1\nHost: {host}\nContent-Length: 0\nTransfer-Encoding: chunked\n\n{zero_chunk}"
            ),
        ),
        (
            "HTTP/1.0 with TE",
            format!(
                "POST /v1/chat/completions HTTP/1.0\r\nHost: {host}\r\nTransfer-Encoding: chunked\r\n\r\n{zero_chunk}"
            ),
        ),
    ];
    let mut outcomes = Vec::new();
    let mut problems = Vec::new();
    for (name, bytes) in &forms {
        let before = rig.upstream.seen.lock().unwrap().len();
        let answer = rig.raw(bytes.as_bytes(), Duration::from_millis(1500));
        let codes = statuses(&answer);
        if codes.len() > 1 {
            problems.push(format!("{name}: {} responses on one connection {codes:?}", codes.len()));
        }
        let reached: Vec<Vec<u8>> =
            rig.upstream.seen.lock().unwrap()[before..].iter().map(|(_, _, body)| body.clone()).collect();
        if reached.iter().any(|body| body.starts_with(b"{\"SMUGGLED")) {
            problems.push(format!("{name}: the hidden request reached the upstream as a request of its own"));
        }
        if reached.len() > 1 {
            problems.push(format!("{name}: {} requests reached the upstream", reached.len()));
        }
        outcomes.push(json!({"form": name, "statuses": codes, "upstream_requests": reached.len()}));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    let seen = rig.upstream.seen.lock().unwrap().len();
    rig.health().expect("the daemon serves after the smuggling forms");
    let mut report = Report::new("surface-smuggling");
    report.set("forms", json!(outcomes));
    report.set("upstream_requests", seen);
    report.finish();
}

/// Headers and bodies past every limit, on the API, `/mcp` and the gateway: each answered with
/// an error (413/431/400) or a closed connection, the daemon's memory bounded, health served.
#[test]
fn oversized_headers_and_bodies_are_refused_and_memory_stays_bounded() {
    let rig = Rig::start();
    let host = rig.host();
    let prober = Prober::start(&rig);
    let (rss_before, _) = rss_and_fds(rig.pid);
    let mut outcomes = Vec::new();
    let mut problems = Vec::new();
    let mut attack = |name: &str, request: Vec<u8>, allowed: &[u16]| {
        let answer = rig.raw(&request, Duration::from_secs(10));
        let codes = statuses(&answer);
        let ok = match codes.first() {
            None => true, // closed without an answer: bounded too
            Some(code) => allowed.contains(code),
        };
        if !ok {
            problems.push(format!("{name}: {codes:?} {}", String::from_utf8_lossy(&answer[..answer.len().min(300)])));
        }
        outcomes.push(json!({"attack": name, "statuses": codes}));
    };
    let header_value = "a".repeat(1024 * 1024);
    attack(
        "1 MiB header",
        format!("GET /v1/health HTTP/1.1\r\nHost: {host}\r\nX-Big: {header_value}\r\n\r\n").into_bytes(),
        &[431, 400],
    );
    let many: String = (0..10_000).map(|i| format!("X-H{i}: v\r\n")).collect();
    attack(
        "10,000 headers",
        format!("GET /v1/health HTTP/1.1\r\nHost: {host}\r\n{many}\r\n").into_bytes(),
        &[431, 400],
    );
    let long_path = "a".repeat(1024 * 1024);
    attack(
        "1 MiB request target",
        format!("GET /{long_path} HTTP/1.1\r\nHost: {host}\r\n\r\n").into_bytes(),
        &[414, 431, 400],
    );
    let big = 72 * 1024 * 1024;
    let token = rig.token.clone();
    for (path, auth) in [
        ("/v1/actions/echo/run", format!("Authorization: Bearer {token}\r\n")),
        ("/v1/actions/install", format!("Authorization: Bearer {token}\r\n")),
        ("/v1/secrets", format!("Authorization: Bearer {token}\r\n")),
        ("/mcp", format!("Authorization: Bearer {token}\r\nAccept: application/json, text/event-stream\r\n")),
        ("/v1/chat/completions", String::new()),
    ] {
        let mut declared = format!("POST {path} HTTP/1.1\r\nHost: {host}\r\n{auth}Content-Type: application/json\r\nContent-Length: {big}\r\n\r\n").into_bytes();
        declared.extend(std::iter::repeat_n(b' ', big));
        attack(&format!("{path}: 72 MiB declared body"), declared, &[413, 400]);
        let mut chunked = format!("POST {path} HTTP/1.1\r\nHost: {host}\r\n{auth}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n").into_bytes();
        let chunk = vec![b' '; 1024 * 1024];
        for _ in 0..72 {
            chunked.extend(format!("{:x}\r\n", chunk.len()).as_bytes());
            chunked.extend(&chunk);
            chunked.extend(b"\r\n");
        }
        chunked.extend(b"0\r\n\r\n");
        attack(&format!("{path}: 72 MiB chunked body"), chunked, &[413, 400]);
    }
    let (rss_after, _) = rss_and_fds(rig.pid);
    let (probes, p50, p99) = prober.finish("oversized requests");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // The gateway streams a body upstream as it arrives and cuts it off at its cap: the upstream
    // may see the start of a chunked one, never a whole one past the cap.
    for (_, path, body) in rig.upstream.seen.lock().unwrap().iter() {
        assert!(body == b"<aborted>", "an oversized body reached the upstream whole ({path}, {} bytes)", body.len());
    }
    let grown = rss_after.saturating_sub(rss_before);
    assert!(grown < 64 * 1024 * 1024, "the daemon's RSS grew by {} MiB while refusing bodies", grown / (1024 * 1024));
    let mut report = Report::new("surface-oversized");
    report.set("attacks", json!(outcomes));
    report.set("rss_before_mib", rss_before / (1024 * 1024));
    report.set("rss_after_mib", rss_after / (1024 * 1024));
    report.set("health_probes", probes);
    report.set("health_p50_us", p50);
    report.set("health_p99_us", p99);
    report.finish();
}

/// Thousands of idle connections and a slowloris trickle at once: the daemon keeps answering
/// health probes throughout, and closes every idle and every trickling connection within its
/// header-read timeout, giving back its file descriptors.
#[test]
fn idle_connections_by_the_thousand_and_slowloris_are_closed_while_the_daemon_serves() {
    let rig = Rig::start();
    let host = rig.host();
    let idle_count = scaled(5_000, 5_000);
    let trickle_count = scaled(200, 500);
    let (_, fds_before) = rss_and_fds(rig.pid);
    let prober = Prober::start(&rig);
    let opened = Instant::now();
    let mut idle = Vec::with_capacity(idle_count);
    for _ in 0..idle_count {
        idle.push(TcpStream::connect(rig.addr).expect("opening an idle connection"));
    }
    // Slowloris: a request head that never ends, one byte every 500 ms.
    let closed_trickles = Arc::new(AtomicUsize::new(0));
    let trickles: Vec<_> = (0..trickle_count)
        .map(|_| {
            let (addr, host, closed) = (rig.addr, host.clone(), closed_trickles.clone());
            std::thread::spawn(move || {
                let mut stream = TcpStream::connect(addr).unwrap();
                let started = Instant::now();
                let head = format!("GET /v1/health HTTP/1.1\r\nHost: {host}\r\nX-Slow: ");
                if stream.write_all(head.as_bytes()).is_err() {
                    closed.fetch_add(1, Ordering::Relaxed);
                    return started.elapsed();
                }
                while started.elapsed() < Duration::from_secs(60) {
                    std::thread::sleep(Duration::from_millis(500));
                    if stream.write_all(b"a").is_err() {
                        break;
                    }
                    // A closed connection shows as a read of 0 (or a reset) on a non-blocking peek.
                    stream.set_nonblocking(true).unwrap();
                    let mut byte = [0u8; 1];
                    let gone = match stream.peek(&mut byte) {
                        Ok(0) => true,
                        Ok(_) => true, // an answer to an unfinished head is a refusal too
                        Err(error) => error.kind() != std::io::ErrorKind::WouldBlock,
                    };
                    stream.set_nonblocking(false).unwrap();
                    if gone {
                        break;
                    }
                }
                if started.elapsed() < Duration::from_secs(60) {
                    closed.fetch_add(1, Ordering::Relaxed);
                }
                started.elapsed()
            })
        })
        .collect();
    let (_, fds_peak) = rss_and_fds(rig.pid);
    // Every idle connection is closed by the daemon: a read returns 0 or fails with a reset.
    let mut idle_closed_after = Vec::new();
    for mut stream in idle {
        stream
            .set_read_timeout(Some(
                Duration::from_secs(60).saturating_sub(opened.elapsed()).max(Duration::from_millis(1)),
            ))
            .unwrap();
        let mut byte = [0u8; 1];
        match stream.read(&mut byte) {
            Ok(0) => idle_closed_after.push(opened.elapsed().as_millis() as u64),
            Err(error)
                if error.kind() != std::io::ErrorKind::WouldBlock && error.kind() != std::io::ErrorKind::TimedOut =>
            {
                idle_closed_after.push(opened.elapsed().as_millis() as u64)
            }
            _ => {}
        }
    }
    let trickle_lifetimes: Vec<u64> = trickles.into_iter().map(|t| t.join().unwrap().as_millis() as u64).collect();
    let (probes, p50, p99) = prober.finish("idle connections and slowloris");
    assert_eq!(idle_closed_after.len(), idle_count, "every idle connection is closed by the daemon within 60 s");
    assert_eq!(
        closed_trickles.load(Ordering::Relaxed),
        trickle_count,
        "every slowloris connection is closed within 60 s"
    );
    // The descriptors come back.
    let mut fds_after = usize::MAX;
    for _ in 0..100 {
        fds_after = rss_and_fds(rig.pid).1;
        if fds_after <= fds_before + 8 {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        fds_after <= fds_before + 8,
        "the daemon holds {fds_after} descriptors after the attack ({fds_before} before)"
    );
    idle_closed_after.sort_unstable();
    let mut lifetimes = trickle_lifetimes;
    lifetimes.sort_unstable();
    let mut report = Report::new("surface-connections");
    report.set("idle_connections", idle_count);
    report.set("idle_closed_by_ms_max", idle_closed_after.last().copied().unwrap_or(0));
    report.set("slowloris_connections", trickle_count);
    report.set("slowloris_lifetime_ms_max", lifetimes.last().copied().unwrap_or(0));
    report.set("daemon_fds_before", fds_before);
    report.set("daemon_fds_peak", fds_peak);
    report.set("daemon_fds_after", fds_after);
    report.set("health_probes", probes);
    report.set("health_p50_us", p50);
    report.set("health_p99_us", p99);
    report.finish();
}
