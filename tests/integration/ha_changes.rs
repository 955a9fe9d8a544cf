//! The HA routes Flink's leader retrieval and cleanup need, on both backends:
//! the long poll of the leader information (ETag, If-None-Match, wait-ms) woken by a
//! publish — on PostgreSQL also by another jobstore process's publish, through
//! LISTEN/NOTIFY — and mark-for-deletion, counter removal, job and cluster cleanup, each
//! fenced by the epoch.

use crate::common;

use std::time::{Duration, Instant};

use axum::http::StatusCode;
use jobstore::http::HttpConfig;
use serde_json::{Value, json};

use common::ha::HaRoutes;
use common::{Backend, Client, TestStore, random_hex};

const BASE: &str = "/v1/clusters/ha-changes/ha";

/// `GET .../leader-info?wait-ms=` with `If-None-Match: tag`: the status, the ETag, the body.
async fn poll(api: &Client, tag: Option<&str>, wait_ms: u64) -> (StatusCode, String, Value) {
    common::ha::long_poll(api, &format!("{BASE}/leader-info"), tag, wait_ms).await
}

backend_tests!(
    a_long_poll_answers_at_once_304_or_when_a_publish_lands,
    |ts| async move {
        let (ha, epoch) = common::ha::leader(&ts, BASE, "jm-a").await;
        ha.publish(&epoch, "dispatcher", "pekko://a/d").await;
        let (status, tag, body) = poll(&ha.api, None, 0).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body["leader-info"][0]["address"], "pekko://a/d", "{body}");
        // Unchanged, no wait: 304 with the same tag; another tag: the listing at once.
        let (status, same, body) = poll(&ha.api, Some(&tag), 0).await;
        assert_eq!(
            (status, same.as_str(), &body),
            (StatusCode::NOT_MODIFIED, tag.as_str(), &Value::Null)
        );
        let (status, _, _) = poll(&ha.api, Some("\"other\""), 5000).await;
        assert_eq!(status, StatusCode::OK);
        // A wait ends with the publish made during it.
        let waiter = {
            let (api, tag) = (ha.api.clone(), tag.clone());
            tokio::spawn(async move { poll(&api, Some(&tag), 20_000).await })
        };
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            !waiter.is_finished(),
            "the long poll answered before any change"
        );
        ha.publish(&epoch, "resourcemanager", "pekko://a/rm").await;
        let (status, new_tag, body) = tokio::time::timeout(Duration::from_secs(15), waiter)
            .await
            .expect("the long poll ends with the publish, long before its 20 s wait")
            .unwrap();
        assert_eq!(status, StatusCode::OK);
        assert_ne!(new_tag, tag);
        assert_eq!(body["leader-info"].as_array().unwrap().len(), 2, "{body}");
        // A wait with no change ends 304 once it is over.
        let (status, _, _) = poll(&ha.api, Some(&new_tag), 200).await;
        assert_eq!(status, StatusCode::NOT_MODIFIED);
        // wait-ms out of bounds: 400.
        let r = ha.get("/leader-info?wait-ms=60001").await;
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
    let api = ts.api(HttpConfig::default());
    let other = HaRoutes::new(Client::in_process(other, HttpConfig::default()), BASE);
    let epoch = other.acquire("jm-a").await;
    let (_, tag, _) = poll(&api, None, 0).await;
    let waiter = {
        let api = api.clone();
        tokio::spawn(async move { poll(&api, Some(&tag), 30_000).await })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    let published = Instant::now();
    other.publish(&epoch, "dispatcher", "pekko://b/d").await;
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
        let (ha, e) = common::ha::leader(&ts, BASE, "jm").await;
        let job = random_hex();
        let path = "/state-handles/checkpoint/7";
        ha.post(path, e.body(json!({"job": job, "handle": "01"})))
            .await
            .expect(StatusCode::CREATED);
        let mark = format!("{path}/mark-for-deletion");
        ha.post(&mark, (&e + 1).body(json!({"job": job})))
            .await
            .error_naming(StatusCode::CONFLICT, &["fenced"]);
        let r = ha.post(&mark, e.body(json!({"job": job}))).await;
        r.expect(StatusCode::OK);
        assert_eq!(r.json()["version"], 1);
        let got = ha.get(&format!("{path}?job={job}")).await;
        assert_eq!(got.json()["marked-for-deletion"], true);
        ha.put(
            path,
            e.body(json!({"job": job, "expected-version": 1, "handle": "02"})),
        )
        .await
        .error(StatusCode::NOT_FOUND);
        let r = ha.delete(path, e.body(json!({"job": job}))).await;
        assert_eq!(r.json()["removed"], true);
        ha.post(&mark, e.body(json!({"job": job})))
            .await
            .error(StatusCode::NOT_FOUND);
    }
);

backend_tests!(
    counter_job_and_cluster_cleanup_are_fenced_and_remove_what_they_name,
    |ts| async move {
        let (ha, e) = common::ha::leader(&ts, BASE, "jm").await;
        let (job, kept) = (random_hex(), random_hex());
        for j in [&job, &kept] {
            let plan = format!("/state-handles/execution-plan/{j}");
            ha.post(&plan, e.body(json!({"handle": "0a"})))
                .await
                .expect(StatusCode::CREATED);
            let checkpoint = e.body(json!({"job": j, "handle": "0b"}));
            ha.post("/state-handles/checkpoint/1", checkpoint)
                .await
                .expect(StatusCode::CREATED);
            ha.get_and_increment(&e, j).await.expect(StatusCode::OK);
            ha.publish(&e, j, "pekko://jm").await;
        }
        // A stale epoch removes nothing.
        for path in [
            format!("/counters/{job}"),
            format!("/jobs/{job}"),
            String::new(),
        ] {
            ha.delete(&path, (&e + 1).body(json!({})))
                .await
                .error_naming(StatusCode::CONFLICT, &["fenced"]);
            ha.delete(&path, e.body(json!({"job": job})))
                .await
                .error(StatusCode::BAD_REQUEST);
        }
        // The counter alone, twice (idempotent).
        for _ in 0..2 {
            ha.delete(&format!("/counters/{job}"), e.body(json!({})))
                .await
                .expect(StatusCode::NO_CONTENT);
        }
        ha.assert_not_found(&format!("/counters/{job}")).await;
        ha.get(&format!("/counters/{kept}"))
            .await
            .expect(StatusCode::OK);
        // The job's data, not the other job's.
        ha.delete(&format!("/jobs/{job}"), e.body(json!({})))
            .await
            .expect(StatusCode::NO_CONTENT);
        for (j, status) in [(&job, StatusCode::NOT_FOUND), (&kept, StatusCode::OK)] {
            for path in [
                format!("/state-handles/execution-plan/{j}"),
                format!("/state-handles/checkpoint/1?job={j}"),
                format!("/leader-info/{j}"),
            ] {
                let r = ha.get(&path).await;
                assert_eq!(r.status, status, "{path}: {}", r.text());
            }
        }
        // The cluster's data: everything; the epoch is over and never handed out again.
        ha.delete("", e.body(json!({})))
            .await
            .expect(StatusCode::NO_CONTENT);
        for path in [
            format!("/state-handles/execution-plan/{kept}"),
            format!("/counters/{kept}"),
            format!("/leader-info/{kept}"),
        ] {
            ha.assert_not_found(&path).await;
        }
        assert_eq!(ha.acquire("jm").await.epoch, e.epoch + 1);
    }
);
