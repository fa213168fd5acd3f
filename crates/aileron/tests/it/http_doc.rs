//! The checked-in HTTP API description (`docs/http-api.json`) matches the served routes.
//! Regenerate with `UPDATE_HTTP_API=1 cargo xtask test http_doc`.

use aileron::surfaces::daemon::api::{ROUTES, http_api_document};
use http::StatusCode;

use crate::support::Harness;

#[test]
fn the_checked_in_description_matches_the_route_table() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/http-api.json");
    let generated = serde_json::to_string_pretty(&http_api_document()).unwrap() + "\n";
    if std::env::var_os("UPDATE_HTTP_API").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &generated).unwrap();
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "docs/http-api.json is out of date; regenerate it with UPDATE_HTTP_API=1 and review the diff"
    );
}

#[tokio::test]
async fn every_described_route_is_served() {
    let harness = Harness::new();
    for route in ROUTES {
        let (method, path) = (route.method, route.path);
        if path.ends_with("/watch") || aileron::dataplane::gateway::is_gateway_path(&http::Method::HEAD, path) {
            continue; // SSE streams never end, and gateway paths go upstream; both have their own tests.
        }
        let concrete = path
            .replace("{name}", "no-such-action")
            .replace("{id}", "no-such-record")
            .replace("{*path}", "no/such/secret");
        let response = harness.request(method, &concrete, None).await;
        assert_ne!(response.status, StatusCode::METHOD_NOT_ALLOWED, "{method} {path}");
        if response.status == StatusCode::NOT_FOUND {
            assert!(
                response.body["error"]["code"].is_string(),
                "{method} {path} is routed (our 404, not the fallback)"
            );
        }
    }
}

#[test]
fn every_route_declares_what_it_answers() {
    let silent: Vec<String> = ROUTES
        .iter()
        .filter(|route| route.answers.is_none())
        .map(|route| format!("{} {}", route.method, route.path))
        .collect();
    assert!(silent.is_empty(), "declare what these answer in the route table: {silent:#?}");
}

/// The check every harness request runs: a body of the declared type passes; one with a field
/// missing, a field of the wrong type or a field the type does not have is refused.
#[tokio::test]
async fn a_body_that_is_not_the_declared_type_is_refused() {
    let harness = Harness::new();
    let (path, status, conforms) = crate::support::declared_answer("GET", "/v1/status").expect("declared");
    assert_eq!((path, status), ("/v1/status", 200));
    let served = harness.request("GET", "/v1/status", None).await;
    assert_eq!(served.status, StatusCode::OK);
    conforms(&served.body).expect("the served status conforms");
    let mut missing = served.body.clone();
    missing.as_object_mut().unwrap().remove("counts");
    assert!(conforms(&missing).is_err(), "a missing field");
    let mut mistyped = served.body.clone();
    mistyped["pid"] = "one".into();
    assert!(conforms(&mistyped).is_err(), "a mistyped field");
    let mut extra = served.body.clone();
    extra["undeclared"] = true.into();
    assert!(conforms(&extra).is_err(), "a field the type does not have");
    let of = |method, path| crate::support::declared_answer(method, path).map(|(path, status, _)| (path, status));
    assert_eq!(of("GET", "/v1/audit/verify"), Some(("/v1/audit/verify", 200)), "the fixed path wins");
    assert_eq!(of("GET", "/v1/audit/01JD"), Some(("/v1/audit/{id}", 200)));
    assert_eq!(of("DELETE", "/v1/secrets/a/b"), None, "no body to check");
    assert_eq!(of("GET", "/v1/audit/01JD/more"), None, "no such route");
}
