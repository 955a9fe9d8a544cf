//! The OpenAPI document: a snapshot, so that every change of the API shows in review, and
//! a check that every documented operation is routed (no 405, no fallback 404).

use crate::common;

use axum::http::{Method, StatusCode};

use common::{Backend, TestStore};
use jobstore::http::{HttpConfig, openapi};

const SNAPSHOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/snapshots/openapi.json");

#[test]
fn openapi_document_matches_the_snapshot() {
    let current = serde_json::to_string_pretty(openapi::document()).unwrap() + "\n";
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
             `UPDATE_SNAPSHOTS=1 cargo test --test integration openapi::` and commit the snapshot"
        );
    }
}

#[tokio::test]
async fn every_documented_operation_is_routed() {
    let ts = TestStore::new(Backend::Sqlite).await;
    let api = ts.api(HttpConfig::default());
    let ops: Vec<(&str, &str)> = openapi::document()["paths"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(path, item)| {
            let methods = item.as_object().unwrap().keys();
            methods.map(move |m| (m.as_str(), path.as_str()))
        })
        .collect();
    assert!(ops.len() >= 27, "{} operations documented", ops.len());
    for (op_method, op_path) in ops {
        let path = op_path
            .replace("{cluster}", "c1")
            .replace("{id}", &"a".repeat(32))
            .replace("{jobid}", &"b".repeat(32))
            .replace("{triggerid}", &"c".repeat(32))
            .replace("{component}", "dispatcher")
            .replace("{kind}", "checkpoint")
            .replace("{name}", "1");
        let method = Method::from_bytes(op_method.to_uppercase().as_bytes()).unwrap();
        let r = api
            .request(method, &path, Some("application/json"), "{}")
            .await;
        let (status, text) = (r.status, r.text());
        assert_ne!(status, StatusCode::METHOD_NOT_ALLOWED, "{op_method} {path}");
        assert!(
            !text.contains("Unable to load requested file"),
            "{op_method} {path} is documented but not routed: {status} {text}"
        );
    }
    // And an undocumented route is the fallback's 404.
    let res = api.get("/v1/nothing").await;
    assert_eq!(res.status, StatusCode::NOT_FOUND);
}

#[test]
fn documented_paths_cover_the_contract() {
    let doc = openapi::document();
    let paths = doc["paths"].as_object().unwrap();
    // One route a line: its methods, then its path.
    let routes = "
        get post                /v1/clusters/{cluster}/job-results
        get head delete         /v1/clusters/{cluster}/job-results/{id}
        post                    /v1/clusters/{cluster}/job-results/{id}/clean
        get post                /v1/clusters/{cluster}/application-results
        get head delete         /v1/clusters/{cluster}/application-results/{id}
        post                    /v1/clusters/{cluster}/application-results/{id}/clean
        post                    /jobs/{jobid}/savepoints
        post                    /jobs/{jobid}/stop
        get                     /jobs/{jobid}/savepoints/{triggerid}
        post                    /v1/clusters/{cluster}/jobs/{jobid}/savepoints
        post                    /v1/clusters/{cluster}/jobs/{jobid}/stop
        get                     /v1/clusters/{cluster}/jobs/{jobid}/savepoints/{triggerid}
        post                    /v1/clusters/{cluster}/jobs/{jobid}/savepoints/{triggerid}/complete
        get                     /v1/clusters/{cluster}/savepoint-operations
        get put                 /v1/clusters/{cluster}
        get                     /v1/clusters
        post                    /v1/clusters/{cluster}/ha/lease/acquire
        post                    /v1/clusters/{cluster}/ha/lease/renew
        post                    /v1/clusters/{cluster}/ha/lease/release
        get                     /v1/clusters/{cluster}/ha/lease
        get                     /v1/clusters/{cluster}/ha/leader-info
        get put delete          /v1/clusters/{cluster}/ha/leader-info/{component}
        get                     /v1/clusters/{cluster}/ha/state-handles/{kind}
        get post put delete     /v1/clusters/{cluster}/ha/state-handles/{kind}/{name}
        get put                 /v1/clusters/{cluster}/ha/counters/{jobid}
        post                    /v1/clusters/{cluster}/ha/counters/{jobid}/get-and-increment
        get                     /healthz
        get                     /readyz
        get                     /metrics
        get                     /openapi.json
    ";
    for line in routes.lines().filter(|l| !l.trim().is_empty()) {
        let words: Vec<&str> = line.split_whitespace().collect();
        let (path, methods) = words.split_last().unwrap();
        for m in methods {
            let op = &paths[*path][m];
            assert!(op.is_object(), "{m} {path} is not documented");
            assert!(
                op["responses"].as_object().is_some_and(|r| !r.is_empty()),
                "{m} {path}"
            );
        }
    }
}

const API_DOC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/api.md");
const ROUTES_BEGIN: &str = "<!-- routes: generated from the OpenAPI document by tests/integration/openapi.rs; `UPDATE_SNAPSHOTS=1 cargo test --test integration openapi::` rewrites it -->";
const ROUTES_END: &str = "<!-- /routes -->";

/// The route table of docs/api.md, as the document says it: every operation, its summary and
/// the statuses it answers.
fn route_table() -> String {
    let mut table = String::from("| method | path | what | answers |\n|---|---|---|---|\n");
    for (path, item) in openapi::document()["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let codes: Vec<&str> = op["responses"]
                .as_object()
                .unwrap()
                .keys()
                .map(String::as_str)
                .collect();
            table += &format!(
                "| `{}` | `{path}` | {} | {} |\n",
                method.to_uppercase(),
                op["summary"].as_str().unwrap().replace('|', "\\|"),
                codes.join(", ")
            );
        }
    }
    table
}

/// docs/api.md's "Every route" table is the generated document's, so the prose reference
/// and the generated document cannot drift apart.
#[test]
fn docs_api_lists_every_route_of_the_document() {
    let doc = std::fs::read_to_string(API_DOC).unwrap();
    let (Some(begin), Some(end)) = (doc.find(ROUTES_BEGIN), doc.find(ROUTES_END)) else {
        panic!("docs/api.md has no generated route table between {ROUTES_BEGIN} and {ROUTES_END}");
    };
    let current = format!("{ROUTES_BEGIN}\n{}{ROUTES_END}", route_table());
    let stored = &doc[begin..end + ROUTES_END.len()];
    if stored != current {
        if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
            std::fs::write(API_DOC, doc.replace(stored, &current)).unwrap();
            return;
        }
        panic!(
            "docs/api.md's route table differs from the OpenAPI document: run \
             `UPDATE_SNAPSHOTS=1 cargo test --test integration openapi::` and review the diff"
        );
    }
}
