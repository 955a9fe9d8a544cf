//! The HA routes Flink's leader retrieval and cleanup need, on both backends:
//! the long poll of the leader information (ETag, If-None-Match, wait-ms) woken by a
//! publish — on PostgreSQL also by another jobstore process's publish, through
//! LISTEN/NOTIFY — and mark-for-deletion, counter removal, job and cluster cleanup, each
//! fenced by the epoch.

use crate::common;

use std::time::{Duration, Instant};

use axum::http::{Method, StatusCode};
use jobstore::http::HttpConfig;
use serde_json::{Value, json};

use common::ha::HaLease;
use common::{Backend, Client, Resp, TestStore, random_hex};

const BASE: &str = "/v1/clusters/ha-changes/ha";

async fn send(api: &Client, method: Method, path: &str, body: &Value) -> Resp {
    common::ha::send(api, BASE, method, path, body).await
}

async fn acquire(api: &Client, holder: &str) -> HaLease {
    common::ha::acquire(api, BASE, holder).await
}

async fn publish(api: &Client, epoch: &HaLease, component: &str, address: &str) {
    send(
        api,
        Method::PUT,
        &format!("/leader-info/{component}"),
        &epoch.body(json!({"address": address, "session-id": "s"})),
    )
    .await
    .expect(StatusCode::OK);
}

/// `GET .../leader-info?wait-ms=` with `If-None-Match: tag`: the status, the ETag, the body.
async fn poll(api: &Client, tag: Option<&str>, wait_ms: u64) -> (StatusCode, String, Value) {
    common::ha::long_poll(api, &format!("{BASE}/leader-info"), tag, wait_ms).await
}

backend_tests!(
    a_long_poll_answers_at_once_304_or_when_a_publish_lands,
    |ts| async move {
        let api = ts.api(HttpConfig::default());
        let epoch = acquire(&api, "jm-a").await;
        publish(&api, &epoch, "dispatcher", "pekko://a/d").await;
        let (status, tag, body) = poll(&api, None, 0).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body["leader-info"][0]["address"], "pekko://a/d", "{body}");
        // Unchanged, no wait: 304 with the same tag; another tag: the listing at once.
        let (status, same, body) = poll(&api, Some(&tag), 0).await;
        assert_eq!(
            (status, same.as_str(), &body),
            (StatusCode::NOT_MODIFIED, tag.as_str(), &Value::Null)
        );
        let (status, _, _) = poll(&api, Some("\"other\""), 5000).await;
        assert_eq!(status, StatusCode::OK);
        // A wait ends with the publish made during it.
        let waiter = {
            let (api, tag) = (api.clone(), tag.clone());
            tokio::spawn(async move { poll(&api, Some(&tag), 20_000).await })
        };
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            !waiter.is_finished(),
            "the long poll answered before any change"
        );
        publish(&api, &epoch, "resourcemanager", "pekko://a/rm").await;
        let (status, new_tag, body) = tokio::time::timeout(Duration::from_secs(15), waiter)
            .await
            .expect("the long poll ends with the publish, long before its 20 s wait")
            .unwrap();
        assert_eq!(status, StatusCode::OK);
        assert_ne!(new_tag, tag);
        assert_eq!(body["leader-info"].as_array().unwrap().len(), 2, "{body}");
        // A wait with no change ends 304 once it is over.
        let (status, _, _) = poll(&api, Some(&new_tag), 200).await;
        assert_eq!(status, StatusCode::NOT_MODIFIED);
        // wait-ms out of bounds: 400.
        let r = api.get(&format!("{BASE}/leader-info?wait-ms=60001")).await;
        r.error(StatusCode::BAD_REQUEST);
    }
);

/// Two jobstore processes on one PostgreSQL database: a long poll on one ends when the other
/// publishes, through the V6 trigger's NOTIFY, well before the 5 s re-check would find it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_publish_on_another_replica_wakes_a_long_poll_through_notify() {
    let ts = TestStore::new(Backend::Postgres).await;
    let other = jobstore::store::open(&common::store_config(&ts.url))
        .await
        .unwrap();
    let (api, api_other) = (
        ts.api(HttpConfig::default()),
        Client::in_process(other, HttpConfig::default()),
    );
    let epoch = acquire(&api_other, "jm-a").await;
    let (_, tag, _) = poll(&api, None, 0).await;
    let waiter = {
        let api = api.clone();
        tokio::spawn(async move { poll(&api, Some(&tag), 30_000).await })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    let published = Instant::now();
    publish(&api_other, &epoch, "dispatcher", "pekko://b/d").await;
    let (status, _, body) = waiter.await.unwrap();
    let woken_after = published.elapsed();
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["leader-info"][0]["address"], "pekko://b/d", "{body}");
    assert!(
        woken_after < Duration::from_millis(4500),
        "woken {woken_after:?} after the other replica's publish: not by NOTIFY (the re-check runs every 5 s)"
    );
}

backend_tests!(
    mark_for_deletion_hides_a_handle_from_replace_until_it_is_removed,
    |ts| async move {
        let api = ts.api(HttpConfig::default());
        let e = acquire(&api, "jm").await;
        let job = random_hex();
        let path = "/state-handles/checkpoint/7";
        send(
            &api,
            Method::POST,
            path,
            &e.body(json!({"job": job, "handle": "01"})),
        )
        .await
        .expect(StatusCode::CREATED);
        let mark = format!("{path}/mark-for-deletion");
        send(
            &api,
            Method::POST,
            &mark,
            &(&e + 1).body(json!({"job": job})),
        )
        .await
        .error_naming(StatusCode::CONFLICT, &["fenced"]);
        let r = send(&api, Method::POST, &mark, &e.body(json!({"job": job}))).await;
        r.expect(StatusCode::OK);
        assert_eq!(r.json()["version"], 1);
        let got = api.get(&format!("{BASE}{path}?job={job}")).await;
        assert_eq!(got.json()["marked-for-deletion"], true);
        send(
            &api,
            Method::PUT,
            path,
            &e.body(json!({"job": job, "expected-version": 1, "handle": "02"})),
        )
        .await
        .error(StatusCode::NOT_FOUND);
        let r = send(&api, Method::DELETE, path, &e.body(json!({"job": job}))).await;
        assert_eq!(r.json()["removed"], true);
        send(&api, Method::POST, &mark, &e.body(json!({"job": job})))
            .await
            .error(StatusCode::NOT_FOUND);
    }
);

backend_tests!(
    counter_job_and_cluster_cleanup_are_fenced_and_remove_what_they_name,
    |ts| async move {
        let api = ts.api(HttpConfig::default());
        let e = acquire(&api, "jm").await;
        let (job, kept) = (random_hex(), random_hex());
        for j in [&job, &kept] {
            for (method, path, body, status) in [
                (
                    "POST",
                    format!("/state-handles/execution-plan/{j}"),
                    e.body(json!({"handle": "0a"})),
                    201,
                ),
                (
                    "POST",
                    "/state-handles/checkpoint/1".to_owned(),
                    e.body(json!({"job": j, "handle": "0b"})),
                    201,
                ),
                (
                    "POST",
                    format!("/counters/{j}/get-and-increment"),
                    e.body(json!({})),
                    200,
                ),
                (
                    "PUT",
                    format!("/leader-info/{j}"),
                    e.body(json!({"address": "pekko://jm", "session-id": "s"})),
                    200,
                ),
            ] {
                let r = send(&api, method.parse().unwrap(), &path, &body).await;
                r.expect(StatusCode::from_u16(status).unwrap());
            }
        }
        // A stale epoch removes nothing.
        for path in [
            format!("/counters/{job}"),
            format!("/jobs/{job}"),
            String::new(),
        ] {
            send(&api, Method::DELETE, &path, &(&e + 1).body(json!({})))
                .await
                .error_naming(StatusCode::CONFLICT, &["fenced"]);
            send(&api, Method::DELETE, &path, &e.body(json!({"job": job})))
                .await
                .error(StatusCode::BAD_REQUEST);
        }
        // The counter alone, twice (idempotent).
        for _ in 0..2 {
            send(
                &api,
                Method::DELETE,
                &format!("/counters/{job}"),
                &e.body(json!({})),
            )
            .await
            .expect(StatusCode::NO_CONTENT);
        }
        api.get(&format!("{BASE}/counters/{job}"))
            .await
            .error(StatusCode::NOT_FOUND);
        api.get(&format!("{BASE}/counters/{kept}"))
            .await
            .expect(StatusCode::OK);
        // The job's data, not the other job's.
        send(
            &api,
            Method::DELETE,
            &format!("/jobs/{job}"),
            &e.body(json!({})),
        )
        .await
        .expect(StatusCode::NO_CONTENT);
        for (path, status) in [
            (
                format!("/state-handles/execution-plan/{job}"),
                StatusCode::NOT_FOUND,
            ),
            (
                format!("/state-handles/checkpoint/1?job={job}"),
                StatusCode::NOT_FOUND,
            ),
            (format!("/leader-info/{job}"), StatusCode::NOT_FOUND),
            (
                format!("/state-handles/execution-plan/{kept}"),
                StatusCode::OK,
            ),
            (
                format!("/state-handles/checkpoint/1?job={kept}"),
                StatusCode::OK,
            ),
            (format!("/leader-info/{kept}"), StatusCode::OK),
        ] {
            let r = api.get(&format!("{BASE}{path}")).await;
            assert_eq!(r.status, status, "{path}: {}", r.text());
        }
        // The cluster's data: everything; the epoch is over and never handed out again.
        send(&api, Method::DELETE, "", &e.body(json!({})))
            .await
            .expect(StatusCode::NO_CONTENT);
        for path in [
            format!("/state-handles/execution-plan/{kept}"),
            format!("/counters/{kept}"),
            format!("/leader-info/{kept}"),
        ] {
            api.get(&format!("{BASE}{path}"))
                .await
                .error(StatusCode::NOT_FOUND);
        }
        assert_eq!(acquire(&api, "jm").await.epoch, e.epoch + 1);
    }
);
