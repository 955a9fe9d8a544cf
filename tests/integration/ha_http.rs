//! The HA routes on both backends: lease acquire / renew / release, leader
//! information, state handles and counters under `/v1/clusters/{cluster}/ha`; a stale
//! epoch answered 409 with the data unchanged; bad input 400, never a 5xx.

use crate::common;

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use common::ha::{HaLease, HaRoutes, LEASE_MS};
use common::{TestStore, random_hex};

const BASE: &str = "/v1/clusters/ha-c/ha";

/// The HA routes of cluster `ha-c` on the router in-process over `ts`'s store, and the lease
/// `holder` took there.
async fn leader(ts: &TestStore, holder: &str) -> (HaRoutes, HaLease) {
    common::ha::leader(ts, BASE, holder).await
}

/// One request of every fenced route (and the renewal) of `lease`, on job `job`'s data:
/// each lands only while `lease` is the cluster's live lease.
fn fenced_writes(lease: &HaLease, job: &str) -> Vec<(Method, String, Value)> {
    let writes = [
        (
            Method::PUT,
            "/leader-info/dispatcher",
            json!({"address": "pekko://stale", "session-id": "s"}),
        ),
        (Method::DELETE, "/leader-info/dispatcher", json!({})),
        (
            Method::POST,
            "/state-handles/checkpoint/2",
            json!({"job": job, "handle": "00"}),
        ),
        (
            Method::POST,
            "/state-handles/execution-plan/p",
            json!({"handle": "0a"}),
        ),
        (
            Method::PUT,
            "/state-handles/checkpoint/1",
            json!({"job": job, "expected-version": 1, "handle": "00"}),
        ),
        (
            Method::POST,
            "/state-handles/checkpoint/1/mark-for-deletion",
            json!({"job": job}),
        ),
        (
            Method::DELETE,
            "/state-handles/checkpoint/1",
            json!({"job": job}),
        ),
        (Method::POST, "/counters/{job}/get-and-increment", json!({})),
        (Method::PUT, "/counters/{job}", json!({"value": 50})),
        (Method::DELETE, "/counters/{job}", json!({})),
        (Method::DELETE, "/jobs/{job}", json!({})),
        (Method::DELETE, "", json!({})),
        (
            Method::POST,
            "/lease/renew",
            json!({"holder": "jm-a", "duration-ms": 60000}),
        ),
    ];
    writes
        .into_iter()
        .map(|(method, path, body)| (method, path.replace("{job}", job), lease.body(body)))
        .collect()
}

backend_tests!(lease_routes_hand_out_and_fence_epochs, |ts| async move {
    let (ha, a) = leader(&ts, "jm-a").await;
    assert_eq!(a, 1);
    // The live holder asking again renews under the same lease (epoch and lease id).
    assert_eq!(ha.acquire("jm-a").await, a);
    let r = ha.try_acquire("jm-b", LEASE_MS).await;
    r.error(StatusCode::CONFLICT);
    ha.renew("jm-a", &a).await.expect(StatusCode::OK);
    let r = ha.release("jm-a", &a).await;
    r.expect(StatusCode::OK);
    assert_eq!(r.json()["released"], true);
    let b = ha.acquire("jm-b").await;
    assert_eq!(b, 2);
    assert_ne!(a.id, b.id, "every acquisition gets a lease id of its own");
    let r = ha.renew("jm-a", &a).await;
    r.error(StatusCode::CONFLICT);
    // The holder of the live epoch with another acquisition's lease id is fenced: the lease
    // id, not the epoch, is what no other acquisition can be given.
    let forged = HaLease {
        epoch: b.epoch,
        id: a.id.clone(),
    };
    ha.renew("jm-b", &forged).await.error(StatusCode::CONFLICT);
    ha.renew("jm-b", &b).await.expect(StatusCode::OK);
});

backend_tests!(
    a_lost_acquisition_gives_its_epoch_again_but_never_its_lease_id,
    |ts| async move {
        // What a PostgreSQL failover with asynchronous replication does: the commit of A's
        // acquisition (and of A's writes) is acknowledged, then lost, so the lease row is as
        // it was before; B then acquires and gets A's epoch a second time. A, which does not
        // know, goes on writing under that epoch: every one of its writes must be refused.
        let (ha, first) = leader(&ts, "jm-0").await;
        ha.release("jm-0", &first).await.expect(StatusCode::OK);
        let before = "SELECT count(*) FROM ha_leases WHERE cluster_id = 'ha-c' AND epoch = 1";
        assert_eq!(ts.db.scalar(before).await, 1);
        let a = ha.acquire("jm-a").await;
        assert_eq!(a.epoch, 2);
        let job = random_hex();
        let r = ha.get_and_increment(&a, &job).await;
        r.expect(StatusCode::OK);
        assert_eq!(r.json()["value"], 1);
        // The failover loses A's acquisition and its writes.
        let restore = format!(
            "UPDATE ha_leases SET holder = 'jm-0', epoch = 1, lease_id = '{}', \
             acquired_at = renewed_at, expires_at = renewed_at WHERE cluster_id = 'ha-c'",
            first.id
        );
        assert_eq!(ts.db.execute(&restore).await, Ok(1));
        assert_eq!(ts.db.execute("DELETE FROM ha_counters").await, Ok(1));
        let b = ha.acquire("jm-b").await;
        assert_eq!(
            b.epoch, a.epoch,
            "the lost acquisition's epoch is handed out again"
        );
        assert_ne!(b.id, a.id);
        ha.publish(&b, "dispatcher", "pekko://b").await;
        let r = ha.get_and_increment(&b, &job).await;
        r.expect(StatusCode::OK);
        assert_eq!(r.json()["value"], 1);

        // A, under the same epoch as B: every fenced route refuses it.
        for (method, path, body) in fenced_writes(&a, &job) {
            let r = ha.send(method.clone(), &path, &body).await;
            let message = r.error(StatusCode::CONFLICT);
            assert!(message.contains("fenced"), "{method} {path}: {message}");
        }
        let r = ha.release("jm-a", &a).await;
        r.expect(StatusCode::OK);
        assert_eq!(r.json()["released"], false, "A's release ends nothing");
        // B's data is as B wrote it; B's lease lives on; the next id is B's.
        let info = ha.get("/leader-info/dispatcher").await;
        info.expect(StatusCode::OK);
        assert_eq!(info.json()["address"], "pekko://b");
        let r = ha.get_and_increment(&b, &job).await;
        r.expect(StatusCode::OK);
        assert_eq!(
            r.json()["value"],
            2,
            "no checkpoint id went to A after B acquired"
        );
        ha.renew("jm-b", &b).await.expect(StatusCode::OK);
    }
);

backend_tests!(
    a_stale_epoch_is_answered_409_and_changes_nothing,
    |ts| async move {
        let (ha, old) = leader(&ts, "jm-a").await;
        let job = random_hex();
        ha.publish(&old, "dispatcher", "pekko://a").await;
        let r = ha
            .post(
                "/state-handles/checkpoint/1",
                old.body(json!({"job": job, "handle": "aced0005"})),
            )
            .await;
        r.expect(StatusCode::CREATED);
        assert_eq!(r.json()["version"], 1);
        let r = ha.get_and_increment(&old, &job).await;
        r.expect(StatusCode::OK);
        assert_eq!(r.json()["value"], 1);

        ha.release("jm-a", &old).await.expect(StatusCode::OK);
        let new = ha.acquire("jm-b").await;
        assert_eq!(new.epoch, old.epoch + 1);

        for (method, path, body) in fenced_writes(&old, &job) {
            let r = ha.send(method, &path, &body).await;
            let message = r.error(StatusCode::CONFLICT);
            assert!(message.contains("fenced"), "{path}: {message}");
        }
        let info = ha.get("/leader-info/dispatcher").await;
        info.expect(StatusCode::OK);
        assert_eq!(info.json()["address"], "pekko://a");
        let h = ha
            .get(&format!("/state-handles/checkpoint/1?job={job}"))
            .await;
        h.expect(StatusCode::OK);
        assert_eq!(
            (h.json()["version"].clone(), h.json()["handle"].clone()),
            (json!(1), json!("aced0005"))
        );
        ha.assert_not_found(&format!("/state-handles/checkpoint/2?job={job}"))
            .await;
        let c = ha.get(&format!("/counters/{job}")).await;
        c.expect(StatusCode::OK);
        assert_eq!(c.json()["value"], 2);
    }
);

backend_tests!(state_handles_and_counters_over_http, |ts| async move {
    let (ha, e) = leader(&ts, "jm").await;
    let job = random_hex();
    let plan = format!("/state-handles/execution-plan/{job}");
    let counter = format!("/counters/{job}");
    ha.post(&plan, e.body(json!({"handle": "0102"})))
        .await
        .expect(StatusCode::CREATED);
    ha.post(&plan, e.body(json!({"handle": "0102"})))
        .await
        .error(StatusCode::CONFLICT);
    let wrong = ha
        .put(
            &plan,
            e.body(json!({"expected-version": 7, "handle": "03"})),
        )
        .await
        .error(StatusCode::CONFLICT);
    assert!(wrong.contains("version"), "{wrong}");
    let r = ha
        .put(
            &plan,
            e.body(json!({"expected-version": 1, "handle": "03"})),
        )
        .await;
    r.expect(StatusCode::OK);
    assert_eq!(r.json()["version"], 2);
    let list = ha.get("/state-handles/execution-plan").await;
    list.expect(StatusCode::OK);
    let list = list.json();
    assert_eq!(list["state-handles"].as_array().unwrap().len(), 1, "{list}");
    assert_eq!(list["state-handles"][0]["handle"], "03");
    for removed in [true, false] {
        let r = ha.delete(&plan, e.body(json!({}))).await;
        r.expect(StatusCode::OK);
        assert_eq!(r.json()["removed"], removed);
    }
    ha.assert_not_found(&format!("/counters/{job}")).await;
    ha.put(&counter, e.body(json!({"value": 7})))
        .await
        .expect(StatusCode::OK);
    let r = ha.get_and_increment(&e, &job).await;
    assert_eq!(r.json()["value"], 7);
    let all = ha.get("/leader-info").await;
    all.expect(StatusCode::OK);
    assert_eq!(all.json(), json!({"leader-info": []}));
});

backend_tests!(bad_ha_input_is_400_never_5xx, |ts| async move {
    let (ha, e) = leader(&ts, "jm").await;
    let job = random_hex();
    let long = "x".repeat(300);
    let checkpoint = "/state-handles/checkpoint/1";
    let counter = format!("/counters/{job}");
    let increment = format!("/counters/{job}/get-and-increment");
    // Per route, the bodies it refuses.
    let refused: [(Method, &str, Vec<Value>); 13] = [
        (
            Method::POST,
            "/lease/acquire",
            vec![
                json!({"holder": "", "duration-ms": 1000}),
                json!({"holder": long, "duration-ms": 1000}),
                json!({"holder": "h", "duration-ms": 0}),
                json!({"holder": "h", "duration-ms": u64::MAX}),
                json!({"holder": "h"}),
                json!({"holder": "h\u{0}", "duration-ms": 1000}),
                json!({"holder": "h", "duration-ms": 1000, "epoc": 1}),
                // Each route takes exactly its own fields: one that another route takes is
                // unknown here, as docs/api.md says.
                json!({"holder": "h", "duration-ms": 1000, "epoch": 1}),
            ],
        ),
        (
            Method::POST,
            "/lease/renew",
            vec![json!({"holder": "h", "duration-ms": 1000})],
        ),
        (
            Method::POST,
            "/lease/release",
            vec![e.body(json!({"holder": "jm", "duration-ms": 1000}))],
        ),
        (
            Method::PUT,
            "/leader-info/dispatcher",
            vec![
                e.body(json!({"address": "", "session-id": "s"})),
                json!({"epoch": "one", "address": "a", "session-id": "s"}),
            ],
        ),
        (
            Method::PUT,
            &format!("/leader-info/{long}"),
            vec![e.body(json!({"address": "a", "session-id": "s"}))],
        ),
        (
            Method::DELETE,
            "/leader-info/dispatcher",
            vec![e.body(json!({"job": job}))],
        ),
        (
            Method::POST,
            "/state-handles/savepoint/1",
            vec![e.body(json!({"handle": "00"}))],
        ),
        (
            Method::POST,
            checkpoint,
            vec![
                e.body(json!({"job": "JOB", "handle": "00"})),
                e.body(json!({"handle": "0"})),
                e.body(json!({"handle": "zz"})),
                e.body(json!({"handle": ""})),
                e.body(json!({"handle": "00".repeat(65537)})),
                e.body(json!({"job": job, "expected-version": 1, "handle": "00"})),
                // Hex is digits only: no sign, no prefix, no space.
                e.body(json!({"job": job, "handle": "+1"})),
                e.body(json!({"job": job, "handle": "-1"})),
                e.body(json!({"job": job, "handle": " 1"})),
                e.body(json!({"job": job, "handle": "0x01"})),
            ],
        ),
        (
            Method::PUT,
            checkpoint,
            vec![
                e.body(json!({"handle": "00"})),
                e.body(json!({"expected-version": 0, "handle": "00"})),
            ],
        ),
        (
            Method::PUT,
            &counter,
            vec![e.body(json!({"value": 0})), e.body(json!({}))],
        ),
        (
            Method::POST,
            "/counters/nothex/get-and-increment",
            vec![e.body(json!({}))],
        ),
        (
            Method::POST,
            &increment,
            vec![
                json!({"epoch": 1e300}),
                e.body(json!({"value": 5})),
                // The lease: both fields, the lease id as the acquisition answered it.
                json!({"epoch": e.epoch}),
                json!({"lease-id": e.id}),
                json!({"epoch": e.epoch, "lease-id": "not-a-uuid"}),
                json!({"epoch": e.epoch, "lease-id": e.id.replace('-', "")}),
            ],
        ),
        (
            Method::DELETE,
            &format!("/jobs/{job}"),
            vec![e.body(json!({"job": job}))],
        ),
    ];
    for (method, path, bodies) in refused {
        for body in bodies {
            let r = ha.send(method.clone(), path, &body).await;
            r.error(StatusCode::BAD_REQUEST);
        }
    }
    // Nothing of the refused writes landed (the "+1" handle among them).
    ha.assert_not_found(&format!("/state-handles/checkpoint/1?job={job}"))
        .await;
    ha.assert_not_found(&format!("/counters/{job}")).await;
    // A handle of exactly the largest size is kept.
    ha.post(
        "/state-handles/checkpoint/big",
        e.body(json!({"handle": "ab".repeat(65536)})),
    )
    .await
    .expect(StatusCode::CREATED);
    // Without a JSON content type: 415.
    ha.api
        .request(Method::POST, &format!("{BASE}/lease/acquire"), None, "{}")
        .await
        .error(StatusCode::UNSUPPORTED_MEDIA_TYPE);
});

backend_tests!(
    the_state_handle_listing_pages_by_count_and_bytes,
    |ts| async move {
        let (ha, e) = leader(&ts, "jm").await;
        // 80 handles of 64 KiB (5 MiB) and 20 small ones.
        let big = "ab".repeat(65536);
        for i in 0..100 {
            let handle = if i < 80 { big.clone() } else { "01".to_owned() };
            ha.post(
                &format!("/state-handles/execution-plan/h{i:03}"),
                e.body(json!({"handle": handle})),
            )
            .await
            .expect(StatusCode::CREATED);
        }
        let list = "/state-handles/execution-plan";
        // By bytes: the first page stops once it holds 4 MiB (64 handles of 64 KiB).
        let r = ha.get(list).await;
        r.expect(StatusCode::OK);
        let body = &r.body;
        assert!(
            body.len() <= 2 * ((4 << 20) + 65536) + 64 * 1024,
            "a page of {} bytes",
            body.len()
        );
        let v = r.json();
        let page = v["state-handles"].as_array().unwrap();
        assert_eq!(page.len(), 64, "64 handles of 64 KiB reach 4 MiB");
        assert_eq!(v["next"], "h063");
        // Paging parameters out of bounds or unknown: 400.
        for bad in ["limit=0", "limit=10001", "limit=x", "after=", "page=2"] {
            ha.get(&format!("{list}?{bad}"))
                .await
                .error(StatusCode::BAD_REQUEST);
        }
        // By count, and every handle exactly once across the pages.
        let mut seen = Vec::new();
        let mut after: Option<String> = None;
        for _ in 0..100 {
            let url = match &after {
                None => format!("{list}?limit=30"),
                Some(a) => format!("{list}?limit=30&after={a}"),
            };
            let r = ha.get(&url).await;
            r.expect(StatusCode::OK);
            let v = r.json();
            let names: Vec<String> = v["state-handles"]
                .as_array()
                .unwrap()
                .iter()
                .map(|h| h["name"].as_str().unwrap().to_owned())
                .collect();
            assert!(!names.is_empty() && names.len() <= 30, "{names:?}");
            seen.extend(names);
            match v["next"].as_str() {
                Some(n) => after = Some(n.to_owned()),
                None => break,
            }
        }
        let want: Vec<String> = (0..100).map(|i| format!("h{i:03}")).collect();
        assert_eq!(seen, want);
    }
);

backend_tests!(
    a_counter_at_its_largest_value_answers_400_on_both_backends,
    |ts| async move {
        let (ha, e) = leader(&ts, "jm").await;
        let job = random_hex();
        ha.put(
            &format!("/counters/{job}"),
            e.body(json!({"value": i64::MAX})),
        )
        .await
        .expect(StatusCode::OK);
        // The id i64::MAX is handed out only if the next one could be stored: it cannot, so the
        // call is refused (400, as PostgreSQL's bigint range says) and the counter stays.
        let r = ha.get_and_increment(&e, &job).await;
        r.error(StatusCode::BAD_REQUEST);
        let r = ha.get(&format!("/counters/{job}")).await;
        r.expect(StatusCode::OK);
        assert_eq!(r.json()["value"], i64::MAX);
    }
);
