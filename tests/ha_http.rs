//! The HA routes (issue 15) on both backends: lease acquire / renew / release, leader
//! information, state handles and counters under `/v1/clusters/{cluster}/ha`; a stale
//! epoch answered 409 with the data unchanged; bad input 400, never a 5xx.

mod common;

use axum::http::{Method, StatusCode};
use jobstore::http::HttpConfig;
use serde_json::{Value, json};

use common::{Client, Resp, random_hex};

const BASE: &str = "/v1/clusters/ha-c/ha";

async fn send(api: &Client, method: Method, path: &str, body: &Value) -> Resp {
    common::ha::send(api, BASE, method, path, body).await
}

async fn post(api: &Client, path: &str, body: Value) -> Resp {
    send(api, Method::POST, path, &body).await
}

async fn put(api: &Client, path: &str, body: Value) -> Resp {
    send(api, Method::PUT, path, &body).await
}

async fn delete(api: &Client, path: &str, body: Value) -> Resp {
    send(api, Method::DELETE, path, &body).await
}

/// `POST /lease/{action}` for `holder`: `acquire` for 60 s, `renew` of `epoch` for 60 s,
/// `release` of `epoch`.
async fn lease(api: &Client, action: &str, holder: &str, epoch: i64) -> Resp {
    let body = match action {
        "acquire" => json!({"holder": holder, "duration-ms": 60000}),
        "renew" => json!({"holder": holder, "epoch": epoch, "duration-ms": 60000}),
        _ => json!({"holder": holder, "epoch": epoch}),
    };
    post(api, &format!("/lease/{action}"), body).await
}

async fn acquire(api: &Client, holder: &str) -> i64 {
    let r = lease(api, "acquire", holder, 0).await;
    r.expect(StatusCode::OK);
    let v = r.json();
    assert!(v["expires-at"].is_string(), "{v}");
    v["epoch"].as_i64().unwrap()
}

backend_tests!(lease_routes_hand_out_and_fence_epochs, |ts| async move {
    let api = ts.api(HttpConfig::default());
    assert_eq!(acquire(&api, "jm-a").await, 1);
    let r = lease(&api, "acquire", "jm-b", 0).await;
    r.error(StatusCode::CONFLICT);
    lease(&api, "renew", "jm-a", 1).await.expect(StatusCode::OK);
    let r = lease(&api, "release", "jm-a", 1).await;
    r.expect(StatusCode::OK);
    assert_eq!(r.json()["released"], true);
    assert_eq!(acquire(&api, "jm-b").await, 2);
    let r = lease(&api, "renew", "jm-a", 1).await;
    r.error(StatusCode::CONFLICT);
});

backend_tests!(
    a_stale_epoch_is_answered_409_and_changes_nothing,
    |ts| async move {
        let api = ts.api(HttpConfig::default());
        let old = acquire(&api, "jm-a").await;
        let job = random_hex();
        put(
            &api,
            "/leader-info/dispatcher",
            json!({"epoch": old, "address": "pekko://a", "session-id": "s-a"}),
        )
        .await
        .expect(StatusCode::OK);
        let r = post(
            &api,
            "/state-handles/checkpoint/1",
            json!({"epoch": old, "job": job, "handle": "aced0005"}),
        )
        .await;
        r.expect(StatusCode::CREATED);
        assert_eq!(r.json()["version"], 1);
        let r = post(
            &api,
            &format!("/counters/{job}/get-and-increment"),
            json!({"epoch": old}),
        )
        .await;
        r.expect(StatusCode::OK);
        assert_eq!(r.json()["value"], 1);

        lease(&api, "release", "jm-a", old)
            .await
            .expect(StatusCode::OK);
        let new = acquire(&api, "jm-b").await;
        assert_eq!(new, old + 1);

        for (method, path, body) in [
            (
                Method::PUT,
                "/leader-info/dispatcher".to_owned(),
                json!({"epoch": old, "address": "pekko://stale", "session-id": "s"}),
            ),
            (
                Method::DELETE,
                "/leader-info/dispatcher".to_owned(),
                json!({"epoch": old}),
            ),
            (
                Method::POST,
                "/state-handles/checkpoint/2".to_owned(),
                json!({"epoch": old, "job": job, "handle": "00"}),
            ),
            (
                Method::PUT,
                "/state-handles/checkpoint/1".to_owned(),
                json!({"epoch": old, "job": job, "expected-version": 1, "handle": "00"}),
            ),
            (
                Method::DELETE,
                "/state-handles/checkpoint/1".to_owned(),
                json!({"epoch": old, "job": job}),
            ),
            (
                Method::POST,
                format!("/counters/{job}/get-and-increment"),
                json!({"epoch": old}),
            ),
            (
                Method::PUT,
                format!("/counters/{job}"),
                json!({"epoch": old, "value": 50}),
            ),
        ] {
            let r = send(&api, method, &path, &body).await;
            let message = r.error(StatusCode::CONFLICT);
            assert!(message.contains("fenced"), "{path}: {message}");
        }
        let info = api.get(&format!("{BASE}/leader-info/dispatcher")).await;
        info.expect(StatusCode::OK);
        assert_eq!(info.json()["address"], "pekko://a");
        let h = api
            .get(&format!("{BASE}/state-handles/checkpoint/1?job={job}"))
            .await;
        h.expect(StatusCode::OK);
        assert_eq!(
            (h.json()["version"].clone(), h.json()["handle"].clone()),
            (json!(1), json!("aced0005"))
        );
        api.get(&format!("{BASE}/state-handles/checkpoint/2?job={job}"))
            .await
            .error(StatusCode::NOT_FOUND);
        let c = api.get(&format!("{BASE}/counters/{job}")).await;
        c.expect(StatusCode::OK);
        assert_eq!(c.json()["value"], 2);
    }
);

backend_tests!(state_handles_and_counters_over_http, |ts| async move {
    let api = ts.api(HttpConfig::default());
    let e = acquire(&api, "jm").await;
    let job = random_hex();
    let plan = format!("/state-handles/execution-plan/{job}");
    let counter = format!("/counters/{job}");
    post(&api, &plan, json!({"epoch": e, "handle": "0102"}))
        .await
        .expect(StatusCode::CREATED);
    post(&api, &plan, json!({"epoch": e, "handle": "0102"}))
        .await
        .error(StatusCode::CONFLICT);
    let wrong = put(
        &api,
        &plan,
        json!({"epoch": e, "expected-version": 7, "handle": "03"}),
    )
    .await
    .error(StatusCode::CONFLICT);
    assert!(wrong.contains("version"), "{wrong}");
    let r = put(
        &api,
        &plan,
        json!({"epoch": e, "expected-version": 1, "handle": "03"}),
    )
    .await;
    r.expect(StatusCode::OK);
    assert_eq!(r.json()["version"], 2);
    let list = api
        .get(&format!("{BASE}/state-handles/execution-plan"))
        .await;
    list.expect(StatusCode::OK);
    let list = list.json();
    assert_eq!(list["state-handles"].as_array().unwrap().len(), 1, "{list}");
    assert_eq!(list["state-handles"][0]["handle"], "03");
    for removed in [true, false] {
        let r = delete(&api, &plan, json!({"epoch": e})).await;
        r.expect(StatusCode::OK);
        assert_eq!(r.json()["removed"], removed);
    }
    api.get(&format!("{BASE}/counters/{job}"))
        .await
        .error(StatusCode::NOT_FOUND);
    put(&api, &counter, json!({"epoch": e, "value": 7}))
        .await
        .expect(StatusCode::OK);
    let r = post(
        &api,
        &format!("/counters/{job}/get-and-increment"),
        json!({"epoch": e}),
    )
    .await;
    assert_eq!(r.json()["value"], 7);
    let all = api.get(&format!("{BASE}/leader-info")).await;
    all.expect(StatusCode::OK);
    assert_eq!(all.json(), json!({"leader-info": []}));
});

backend_tests!(bad_ha_input_is_400_never_5xx, |ts| async move {
    let api = ts.api(HttpConfig::default());
    let e = acquire(&api, "jm").await;
    let job = random_hex();
    let long = "x".repeat(300);
    for (method, path, body) in [
        (
            Method::POST,
            "/lease/acquire".to_owned(),
            json!({"holder": "", "duration-ms": 1000}),
        ),
        (
            Method::POST,
            "/lease/acquire".to_owned(),
            json!({"holder": long, "duration-ms": 1000}),
        ),
        (
            Method::POST,
            "/lease/acquire".to_owned(),
            json!({"holder": "h", "duration-ms": 0}),
        ),
        (
            Method::POST,
            "/lease/acquire".to_owned(),
            json!({"holder": "h", "duration-ms": u64::MAX}),
        ),
        (
            Method::POST,
            "/lease/acquire".to_owned(),
            json!({"holder": "h"}),
        ),
        (
            Method::POST,
            "/lease/acquire".to_owned(),
            json!({"holder": "h\u{0}", "duration-ms": 1000}),
        ),
        (
            Method::POST,
            "/lease/renew".to_owned(),
            json!({"holder": "h", "duration-ms": 1000}),
        ),
        (
            Method::POST,
            "/lease/acquire".to_owned(),
            json!({"holder": "h", "duration-ms": 1000, "epoc": 1}),
        ),
        (
            Method::PUT,
            "/leader-info/dispatcher".to_owned(),
            json!({"epoch": e, "address": "", "session-id": "s"}),
        ),
        (
            Method::PUT,
            format!("/leader-info/{long}"),
            json!({"epoch": e, "address": "a", "session-id": "s"}),
        ),
        (
            Method::PUT,
            "/leader-info/dispatcher".to_owned(),
            json!({"epoch": "one", "address": "a", "session-id": "s"}),
        ),
        (
            Method::POST,
            "/state-handles/savepoint/1".to_owned(),
            json!({"epoch": e, "handle": "00"}),
        ),
        (
            Method::POST,
            "/state-handles/checkpoint/1".to_owned(),
            json!({"epoch": e, "job": "JOB", "handle": "00"}),
        ),
        (
            Method::POST,
            "/state-handles/checkpoint/1".to_owned(),
            json!({"epoch": e, "handle": "0"}),
        ),
        (
            Method::POST,
            "/state-handles/checkpoint/1".to_owned(),
            json!({"epoch": e, "handle": "zz"}),
        ),
        (
            Method::POST,
            "/state-handles/checkpoint/1".to_owned(),
            json!({"epoch": e, "handle": ""}),
        ),
        (
            Method::POST,
            "/state-handles/checkpoint/1".to_owned(),
            json!({"epoch": e, "handle": "00".repeat(65537)}),
        ),
        (
            Method::PUT,
            "/state-handles/checkpoint/1".to_owned(),
            json!({"epoch": e, "handle": "00"}),
        ),
        (
            Method::PUT,
            "/state-handles/checkpoint/1".to_owned(),
            json!({"epoch": e, "expected-version": 0, "handle": "00"}),
        ),
        (
            Method::PUT,
            format!("/counters/{job}"),
            json!({"epoch": e, "value": 0}),
        ),
        (Method::PUT, format!("/counters/{job}"), json!({"epoch": e})),
        (
            Method::POST,
            "/counters/nothex/get-and-increment".to_owned(),
            json!({"epoch": e}),
        ),
        (
            Method::POST,
            format!("/counters/{job}/get-and-increment"),
            json!({"epoch": 1e300}),
        ),
    ] {
        let r = send(&api, method.clone(), &path, &body).await;
        r.error(StatusCode::BAD_REQUEST);
    }
    // A handle of exactly the largest size is kept.
    post(
        &api,
        "/state-handles/checkpoint/big",
        json!({"epoch": e, "handle": "ab".repeat(65536)}),
    )
    .await
    .expect(StatusCode::CREATED);
    // Without a JSON content type: 415.
    api.request(Method::POST, &format!("{BASE}/lease/acquire"), None, "{}")
        .await
        .error(StatusCode::UNSUPPORTED_MEDIA_TYPE);
});
