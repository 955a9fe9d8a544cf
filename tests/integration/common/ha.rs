//! Requests of the HA routes (`/v1/clusters/{cluster}/ha/...`) the HA suites share.

use axum::http::{Method, StatusCode, header};
use serde_json::{Value, json};

use jobstore::http::HttpConfig;

use super::{Client, Resp, TestStore};

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

/// How long a lease is taken or renewed for when a test does not say.
pub const LEASE_MS: u64 = 60_000;

/// Takes the lease of `base`'s cluster for `holder` (60 s).
pub async fn acquire(api: &Client, base: &str, holder: &str) -> HaLease {
    HaRoutes::new(api.clone(), base).acquire(holder).await
}

/// The HA routes under `base` of the router in-process over `ts`'s store, and the lease
/// `holder` took there (for [`LEASE_MS`]).
pub async fn leader(ts: &TestStore, base: &str, holder: &str) -> (HaRoutes, HaLease) {
    let ha = HaRoutes::in_process(ts, base);
    let lease = ha.acquire(holder).await;
    (ha, lease)
}

/// The HA routes of one cluster through one client: every path is under `base`
/// (`/v1/clusters/{cluster}/ha`, or a whole URL's prefix when the client's base is empty).
#[derive(Clone)]
pub struct HaRoutes {
    pub api: Client,
    pub base: String,
}

impl HaRoutes {
    pub fn new(api: Client, base: impl Into<String>) -> HaRoutes {
        HaRoutes {
            api,
            base: base.into(),
        }
    }

    /// The routes under `base` of the router in-process over `ts`'s store (default config).
    pub fn in_process(ts: &TestStore, base: &str) -> HaRoutes {
        HaRoutes::new(ts.api(HttpConfig::default()), base)
    }

    /// `METHOD {base}{path}` with a JSON body.
    pub async fn send(&self, method: Method, path: &str, body: &Value) -> Resp {
        send(&self.api, &self.base, method, path, body).await
    }

    pub async fn post(&self, path: &str, body: Value) -> Resp {
        self.send(Method::POST, path, &body).await
    }

    pub async fn put(&self, path: &str, body: Value) -> Resp {
        self.send(Method::PUT, path, &body).await
    }

    pub async fn delete(&self, path: &str, body: Value) -> Resp {
        self.send(Method::DELETE, path, &body).await
    }

    /// `GET {base}{path}`.
    pub async fn get(&self, path: &str) -> Resp {
        self.api.get(&format!("{}{path}", self.base)).await
    }

    /// Asserts that `GET {base}{path}` answers 404 with the contract's error body.
    pub async fn assert_not_found(&self, path: &str) {
        self.get(path).await.error(StatusCode::NOT_FOUND);
    }

    /// `POST /lease/acquire` for `holder`, `ms` long.
    pub async fn try_acquire(&self, holder: &str, ms: u64) -> Resp {
        let body = json!({"holder": holder, "duration-ms": ms});
        self.post("/lease/acquire", body).await
    }

    /// Takes the lease for `holder` for [`LEASE_MS`], asserting 200.
    pub async fn acquire(&self, holder: &str) -> HaLease {
        self.acquire_for(holder, LEASE_MS).await
    }

    /// Takes the lease for `holder`, `ms` long, asserting 200.
    pub async fn acquire_for(&self, holder: &str, ms: u64) -> HaLease {
        let r = self.try_acquire(holder, ms).await;
        r.expect(StatusCode::OK);
        HaLease::of(&r.json())
    }

    /// `POST /lease/renew` of `lease` for `holder`, for [`LEASE_MS`].
    pub async fn renew(&self, holder: &str, lease: &HaLease) -> Resp {
        self.renew_for(holder, lease, LEASE_MS).await
    }

    /// `POST /lease/renew` of `lease` for `holder`, `ms` long.
    pub async fn renew_for(&self, holder: &str, lease: &HaLease, ms: u64) -> Resp {
        let body = lease.body(json!({"holder": holder, "duration-ms": ms}));
        self.post("/lease/renew", body).await
    }

    /// `POST /lease/release` of `lease` for `holder`.
    pub async fn release(&self, holder: &str, lease: &HaLease) -> Resp {
        let body = lease.body(json!({"holder": holder}));
        self.post("/lease/release", body).await
    }

    /// `POST /counters/{job}/get-and-increment` under `lease`: the next checkpoint id.
    pub async fn get_and_increment(&self, lease: &HaLease, job: &str) -> Resp {
        let path = format!("/counters/{job}/get-and-increment");
        self.post(&path, lease.body(json!({}))).await
    }

    /// Publishes `component`'s leader `address` (session `s`) under `lease`, asserting 200.
    pub async fn publish(&self, lease: &HaLease, component: &str, address: &str) {
        let body = lease.body(json!({"address": address, "session-id": "s"}));
        let path = format!("/leader-info/{component}");
        self.put(&path, body).await.expect(StatusCode::OK);
    }
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
