//! Real clients through the LLM gateway: the official OpenAI and Anthropic Python SDKs
//! (`tests/gateway_clients/sdk_clients.py`, run from the venv `target/py`) stream text and tool
//! calls from a scripted upstream, once directly and once through the gateway. What the SDKs
//! parse must be identical both ways, and must be what the upstream sent. The upstream speaks
//! the providers' real SSE shapes: Anthropic's `event:` line on every event, OpenAI chat chunks
//! ending in `data: [DONE]`, Responses events carrying `type` and `sequence_number`.
//!
//! The venv comes from `cargo xtask setup`. Without it the test FAILS and says so (a skipped
//! client test looks exactly like a passing one); `AILERON_SKIP_PY_CLIENTS=1` skips it explicitly.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aileron::platform::home::Home;
use aileron::surfaces::daemon::{AppState, StateOptions, app};
use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::response::Response;
use serde_json::{Value, json};

const SKIP_VARIABLE: &str = "AILERON_SKIP_PY_CLIENTS";

pub(crate) fn venv_python() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/py/bin/python")
}

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/gateway_clients/sdk_clients.py")
}

/// Why the SDKs cannot run here, if they cannot.
fn missing_sdks() -> Option<String> {
    let python = venv_python();
    let probe = std::process::Command::new(&python).args(["-c", "import openai, anthropic"]).output();
    match probe {
        Ok(output) if output.status.success() => None,
        Ok(output) => Some(format!(
            "{} cannot import the SDKs: {}",
            python.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        )),
        Err(error) => Some(format!("{} is missing ({error})", python.display())),
    }
}

fn sse(events: &[(&str, Value)]) -> Vec<String> {
    events.iter().map(|(name, data)| format!("event: {name}\ndata: {data}\n\n")).collect()
}

fn anthropic_stream() -> Vec<String> {
    let delta = |index: u32, delta: Value| json!({"type": "content_block_delta", "index": index, "delta": delta});
    sse(&[
        (
            "message_start",
            json!({"type": "message_start", "message": {"id": "msg_01gw", "type": "message", "role": "assistant",
            "content": [], "model": "claude-test", "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 25, "output_tokens": 1}}}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ),
        ("ping", json!({"type": "ping"})),
        ("content_block_delta", delta(0, json!({"type": "text_delta", "text": "Listing your "}))),
        ("content_block_delta", delta(0, json!({"type": "text_delta", "text": "open issues."}))),
        ("content_block_stop", json!({"type": "content_block_stop", "index": 0})),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 1,
            "content_block": {"type": "tool_use", "id": "toolu_01gw", "name": "list_issues", "input": {}}}),
        ),
        ("content_block_delta", delta(1, json!({"type": "input_json_delta", "partial_json": ""}))),
        ("content_block_delta", delta(1, json!({"type": "input_json_delta", "partial_json": "{\"owner\": \"ac"}))),
        (
            "content_block_delta",
            delta(1, json!({"type": "input_json_delta", "partial_json": "me\", \"state\": \"open\"}"})),
        ),
        ("content_block_stop", json!({"type": "content_block_stop", "index": 1})),
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null},
            "usage": {"output_tokens": 42}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ])
}

fn chat_stream() -> Vec<String> {
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "chatcmpl-gw", "object": "chat.completion.chunk", "created": 1_700_000_000, "model": "gpt-test",
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]})
    };
    let call = |fields: Value| json!({"tool_calls": [fields]});
    let mut events: Vec<String> = [
        chunk(json!({"role": "assistant", "content": ""}), Value::Null),
        chunk(json!({"content": "Listing your "}), Value::Null),
        chunk(json!({"content": "open issues."}), Value::Null),
        chunk(call(json!({"index": 0, "id": "call_gw1", "type": "function", "function": {"name": "list_issues", "arguments": ""}})), Value::Null),
        chunk(call(json!({"index": 0, "function": {"arguments": "{\"owner\":"}})), Value::Null),
        chunk(call(json!({"index": 0, "function": {"arguments": "\"acme\",\"state\":\"open\"}"}})), Value::Null),
        chunk(json!({}), json!("tool_calls")),
    ]
    .iter()
    .map(|chunk| format!("data: {chunk}\n\n"))
    .collect();
    events.push("data: [DONE]\n\n".to_string());
    events
}

fn responses_stream() -> Vec<String> {
    let message = json!({"type": "message", "id": "msg_gw", "role": "assistant", "status": "completed",
        "content": [{"type": "output_text", "text": "Listing your open issues.", "annotations": []}]});
    let call = json!({"type": "function_call", "id": "fc_gw", "call_id": "call_gw1", "name": "list_issues",
        "arguments": "{\"owner\":\"acme\",\"state\":\"open\"}", "status": "completed"});
    let response = |status: &str, output: Value| {
        json!({"id": "resp_gw", "object": "response", "created_at": 1_700_000_000, "status": status, "model": "gpt-test",
            "output": output, "parallel_tool_calls": true, "tool_choice": "auto", "tools": [], "error": null,
            "incomplete_details": null, "instructions": null, "metadata": {}, "temperature": 1.0, "top_p": 1.0,
            "usage": if status == "completed" { json!({"input_tokens": 25, "output_tokens": 12, "total_tokens": 37,
                "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}}) } else { Value::Null }})
    };
    let events: Vec<(&str, Value)> = vec![
        ("response.created", json!({"response": response("in_progress", json!([]))})),
        ("response.in_progress", json!({"response": response("in_progress", json!([]))})),
        (
            "response.output_item.added",
            json!({"output_index": 0, "item": {"type": "message", "id": "msg_gw", "role": "assistant",
            "status": "in_progress", "content": []}}),
        ),
        (
            "response.content_part.added",
            json!({"item_id": "msg_gw", "output_index": 0, "content_index": 0,
            "part": {"type": "output_text", "text": "", "annotations": []}}),
        ),
        (
            "response.output_text.delta",
            json!({"item_id": "msg_gw", "output_index": 0, "content_index": 0, "delta": "Listing your ", "logprobs": []}),
        ),
        (
            "response.output_text.delta",
            json!({"item_id": "msg_gw", "output_index": 0, "content_index": 0, "delta": "open issues.", "logprobs": []}),
        ),
        (
            "response.output_text.done",
            json!({"item_id": "msg_gw", "output_index": 0, "content_index": 0,
            "text": "Listing your open issues.", "logprobs": []}),
        ),
        (
            "response.content_part.done",
            json!({"item_id": "msg_gw", "output_index": 0, "content_index": 0,
            "part": {"type": "output_text", "text": "Listing your open issues.", "annotations": []}}),
        ),
        ("response.output_item.done", json!({"output_index": 0, "item": message})),
        (
            "response.output_item.added",
            json!({"output_index": 1, "item": {"type": "function_call", "id": "fc_gw",
            "call_id": "call_gw1", "name": "list_issues", "arguments": "", "status": "in_progress"}}),
        ),
        (
            "response.function_call_arguments.delta",
            json!({"item_id": "fc_gw", "output_index": 1, "delta": "{\"owner\":"}),
        ),
        (
            "response.function_call_arguments.delta",
            json!({"item_id": "fc_gw", "output_index": 1, "delta": "\"acme\",\"state\":\"open\"}"}),
        ),
        (
            "response.function_call_arguments.done",
            json!({"item_id": "fc_gw", "output_index": 1,
            "arguments": "{\"owner\":\"acme\",\"state\":\"open\"}"}),
        ),
        ("response.output_item.done", json!({"output_index": 1, "item": call})),
        ("response.completed", json!({"response": response("completed", json!([message, call]))})),
    ];
    let numbered: Vec<(&str, Value)> = events
        .into_iter()
        .enumerate()
        .map(|(sequence, (name, mut data))| {
            data["type"] = json!(name);
            data["sequence_number"] = json!(sequence);
            (name, data)
        })
        .collect();
    sse(&numbered)
}

/// `(path, the credential header the SDK sent)` for every request the upstream saw.
type Seen = Arc<Mutex<Vec<(String, String)>>>;

/// The scripted upstream: each event leaves as its own chunk, a few milliseconds apart.
async fn upstream(seen: Seen) -> String {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let handler = move |request: Request| {
        let seen = seen.clone();
        async move {
            let path = request.uri().path().to_string();
            let header =
                |name: &str| request.headers().get(name).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
            let credential = format!("x-api-key={};authorization={}", header("x-api-key"), header("authorization"));
            seen.lock().unwrap().push((path.clone(), credential));
            let events = match path.as_str() {
                "/v1/messages" => anthropic_stream(),
                "/v1/chat/completions" => chat_stream(),
                "/v1/responses" => responses_stream(),
                _ => return Response::builder().status(404).body(Body::from("{}")).unwrap(),
            };
            let stream = futures_util::stream::unfold(events.into_iter(), |mut events| async move {
                let event = events.next()?;
                tokio::time::sleep(Duration::from_millis(2)).await;
                Some((Ok::<_, std::io::Error>(Bytes::from(event)), events))
            });
            Response::builder()
                .status(200)
                .header("content-type", "text/event-stream")
                .header("cache-control", "no-cache")
                .header("request-id", "req_gateway_clients")
                .body(Body::from_stream(stream))
                .unwrap()
        }
    };
    let router = axum::Router::new().fallback(handler);
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    format!("http://{addr}")
}

/// A daemon on a real socket whose gateway forwards both providers to `upstream`.
async fn daemon(upstream: &str) -> (tempfile::TempDir, String) {
    let (temp, url, _) = daemon_with_state(upstream).await;
    (temp, url)
}

/// The same, also returning the daemon's state (to lock its vault).
async fn daemon_with_state(upstream: &str) -> (tempfile::TempDir, String, Arc<AppState>) {
    let temp = tempfile::tempdir().unwrap();
    let home = Home::at(temp.path().join("home")).unwrap();
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mut options = StateOptions::new("gateway-clients-token".into());
    options.listen_port = addr.port();
    options.gateway_upstreams = Some((upstream.to_string(), upstream.to_string()));
    let state = AppState::open(home, options).unwrap();
    let served = state.clone();
    tokio::spawn(async move { axum::serve(listener, app(served)).await.unwrap() });
    (temp, format!("http://{addr}"), state)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_sdks_parse_streams_and_tool_calls_identically_through_the_gateway() {
    if let Some(missing) = missing_sdks() {
        if std::env::var(SKIP_VARIABLE).as_deref() == Ok("1") {
            eprintln!("skipping the SDK client test ({SKIP_VARIABLE}=1): {missing}");
            return;
        }
        panic!(
            "{missing}\nhint: run `cargo xtask setup` (it installs openai and anthropic into target/py), or set {SKIP_VARIABLE}=1"
        );
    }
    let seen: Seen = Arc::default();
    let upstream = upstream(seen.clone()).await;
    let (_temp, gateway) = daemon(&upstream).await;
    let (python, script) = (venv_python(), script());
    let args = [format!("direct={upstream}"), format!("gateway={gateway}")];
    let output =
        tokio::task::spawn_blocking(move || std::process::Command::new(python).arg(script).args(args).output())
            .await
            .unwrap()
            .expect("running sdk_clients.py");
    assert!(output.status.success(), "sdk_clients.py failed:\n{}", String::from_utf8_lossy(&output.stderr));
    let summaries: Value = serde_json::from_slice(&output.stdout).expect("sdk_clients.py prints JSON");
    assert_eq!(summaries["gateway"], summaries["direct"], "the SDKs parse the same through the gateway as directly");

    let parsed = &summaries["gateway"];
    let anthropic = &parsed["anthropic_messages"];
    assert_eq!(
        anthropic["content"],
        json!([{"type": "text", "text": "Listing your open issues."},
               {"type": "tool_use", "id": "toolu_01gw", "name": "list_issues", "input": {"owner": "acme", "state": "open"}}])
    );
    assert_eq!(
        (anthropic["stop_reason"].as_str(), anthropic["usage"]["output_tokens"].as_u64()),
        (Some("tool_use"), Some(42))
    );
    assert_eq!(anthropic["events"][0], "message_start");
    assert_eq!(anthropic["events"].as_array().unwrap().last().unwrap(), "message_stop");
    assert_eq!(
        parsed["openai_chat"],
        json!({"chunks": 7, "text": "Listing your open issues.", "finish_reason": "tool_calls",
               "tool_calls": [{"id": "call_gw1", "name": "list_issues", "arguments": {"owner": "acme", "state": "open"}}]})
    );
    let responses = &parsed["openai_responses"];
    let sequence: Vec<u64> = responses["events"].as_array().unwrap().iter().map(|e| e[1].as_u64().unwrap()).collect();
    assert_eq!(sequence, (0..15).collect::<Vec<u64>>(), "every event, in order");
    assert_eq!(responses["events"][14][0], "response.completed");
    assert_eq!(
        (
            &responses["streamed_text"],
            &responses["streamed_arguments"],
            &responses["output_text"],
            &responses["status"]
        ),
        (
            &json!("Listing your open issues."),
            &json!({"owner": "acme", "state": "open"}),
            &json!("Listing your open issues."),
            &json!("completed")
        )
    );
    assert_eq!(
        responses["output"],
        json!([{"type": "message", "text": "Listing your open issues."},
               {"type": "function_call", "name": "list_issues", "call_id": "call_gw1", "arguments": {"owner": "acme", "state": "open"}}])
    );

    // Three calls each way, and the SDKs' own credentials passed through the gateway unchanged.
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 6, "{seen:?}");
    assert_eq!(seen[..3], seen[3..], "the gateway forwards the same paths and credentials");
    let paths: Vec<&str> = seen[..3].iter().map(|(path, _)| path.as_str()).collect();
    assert_eq!(paths, ["/v1/messages", "/v1/chat/completions", "/v1/responses"]);
    // (Which header carries the key is the SDK's choice; that it arrives is the gateway's job.)
    assert!(seen[0].1.contains("sk-ant-test-key"), "{:?}", seen[0]);
    assert!(seen[1].1.contains("sk-test-key") && seen[2].1.contains("sk-test-key"), "{seen:?}");
}

/// While a vault exists and is locked the gateway answers 423 in each provider's own error
/// shape (SPEC §12); the official SDKs must surface the unlock instruction to the user.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_sdks_surface_the_vault_locked_message() {
    if let Some(missing) = missing_sdks() {
        if std::env::var(SKIP_VARIABLE).as_deref() == Ok("1") {
            eprintln!("skipping the SDK client test ({SKIP_VARIABLE}=1): {missing}");
            return;
        }
        panic!("{missing}\nhint: run `cargo xtask setup`, or set {SKIP_VARIABLE}=1");
    }
    let seen: Seen = Arc::default();
    let upstream = upstream(seen.clone()).await;
    let (_temp, base, state) = daemon_with_state(&upstream).await;
    let vault = state.services.vault.clone();
    tokio::task::spawn_blocking(move || vault.init(b"gateway test passphrase")).await.unwrap().unwrap();
    state.services.vault.lock();
    let (python, script) = (venv_python(), script());
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(python).arg(script).arg("--errors").arg(base).output()
    })
    .await
    .unwrap()
    .expect("running sdk_clients.py");
    assert!(output.status.success(), "sdk_clients.py failed:\n{}", String::from_utf8_lossy(&output.stderr));
    let surfaced: Value = serde_json::from_slice(&output.stdout).unwrap();
    for (call, error) in surfaced.as_object().unwrap() {
        assert_eq!(error["raised"], true, "{call}: {error}");
        assert_eq!(error["status_code"], 423, "{call}: {error}");
        assert!(
            error["message"].as_str().unwrap().contains("aileron vault unlock"),
            "{call} surfaces the unlock command: {error}"
        );
    }
    assert!(seen.lock().unwrap().is_empty(), "nothing reached the upstream while locked");
}
