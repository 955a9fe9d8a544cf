//! Failover at the lease's expiry, on both backends: the 409 of an acquisition tells how long
//! the live lease has left (header `Jobstore-Lease-Expires-In-Ms`, on the database's clock),
//! and `GET .../ha/lease` answers the lease (never its lease id) with an ETag and a long poll
//! woken by a release, an acquisition by another holder or the expiry itself — on PostgreSQL
//! also by another jobstore process's write, through the `ha_leases` trigger's NOTIFY — and
//! not by a renewal.

use crate::common;

use std::time::{Duration, Instant};

use axum::http::StatusCode;
use serde_json::{Value, json};

use common::ha::{HaLease, HaRoutes, LEASE_MS};
use common::{Backend, Resp, Serve, TestStore};

const BASE: &str = "/v1/clusters/ha-failover/ha";

/// The header of an acquisition's 409.
const EXPIRES_IN: &str = "jobstore-lease-expires-in-ms";

/// What a long poll woken by a change must answer within: well below the 5 s re-check, so a
/// wake-up within it came from the change itself.
const WOKEN_WITHIN: Duration = Duration::from_millis(4500);

/// Releases `lease` for `holder`, asserting that it ended the lease.
async fn release(ha: &HaRoutes, holder: &str, lease: &HaLease) {
    let r = ha.release(holder, lease).await;
    r.expect(StatusCode::OK);
    assert_eq!(r.json()["released"], true);
}

/// The HA routes over `ts`'s store and `jm-a`'s lease of `ms` there.
async fn held_by_jm_a(ts: &TestStore, ms: u64) -> (HaRoutes, HaLease) {
    let ha = HaRoutes::in_process(ts, BASE);
    let lease = ha.acquire_for("jm-a", ms).await;
    (ha, lease)
}

/// The milliseconds a 409 of an acquisition says the live lease has left.
fn expires_in(r: &Resp) -> u64 {
    r.error(StatusCode::CONFLICT);
    let body = r.json();
    assert_eq!(
        common::keys(&body),
        ["errors"].into(),
        "the contract's error body has one field: {body}"
    );
    r.headers
        .get(EXPIRES_IN)
        .unwrap_or_else(|| {
            panic!(
                "a 409 of an acquisition names {EXPIRES_IN}: {:?}",
                r.headers
            )
        })
        .to_str()
        .unwrap()
        .parse()
        .unwrap()
}

/// `GET .../lease?wait-ms=` with `If-None-Match: tag`: the status, the ETag, the body.
async fn poll(ha: &HaRoutes, tag: Option<&str>, wait_ms: u64) -> (StatusCode, String, Value) {
    common::ha::long_poll(&ha.api, &format!("{}/lease", ha.base), tag, wait_ms).await
}

/// The lease as `GET .../lease` answers it, checked to show exactly the documented fields
/// (never the lease id).
async fn lease_now(ha: &HaRoutes) -> (String, Value) {
    let (status, tag, body) = poll(ha, None, 0).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        common::keys(&body),
        ["epoch", "expires-at", "expires-in-ms", "holder", "live"].into(),
        "{body}"
    );
    (tag, body)
}

/// A long poll of the lease with `tag`, in a task of its own; it must still wait 300 ms
/// later.
async fn waiting_poll(
    ha: &HaRoutes, tag: &str, wait_ms: u64,
) -> tokio::task::JoinHandle<(StatusCode, String, Value)> {
    let (ha, tag) = (ha.clone(), tag.to_owned());
    let waiter = tokio::spawn(async move { poll(&ha, Some(&tag), wait_ms).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !waiter.is_finished(),
        "the long poll answered before any change"
    );
    waiter
}

/// The answer of a waiting long poll, and how long after `since` it came.
async fn woken(
    waiter: tokio::task::JoinHandle<(StatusCode, String, Value)>, since: Instant, what: &str,
) -> ((StatusCode, String, Value), Duration) {
    let answer = tokio::time::timeout(Duration::from_secs(30), waiter)
        .await
        .unwrap_or_else(|_| panic!("the long poll did not end with {what}"))
        .unwrap();
    let after = since.elapsed();
    eprintln!("long poll woken {after:?} after {what}");
    (answer, after)
}

backend_tests!(
    the_409_of_an_acquisition_tells_how_long_the_lease_has_left,
    |ts| async move {
        let lease_ms = 3000;
        let (ha, a) = held_by_jm_a(&ts, lease_ms).await;
        let first = expires_in(&ha.try_acquire("jm-b", LEASE_MS).await);
        assert!(
            first > 0 && first <= lease_ms,
            "{first} ms left of a {lease_ms} ms lease"
        );
        tokio::time::sleep(Duration::from_millis(400)).await;
        let later = expires_in(&ha.try_acquire("jm-b", LEASE_MS).await);
        assert!(
            later > 0 && later + 300 <= first,
            "{later} ms left 400 ms after {first} ms"
        );
        // The lease as anyone sees it: the same time left, never the lease id.
        let (_, body) = lease_now(&ha).await;
        assert_eq!(
            (&body["holder"], &body["epoch"], &body["live"]),
            (&json!("jm-a"), &json!(a.epoch), &json!(true))
        );
        let left = body["expires-in-ms"].as_u64().unwrap();
        assert!(left > 0 && left <= later, "{body}");
        // A renewal moves it back up.
        ha.renew_for("jm-a", &a, lease_ms)
            .await
            .expect(StatusCode::OK);
        let renewed = expires_in(&ha.try_acquire("jm-b", LEASE_MS).await);
        assert!(
            renewed > later,
            "{renewed} ms left after a renewal, {later} before"
        );
    }
);

backend_tests!(
    a_long_poll_of_the_lease_is_woken_by_a_release_and_by_another_holder,
    |ts| async move {
        let ha = HaRoutes::in_process(&ts, BASE);
        // Never leased: 404 with a tag, and a long poll on that tag ends with the first
        // acquisition.
        let (status, never, _) = poll(&ha, None, 0).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        let waiter = waiting_poll(&ha, &never, 20_000).await;
        let since = Instant::now();
        let a = ha.acquire("jm-a").await;
        let ((status, held, body), after) = woken(waiter, since, "the first acquisition").await;
        assert_eq!(
            (status, &body["holder"], &body["live"]),
            (StatusCode::OK, &json!("jm-a"), &json!(true)),
            "{body}"
        );
        assert_ne!(held, never);
        assert!(after < WOKEN_WITHIN, "{after:?}");
        assert!(body.get("lease-id").is_none(), "{body}");

        // A release.
        let waiter = waiting_poll(&ha, &held, 20_000).await;
        let since = Instant::now();
        release(&ha, "jm-a", &a).await;
        let ((status, released, body), after) = woken(waiter, since, "a release").await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(
            (&body["live"], &body["expires-in-ms"], &body["epoch"]),
            (&json!(false), &json!(0), &json!(a.epoch)),
            "{body}"
        );
        assert_ne!(released, held);
        assert!(after < WOKEN_WITHIN, "{after:?}");

        // An acquisition by another holder.
        let waiter = waiting_poll(&ha, &released, 20_000).await;
        let since = Instant::now();
        let b = ha.acquire("jm-b").await;
        let ((status, taken, body), after) =
            woken(waiter, since, "another holder's acquisition").await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(
            (&body["holder"], &body["epoch"], &body["live"]),
            (&json!("jm-b"), &json!(b.epoch), &json!(true)),
            "{body}"
        );
        assert_ne!(taken, released);
        assert!(after < WOKEN_WITHIN, "{after:?}");
    }
);

backend_tests!(
    a_long_poll_of_the_lease_ends_at_its_expiry_and_304_when_nothing_changed,
    |ts| async move {
        let lease_ms = 1500;
        let (ha, a) = held_by_jm_a(&ts, lease_ms).await;
        let (tag, _) = lease_now(&ha).await;
        // A renewal changes neither holder, nor epoch, nor liveness: 304 at the end of the wait,
        // the same tag.
        let started = Instant::now();
        let waiter = waiting_poll(&ha, &tag, 700).await;
        ha.renew_for("jm-a", &a, lease_ms)
            .await
            .expect(StatusCode::OK);
        let (status, same, body) = waiter.await.unwrap();
        assert_eq!(
            (status, same.as_str(), &body),
            (StatusCode::NOT_MODIFIED, tag.as_str(), &Value::Null)
        );
        assert!(
            started.elapsed() >= Duration::from_millis(700),
            "{:?}",
            started.elapsed()
        );
        // No wait: 304 at once; another tag: the lease at once.
        let (status, _, _) = poll(&ha, Some(&tag), 0).await;
        assert_eq!(status, StatusCode::NOT_MODIFIED);
        let (status, _, body) = poll(&ha, Some("\"other\""), 5000).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        // The lapse of the lease, with no write at all, ends the wait: the tag covers liveness.
        let left = body["expires-in-ms"].as_u64().unwrap();
        let since = Instant::now();
        let waiter = tokio::spawn({
            let (ha, tag) = (ha.clone(), tag.clone());
            async move { poll(&ha, Some(&tag), 20_000).await }
        });
        let ((status, expired, body), after) = woken(waiter, since, "the lease's expiry").await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body["live"], false, "{body}");
        assert_ne!(expired, tag);
        eprintln!("expiry {left} ms ahead, answered after {after:?}");
        assert!(
            after + Duration::from_millis(50) >= Duration::from_millis(left)
                && after < Duration::from_millis(left + 1000),
            "{left} ms left, answered after {after:?}"
        );
        // wait-ms out of bounds: 400.
        ha.get("/lease?wait-ms=60001")
            .await
            .error(StatusCode::BAD_REQUEST);
    }
);

/// Two jobstore processes on one PostgreSQL database: a long poll of the lease on this one
/// ends when the other (`jobstore serve`) releases or acquires, through the V9 trigger's
/// NOTIFY, well before the 5 s re-check would find it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lease_change_on_another_process_wakes_a_long_poll_through_notify() {
    let ts = TestStore::new(Backend::Postgres).await;
    let other = Serve::start(&ts.url, &[]).await;
    let other_ha = HaRoutes::new(other.http.clone(), BASE);
    let ha = HaRoutes::in_process(&ts, BASE);
    let a = other_ha.acquire("jm-a").await;
    let (held, _) = lease_now(&ha).await;
    // Let this process's LISTEN connection come up (the first long poll starts it).
    let (status, _, _) = poll(&ha, Some(&held), 500).await;
    assert_eq!(status, StatusCode::NOT_MODIFIED);

    let waiter = waiting_poll(&ha, &held, 30_000).await;
    let since = Instant::now();
    release(&other_ha, "jm-a", &a).await;
    let ((status, released, body), after) =
        woken(waiter, since, "the other process's release").await;
    assert_eq!(
        (status, &body["live"]),
        (StatusCode::OK, &json!(false)),
        "{body}"
    );
    assert!(
        after < WOKEN_WITHIN,
        "woken {after:?} after the other process's release: not by NOTIFY (the re-check runs every 5 s)"
    );

    let waiter = waiting_poll(&ha, &released, 30_000).await;
    let since = Instant::now();
    other_ha.acquire("jm-b").await;
    let ((status, _, body), after) = woken(waiter, since, "the other process's acquisition").await;
    assert_eq!(
        (status, &body["holder"]),
        (StatusCode::OK, &json!("jm-b")),
        "{body}"
    );
    assert!(
        after < WOKEN_WITHIN,
        "woken {after:?} after the other process's acquisition"
    );
    other.terminate().await;
}
