//! Requests of the HA routes (`/v1/clusters/{cluster}/ha/...`) the HA suites share.

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use super::{Client, Resp};

/// `METHOD {base}{path}` with a JSON body.
pub async fn send(api: &Client, base: &str, method: Method, path: &str, body: &Value) -> Resp {
    api.request(
        method,
        &format!("{base}{path}"),
        Some("application/json"),
        serde_json::to_vec(body).unwrap(),
    )
    .await
}

/// Takes the lease of `base`'s cluster for `holder` (60 s): its epoch.
pub async fn acquire(api: &Client, base: &str, holder: &str) -> i64 {
    let body = json!({"holder": holder, "duration-ms": 60000});
    let r = send(api, base, Method::POST, "/lease/acquire", &body).await;
    r.expect(StatusCode::OK);
    let v = r.json();
    assert!(v["expires-at"].is_string(), "{v}");
    v["epoch"].as_i64().unwrap()
}
