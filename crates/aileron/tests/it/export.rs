//! The audit export (SPEC §17): every record reaches a real OTLP/HTTP receiver, decoded with the
//! official OpenTelemetry protobuf schema, in order and none lost — with the receiver down for a
//! while and the daemon killed meanwhile — and runs never wait on it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value;
use prost::Message;
use serde_json::Value;

use crate::campaign::kill_9;
use crate::cli::Cli;

/// A collector: answers 503 while `down`, else decodes each request and keeps, in arrival order,
/// every log record's body (the record line) and the request's `x-api-key`.
struct Receiver {
    up: Arc<AtomicBool>,
    bodies: Arc<Mutex<Vec<String>>>,
    keys: Arc<Mutex<Vec<Option<String>>>>,
    url: String,
}

async fn receiver() -> Receiver {
    let up = Arc::new(AtomicBool::new(true));
    let bodies: Arc<Mutex<Vec<String>>> = Arc::default();
    let keys: Arc<Mutex<Vec<Option<String>>>> = Arc::default();
    let app = {
        let (up, bodies, keys) = (up.clone(), bodies.clone(), keys.clone());
        axum::Router::new().route(
            "/v1/logs",
            axum::routing::post(move |headers: http::HeaderMap, body: axum::body::Bytes| {
                let (up, bodies, keys) = (up.clone(), bodies.clone(), keys.clone());
                async move {
                    if !up.load(Ordering::Acquire) {
                        return http::StatusCode::SERVICE_UNAVAILABLE;
                    }
                    let request = ExportLogsServiceRequest::decode(body).expect("an OTLP logs request");
                    keys.lock().unwrap().push(headers.get("x-api-key").map(|v| v.to_str().unwrap().to_string()));
                    let records = request.resource_logs.iter().flat_map(|r| &r.scope_logs).flat_map(|s| &s.log_records);
                    for record in records {
                        let Some(any_value::Value::StringValue(line)) =
                            record.body.as_ref().and_then(|b| b.value.clone())
                        else {
                            panic!("a record without its line: {record:?}")
                        };
                        let seq = record.attributes.iter().find(|a| a.key == "aileron.audit.seq");
                        assert!(seq.is_some(), "aileron.audit.seq is an attribute");
                        bodies.lock().unwrap().push(line);
                    }
                    http::StatusCode::OK
                }
            }),
        )
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Receiver { up, bodies, keys, url }
}

fn seq_of(line: &str) -> u64 {
    serde_json::from_str::<Value>(line).unwrap()["seq"].as_u64().unwrap()
}

#[test]
fn every_record_reaches_the_collector_in_order_through_an_outage_and_a_kill() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let collector = runtime.block_on(receiver());
    let cli = Cli::with_echo_action("count");
    let env = [
        ("AILERON_AUDIT_EXPORT", "otlp"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", collector.url.as_str()),
        ("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=collector%20secret"),
    ];
    let start = || {
        let started = cli.run_with(&["daemon", "start"], &env, None);
        assert!(started.status.success(), "{}", String::from_utf8_lossy(&started.stderr));
    };
    let status = || -> Value { serde_json::from_str(&cli.ok(&["daemon", "status", "--json"])).unwrap() };
    let caught_up = |what: &str| {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let export = status()["audit_export"].clone();
            if export["lag"] == 0 {
                return export;
            }
            assert!(Instant::now() < deadline, "{what}: the export never caught up: {export}");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    // Installing the action started a daemon without the export: this one has it.
    cli.ok(&["daemon", "stop"]);
    start();
    for _ in 0..10 {
        cli.ok(&["action", "run", "count"]);
    }
    caught_up("first runs");
    assert_eq!(collector.keys.lock().unwrap()[0].as_deref(), Some("collector secret"), "the headers are sent");

    // The collector goes down: runs go on, the lag and the error show, and the daemon is killed.
    collector.up.store(false, Ordering::Release);
    let during = Instant::now();
    for _ in 0..20 {
        cli.ok(&["action", "run", "count"]);
    }
    let ran_in = during.elapsed();
    let behind = status()["audit_export"].clone();
    assert!(behind["lag"].as_u64().unwrap() > 0, "{behind}");
    assert!(behind["last_error"].as_str().unwrap_or_default().contains("503"), "{behind}");
    assert!(cli.ok(&["daemon", "status"]).contains("record(s) behind"));
    let info: Value = serde_json::from_str(&std::fs::read_to_string(cli.home.join("daemon.json")).unwrap()).unwrap();
    kill_9(info["pid"].as_i64().unwrap() as i32);
    collector.up.store(true, Ordering::Release);
    start();
    for _ in 0..5 {
        cli.ok(&["action", "run", "count"]);
    }
    let done = caught_up("after the outage and the kill");

    let bodies = collector.bodies.lock().unwrap().clone();
    let seqs: Vec<u64> = bodies.iter().map(|line| seq_of(line)).collect();
    let head = done["exported_seq"].as_u64().unwrap();
    let mut first_seen = Vec::new();
    for seq in &seqs {
        if !first_seen.contains(seq) {
            first_seen.push(*seq);
        }
    }
    assert_eq!(first_seen, (1..=head).collect::<Vec<u64>>(), "every record, first seen in order");
    assert!(head >= 35, "{head}");
    eprintln!(
        "export: {head} records, {} deliveries ({} duplicates); 20 runs took {ran_in:?} with the collector down",
        seqs.len(),
        seqs.len() as u64 - head
    );

    // As a collector's file exporter would write them: checked by `verify --otlp-json`.
    let file = cli.scratch().join("collector.jsonl");
    let request = |lines: &[String]| {
        let records: Vec<Value> =
            lines.iter().map(|line| serde_json::json!({ "body": { "stringValue": line } })).collect();
        serde_json::json!({ "resourceLogs": [{ "scopeLogs": [{ "logRecords": records }] }] }).to_string()
    };
    let text: String = bodies.chunks(7).map(|chunk| format!("{}\n", request(chunk))).collect();
    std::fs::write(&file, &text).unwrap();
    let checked = cli.ok(&["audit", "verify", "--otlp-json", file.to_str().unwrap()]);
    assert!(checked.contains(&format!("records 1–{head}")), "{checked}");
    let missing: Vec<String> = bodies.iter().filter(|line| seq_of(line) != head / 2).cloned().collect();
    std::fs::write(&file, format!("{}\n", request(&missing))).unwrap();
    let refused = cli.run(&["audit", "verify", "--otlp-json", file.to_str().unwrap()]);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("missing"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
}

/// A collector that takes the request and never answers is given up on after the SDK's own
/// `OTEL_EXPORTER_OTLP_LOGS_TIMEOUT`, not a fixed one, and `status` says so by name.
#[test]
fn a_collector_that_never_answers_is_given_up_on_after_the_set_timeout() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", silent.local_addr().unwrap());
    // Accepts and reads, never writes: the connection stays open until the export gives up.
    let held: Arc<Mutex<Vec<std::net::TcpStream>>> = Arc::default();
    {
        let held = held.clone();
        std::thread::spawn(move || {
            for stream in silent.incoming().flatten() {
                held.lock().unwrap().push(stream);
            }
        });
    }
    let cli = Cli::with_echo_action("count");
    cli.ok(&["daemon", "stop"]);
    let env = [
        ("AILERON_AUDIT_EXPORT", "otlp"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", url.as_str()),
        ("OTEL_EXPORTER_OTLP_LOGS_TIMEOUT", "300"),
    ];
    let started = cli.run_with(&["daemon", "start"], &env, None);
    assert!(started.status.success(), "{}", String::from_utf8_lossy(&started.stderr));
    cli.ok(&["action", "run", "count"]);
    // Well under the 10 s an unset timeout means (the SDK's default): only the set one fits.
    let deadline = Instant::now() + Duration::from_secs(6);
    let export = loop {
        let status: Value = serde_json::from_str(&cli.ok(&["daemon", "status", "--json"])).unwrap();
        let export = status["audit_export"].clone();
        if export["last_error"].is_string() {
            break export;
        }
        assert!(Instant::now() < deadline, "no error after 6 s with a 300 ms timeout: {export}");
        std::thread::sleep(Duration::from_millis(100));
    };
    let error = export["last_error"].as_str().unwrap();
    assert!(error.contains("no answer in 300 ms") && error.contains("OTEL_EXPORTER_OTLP_LOGS_TIMEOUT"), "{error}");
    assert!(export["lag"].as_u64().unwrap() > 0, "{export}");
    assert!(!held.lock().unwrap().is_empty(), "the export reached the silent collector");
    cli.ok(&["daemon", "stop"]);
}
