//! Requests of the HA routes (`/v1/clusters/{cluster}/ha/...`) the HA suites share.

use axum::http::{Method, StatusCode, header};
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

/// A lease as an acquisition answered it: what every fenced write names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HaLease {
    pub epoch: i64,
    pub id: String,
}

impl HaLease {
    /// The lease of an acquisition's answer (`{"epoch", "lease-id", "expires-at"}`).
    pub fn of(answer: &Value) -> HaLease {
        assert!(answer["expires-at"].is_string(), "{answer}");
        let id = answer["lease-id"].as_str().expect("a lease-id").to_owned();
        assert_eq!(id.len(), 36, "a hyphenated UUID: {answer}");
        HaLease {
            epoch: answer["epoch"].as_i64().expect("an epoch"),
            id,
        }
    }

    /// `fields` (a JSON object) with this lease's `epoch` and `lease-id` added.
    pub fn body(&self, fields: Value) -> Value {
        let mut body = fields;
        let map = body.as_object_mut().expect("a JSON object");
        map.insert("epoch".into(), json!(self.epoch));
        map.insert("lease-id".into(), json!(self.id));
        body
    }
}

/// Compares the epoch.
impl PartialEq<i64> for HaLease {
    fn eq(&self, epoch: &i64) -> bool {
        self.epoch == *epoch
    }
}

/// The same lease id under another epoch (a made-up epoch: fenced like any stale one).
impl std::ops::Add<i64> for &HaLease {
    type Output = HaLease;
    fn add(self, n: i64) -> HaLease {
        HaLease {
            epoch: self.epoch + n,
            id: self.id.clone(),
        }
    }
}

impl std::ops::Add<i64> for HaLease {
    type Output = HaLease;
    fn add(self, n: i64) -> HaLease {
        &self + n
    }
}

/// Takes the lease of `base`'s cluster for `holder` (60 s).
pub async fn acquire(api: &Client, base: &str, holder: &str) -> HaLease {
    let body = json!({"holder": holder, "duration-ms": 60000});
    let r = send(api, base, Method::POST, "/lease/acquire", &body).await;
    r.expect(StatusCode::OK);
    HaLease::of(&r.json())
}

/// `GET {path}?wait-ms=` with `If-None-Match: tag` (the long polls of the leader information
/// and of the lease): the status, the ETag, the body.
pub async fn long_poll(
    api: &Client, path: &str, tag: Option<&str>, wait_ms: u64,
) -> (StatusCode, String, Value) {
    let headers: Vec<(&str, &str)> = tag.map(|t| ("if-none-match", t)).into_iter().collect();
    let res = api
        .try_send(
            Method::GET,
            &format!("{path}?wait-ms={wait_ms}"),
            &headers,
            Vec::new(),
        )
        .await
        .unwrap();
    let etag = res
        .headers
        .get(header::ETAG)
        .map(|v| v.to_str().unwrap().to_owned())
        .expect("an ETag on every answer");
    let body = if res.body.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&res.body).unwrap()
    };
    (res.status, etag, body)
}
