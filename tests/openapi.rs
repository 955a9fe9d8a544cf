//! The OpenAPI document: a snapshot, so that every change of the API shows in review, and
//! a check that every documented operation is routed (no 405, no fallback 404).

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use tower::ServiceExt;

use jobstore::http::{AppState, HttpConfig, openapi, router};
use jobstore::store::{self, StoreConfig};

const SNAPSHOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/snapshots/openapi.json");

#[test]
fn openapi_document_matches_the_snapshot() {
    let current = serde_json::to_string_pretty(&openapi::document()).unwrap() + "\n";
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(SNAPSHOT, &current).unwrap();
        return;
    }
    let stored = std::fs::read_to_string(SNAPSHOT).unwrap_or_default();
    if stored != current {
        let new = format!("{SNAPSHOT}.new");
        std::fs::write(&new, &current).unwrap();
        panic!(
            "the OpenAPI document changed: review `diff {SNAPSHOT} {new}`, then run \
             `UPDATE_SNAPSHOTS=1 cargo test --test openapi` and commit the snapshot"
        );
    }
}

#[tokio::test]
async fn every_documented_operation_is_routed() {
    let dir = tempfile::tempdir().unwrap();
    let store = store::open(&StoreConfig {
        url: format!("sqlite://{}/jobstore.db", dir.path().display()),
        max_connections: 2,
        acquire_timeout: std::time::Duration::from_secs(5),
        migrate: true,
    })
    .await
    .unwrap();
    let app = router(AppState::new(Arc::clone(&store), HttpConfig::default()));
    let ops = openapi::operations();
    assert!(ops.len() >= 27, "{} operations documented", ops.len());
    for op in ops {
        let path = op
            .path
            .replace("{cluster}", "c1")
            .replace("{id}", &"a".repeat(32))
            .replace("{jobid}", &"b".repeat(32))
            .replace("{triggerid}", &"c".repeat(32))
            .replace("{component}", "dispatcher")
            .replace("{kind}", "checkpoint")
            .replace("{name}", "1");
        let req = Request::builder()
            .method(op.method.to_uppercase().as_str())
            .uri(&path)
            .header("content-type", "application/json")
            .body(Body::from("{}"))
            .unwrap();
        let res = app.clone().oneshot(req).await.unwrap();
        let status = res.status();
        let body = axum::body::to_bytes(res.into_body(), 1 << 20)
            .await
            .unwrap();
        let text = String::from_utf8_lossy(&body);
        assert_ne!(
            status,
            StatusCode::METHOD_NOT_ALLOWED,
            "{} {path}",
            op.method
        );
        assert!(
            !text.contains("Unable to load requested file"),
            "{} {path} is documented but not routed: {status} {text}",
            op.method
        );
    }
    // And an undocumented route is the fallback's 404.
    let res = app
        .oneshot(Request::get("/v1/nothing").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::NOT_FOUND);
}

#[test]
fn documented_paths_cover_the_contract() {
    let doc = openapi::document();
    let paths = doc["paths"].as_object().unwrap();
    for (path, methods) in [
        ("/v1/clusters/{cluster}/job-results", &["get", "post"][..]),
        (
            "/v1/clusters/{cluster}/job-results/{id}",
            &["get", "head", "delete"],
        ),
        ("/v1/clusters/{cluster}/job-results/{id}/clean", &["post"]),
        (
            "/v1/clusters/{cluster}/application-results",
            &["get", "post"],
        ),
        (
            "/v1/clusters/{cluster}/application-results/{id}",
            &["get", "head", "delete"],
        ),
        (
            "/v1/clusters/{cluster}/application-results/{id}/clean",
            &["post"],
        ),
        ("/jobs/{jobid}/savepoints", &["post"]),
        ("/jobs/{jobid}/stop", &["post"]),
        ("/jobs/{jobid}/savepoints/{triggerid}", &["get"]),
        ("/v1/clusters/{cluster}/jobs/{jobid}/savepoints", &["post"]),
        ("/v1/clusters/{cluster}/jobs/{jobid}/stop", &["post"]),
        (
            "/v1/clusters/{cluster}/jobs/{jobid}/savepoints/{triggerid}",
            &["get"],
        ),
        (
            "/v1/clusters/{cluster}/jobs/{jobid}/savepoints/{triggerid}/complete",
            &["post"],
        ),
        ("/v1/clusters/{cluster}/savepoint-operations", &["get"]),
        ("/v1/clusters/{cluster}", &["get", "put"]),
        ("/v1/clusters", &["get"]),
        ("/v1/clusters/{cluster}/ha/lease/acquire", &["post"]),
        ("/v1/clusters/{cluster}/ha/lease/renew", &["post"]),
        ("/v1/clusters/{cluster}/ha/lease/release", &["post"]),
        ("/v1/clusters/{cluster}/ha/leader-info", &["get"]),
        (
            "/v1/clusters/{cluster}/ha/leader-info/{component}",
            &["get", "put", "delete"],
        ),
        ("/v1/clusters/{cluster}/ha/state-handles/{kind}", &["get"]),
        (
            "/v1/clusters/{cluster}/ha/state-handles/{kind}/{name}",
            &["get", "post", "put", "delete"],
        ),
        (
            "/v1/clusters/{cluster}/ha/counters/{jobid}",
            &["get", "put"],
        ),
        (
            "/v1/clusters/{cluster}/ha/counters/{jobid}/get-and-increment",
            &["post"],
        ),
        ("/healthz", &["get"]),
        ("/readyz", &["get"]),
        ("/metrics", &["get"]),
        ("/openapi.json", &["get"]),
    ] {
        for m in methods {
            let op = &paths[path][m];
            assert!(op.is_object(), "{m} {path} is not documented");
            assert!(
                op["responses"].as_object().is_some_and(|r| !r.is_empty()),
                "{m} {path}"
            );
        }
    }
}
