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
