//! Flink's HA services in the store, on both backends: one lease holder among
//! concurrent acquirers, epochs that rise at every acquisition, every write of a stale
//! epoch fenced (and nothing changed), an atomic checkpoint id counter, compare-and-set
//! state handles, idempotent removal, the cleanups, the views and the schema's CHECKs.

use crate::common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::{Backend, TestStore, at_once, publish, random_hex};
use jobstore::ids::{ClusterId, JobId};
use jobstore::store::{
    CheckpointId, Component, Fence, HaKind, HandlePage, HandleVersion, Holder, Lease,
    StateHandleKey, Store, StoreError,
};

/// A page that holds every handle of a listing (the tests here hold few).
fn whole_page() -> HandlePage {
    HandlePage {
        after: None,
        limit: 10_000,
        max_bytes: usize::MAX,
    }
}

const LONG: Duration = Duration::from_secs(60);

fn cluster(name: &str) -> ClusterId {
    name.parse().expect("a valid cluster id")
}

fn job() -> JobId {
    random_hex().parse().unwrap()
}

fn checkpoint(job: JobId, name: &str) -> StateHandleKey {
    StateHandleKey {
        kind: HaKind::Checkpoint,
        job: Some(job),
        name: name.into(),
    }
}

fn plan(job: JobId) -> StateHandleKey {
    StateHandleKey {
        kind: HaKind::ExecutionPlan,
        job: None,
        name: job.to_string(),
    }
}

async fn acquire(store: &dyn Store, c: &ClusterId, holder: &str, d: Duration) -> Lease {
    store
        .acquire_lease(c, &Holder::from(holder), d)
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("{holder} should get the lease of {c}"))
}

/// Tries `holder`'s acquisition until it lands (the previous lease expiring on the
/// database's clock), within a generous deadline.
async fn acquire_when_free(store: &dyn Store, c: &ClusterId, holder: &str) -> Lease {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(lease) = store
            .acquire_lease(c, &Holder::from(holder), LONG)
            .await
            .unwrap()
        {
            return lease;
        }
        assert!(
            Instant::now() < deadline,
            "{holder} never got the lease of {c}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// One number a query answers, straight on the database.
async fn scalar(ts: &TestStore, sql: &str) -> i64 {
    ts.db.scalar(sql).await
}

/// Runs a statement straight on the database; the error's text when it fails.
async fn execute(ts: &TestStore, sql: &str) -> Result<u64, String> {
    ts.db.execute(sql).await
}

/// Whether `holder`'s acquisition of `c`'s lease is refused (another holder's is live).
async fn refused(store: &dyn Store, c: &ClusterId, holder: &str) -> bool {
    let lease = store.acquire_lease(c, &Holder::from(holder), LONG).await;
    lease.unwrap().is_none()
}

/// Whether `holder` renews `lease` of `c` (for [`LONG`]): false once it is not the live
/// lease, or not `holder`'s.
async fn renews(store: &dyn Store, c: &ClusterId, holder: &str, lease: &Lease) -> bool {
    store
        .renew_lease(c, &Holder::from(holder), lease.fence(), LONG)
        .await
        .unwrap()
}

/// Whether `holder`'s release of `lease` of `c` ended it (false: it was not the live lease,
/// or not `holder`'s).
async fn releases(store: &dyn Store, c: &ClusterId, holder: &str, lease: &Lease) -> bool {
    store
        .release_lease(c, &Holder::from(holder), lease.fence())
        .await
        .unwrap()
}

/// One write of the HA services, to make under a fence (on a job's data where it takes one).
#[derive(Debug, Clone)]
enum HaWrite {
    /// Publishes a component's leader information.
    Publish(&'static str),
    /// Deletes a component's leader information.
    DeleteInfo(&'static str),
    Add(StateHandleKey),
    /// Replaces a handle at version 1.
    Replace(StateHandleKey),
    Remove(StateHandleKey),
    /// The job's checkpoint id counter: get and increment.
    Increment,
    /// The job's checkpoint id counter: set.
    SetCounter(i64),
    RemoveJobData,
}

impl HaWrite {
    /// Makes this write on job `j`'s data of `c` under `fence`; its answer, shown.
    async fn on(
        self, s: &dyn Store, c: &ClusterId, fence: Fence, j: JobId,
    ) -> Result<String, StoreError> {
        fn shown<T: std::fmt::Debug>(r: Result<T, StoreError>) -> Result<String, StoreError> {
            r.map(|answer| format!("{answer:?}"))
        }
        let handle = b"stale";
        match self {
            HaWrite::Publish(component) => {
                shown(publish(s, c, fence, component, ("pekko://stale", "s")).await)
            }
            HaWrite::DeleteInfo(component) => shown(
                s.delete_leader_info(c, fence, &Component::from(component))
                    .await,
            ),
            HaWrite::Add(key) => shown(s.add_state_handle(c, fence, &key, handle).await),
            HaWrite::Replace(key) => {
                let version = HandleVersion(1);
                shown(
                    s.replace_state_handle(c, fence, &key, version, handle)
                        .await,
                )
            }
            HaWrite::Remove(key) => shown(s.remove_state_handle(c, fence, &key).await),
            HaWrite::Increment => shown(s.counter_get_and_increment(c, fence, j).await),
            HaWrite::SetCounter(value) => {
                shown(s.counter_set(c, fence, j, CheckpointId(value)).await)
            }
            HaWrite::RemoveJobData => shown(s.remove_job_ha_data(c, fence, j).await),
        }
    }
}

fn assert_fenced<T: std::fmt::Debug>(what: &str, r: Result<T, StoreError>) {
    match r {
        Err(StoreError::Fenced) => {}
        other => panic!("{what} with a stale epoch: expected Fenced, got {other:?}"),
    }
}

const ACQUIRERS: usize = 16;

backend_tests!(concurrent_acquisitions_give_one_holder, |ts| async move {
    let c = cluster("race");
    let outcomes = at_once(ACQUIRERS, |i| {
        let (store, c) = (ts.store.clone(), c.clone());
        async move {
            let holder = format!("jobmanager-{i}");
            let lease = store
                .acquire_lease(&c, &Holder::from(holder.as_str()), LONG)
                .await;
            (holder, lease)
        }
    })
    .await;
    let mut winners = Vec::new();
    for (holder, lease) in outcomes {
        if let Some(lease) = lease.unwrap_or_else(|e| panic!("{holder}: {e}")) {
            winners.push((holder, lease));
        }
    }
    assert_eq!(
        winners.len(),
        1,
        "{ACQUIRERS} concurrent acquisitions: {winners:?}"
    );
    let (holder, lease) = winners.pop().unwrap();
    assert_eq!(lease.epoch, 1, "the first lease of a cluster");

    // The live holder asking again renews under its epoch; others still get nothing.
    let again = acquire(&*ts.store, &c, &holder, LONG).await;
    assert_eq!(again.epoch, 1);
    assert_eq!(
        again.lease_id, lease.lease_id,
        "a renewal keeps the lease id"
    );
    assert!(again.expires_at >= lease.expires_at);
    assert!(refused(&*ts.store, &c, "someone-else").await);
    assert!(renews(&*ts.store, &c, &holder, &lease).await);
    assert!(!renews(&*ts.store, &c, "someone-else", &lease).await);
    // The lease is per cluster.
    assert_eq!(
        acquire(&*ts.store, &cluster("other"), "someone-else", LONG)
            .await
            .epoch,
        1
    );
});

backend_tests!(
    an_expired_lease_goes_to_another_holder_with_the_next_epoch,
    |ts| async move {
        let c = cluster("expiry");
        let first = acquire(&*ts.store, &c, "jm-a", Duration::from_secs(1)).await;
        assert_eq!(first.epoch, 1);
        // jm-b tries until jm-a's 1 s lease has lapsed on the database's clock (bounded wait;
        // that another holder is refused while the lease is live is the test above).
        let second = acquire_when_free(&*ts.store, &c, "jm-b").await;
        assert_eq!(second.epoch, first.epoch + 1, "a takeover raises the epoch");
        assert!(
            !renews(&*ts.store, &c, "jm-a", &first).await,
            "the deposed holder's renew fails"
        );
        assert!(
            !releases(&*ts.store, &c, "jm-a", &first).await,
            "the deposed holder cannot release the new lease"
        );
        assert!(refused(&*ts.store, &c, "jm-a").await);
        assert_eq!(
            scalar(
                &ts,
                "SELECT count(*) FROM ha_leaders WHERE cluster_id = 'expiry' \
                     AND holder = 'jm-b' AND epoch = 2 AND live"
            )
            .await,
            1
        );

        // A release ends the lease at once; the row and its epoch stay, so the next holder
        // (even the same one) gets a new epoch: epochs never repeat.
        assert!(releases(&*ts.store, &c, "jm-b", &second).await);
        assert!(!renews(&*ts.store, &c, "jm-b", &second).await);
        assert_eq!(
            scalar(
                &ts,
                "SELECT count(*) FROM ha_leaders WHERE cluster_id = 'expiry' AND NOT live"
            )
            .await,
            1
        );
        assert_eq!(acquire(&*ts.store, &c, "jm-b", LONG).await.epoch, 3);
    }
);

backend_tests!(a_stale_epoch_cannot_write, |ts| async move {
    let s = &*ts.store;
    let c = cluster("fenced");
    let j = job();
    let old = acquire(s, &c, "jm-a", LONG).await;
    publish(
        s,
        &c,
        old.fence(),
        "dispatcher",
        ("pekko://a/dispatcher", "s-a"),
    )
    .await
    .unwrap();
    publish(
        s,
        &c,
        old.fence(),
        Component::job(j),
        ("pekko://a/jm", "s-a"),
    )
    .await
    .unwrap();
    s.add_state_handle(&c, old.fence(), &checkpoint(j, "1"), b"cp-1")
        .await
        .unwrap();
    s.add_state_handle(&c, old.fence(), &plan(j), b"plan")
        .await
        .unwrap();
    assert_eq!(
        s.counter_get_and_increment(&c, old.fence(), j)
            .await
            .unwrap(),
        1
    );

    // jm-a's lease ends (released here; expiry is the test above) and jm-b takes over.
    assert!(releases(s, &c, "jm-a", &old).await);
    let new = acquire(s, &c, "jm-b", LONG).await;
    assert_eq!(new.epoch, old.epoch + 1);
    let stale = old.fence();

    let before_info = s.list_leader_info(&c).await.unwrap();
    let before_cp = s
        .get_state_handle(&c, &checkpoint(j, "1"))
        .await
        .unwrap()
        .unwrap();
    for (what, write) in [
        ("publish", HaWrite::Publish("dispatcher")),
        (
            "publish of a new component",
            HaWrite::Publish("resourcemanager"),
        ),
        ("delete leader info", HaWrite::DeleteInfo("dispatcher")),
        ("add", HaWrite::Add(checkpoint(j, "2"))),
        ("replace", HaWrite::Replace(checkpoint(j, "1"))),
        ("remove", HaWrite::Remove(checkpoint(j, "1"))),
        ("get_and_increment", HaWrite::Increment),
        ("set", HaWrite::SetCounter(1000)),
        ("remove job data", HaWrite::RemoveJobData),
    ] {
        assert_fenced(what, write.on(s, &c, stale, j).await);
    }
    // Nothing changed.
    assert_eq!(s.list_leader_info(&c).await.unwrap(), before_info);
    assert_eq!(
        s.get_state_handle(&c, &checkpoint(j, "2")).await.unwrap(),
        None
    );
    assert_eq!(
        s.get_state_handle(&c, &checkpoint(j, "1"))
            .await
            .unwrap()
            .as_ref(),
        Some(&before_cp)
    );
    assert_eq!(s.counter_get(&c, j).await.unwrap(), Some(CheckpointId(2)));
    assert!(s.get_state_handle(&c, &plan(j)).await.unwrap().is_some());

    // A made-up epoch, and any epoch of a cluster nobody leads, are fenced too.
    let future = Fence {
        epoch: new.epoch + 1,
        ..new.fence()
    };
    let set = HaWrite::SetCounter(5);
    assert_fenced("future epoch", set.clone().on(s, &c, future, j).await);
    // The live epoch under another acquisition's lease id (what a holder whose acquisition
    // a database failover lost names: the next acquisition got its epoch again) is fenced.
    let lost = Fence {
        lease_id: old.lease_id,
        ..new.fence()
    };
    for write in [set, HaWrite::Publish("dispatcher")] {
        assert_fenced("live epoch, stale lease id", write.on(s, &c, lost, j).await);
    }
    let add = HaWrite::Add(plan(j));
    assert_fenced(
        "never leased",
        add.on(s, &cluster("nobody"), new.fence(), j).await,
    );

    // The new epoch writes.
    let info = publish(
        s,
        &c,
        new.fence(),
        "dispatcher",
        ("pekko://b/dispatcher", "s-b"),
    )
    .await
    .unwrap();
    assert_eq!(
        (info.epoch, info.address.as_str()),
        (new.epoch, "pekko://b/dispatcher")
    );
    assert_eq!(
        s.replace_state_handle(
            &c,
            new.fence(),
            &checkpoint(j, "1"),
            HandleVersion(1),
            b"cp-1b"
        )
        .await
        .unwrap(),
        2
    );
    assert_eq!(
        s.counter_get_and_increment(&c, new.fence(), j)
            .await
            .unwrap(),
        2
    );
});

const INCREMENTERS: usize = 32;

backend_tests!(
    concurrent_increments_never_hand_out_an_id_twice,
    |ts| async move {
        let c = cluster("counter");
        let j = job();
        let lease = acquire(&*ts.store, &c, "jm", LONG).await;
        assert_eq!(ts.store.counter_get(&c, j).await.unwrap(), None);
        let outcomes = at_once(INCREMENTERS, |_| {
            let (store, c) = (ts.store.clone(), c.clone());
            async move { store.counter_get_and_increment(&c, lease.fence(), j).await }
        })
        .await;
        let mut ids = Vec::new();
        for outcome in outcomes {
            ids.push(outcome.expect("get_and_increment").0);
        }
        let unique: BTreeSet<i64> = ids.iter().copied().collect();
        assert_eq!(
            unique.len(),
            INCREMENTERS,
            "an id handed out twice: {ids:?}"
        );
        assert_eq!(unique, (1..=INCREMENTERS as i64).collect::<BTreeSet<_>>());
        assert_eq!(
            ts.store.counter_get(&c, j).await.unwrap(),
            Some(CheckpointId(INCREMENTERS as i64 + 1))
        );

        // setCount, then the next id is the one set; the schema refuses a count below 1.
        ts.store
            .counter_set(&c, lease.fence(), j, CheckpointId(100))
            .await
            .unwrap();
        assert_eq!(
            ts.store.counter_get(&c, j).await.unwrap(),
            Some(CheckpointId(100))
        );
        assert_eq!(
            ts.store
                .counter_get_and_increment(&c, lease.fence(), j)
                .await
                .unwrap(),
            100
        );
        assert!(
            ts.store
                .counter_set(&c, lease.fence(), j, CheckpointId(0))
                .await
                .is_err()
        );
        assert_eq!(
            ts.store.counter_get(&c, j).await.unwrap(),
            Some(CheckpointId(101))
        );
    }
);

backend_tests!(
    replace_is_a_compare_and_set_on_the_version,
    |ts| async move {
        let s = &*ts.store;
        let c = cluster("cas");
        let e = acquire(s, &c, "jm", LONG).await.fence();
        let j = job();
        let key = checkpoint(j, "0000000000000000042");
        assert_eq!(s.add_state_handle(&c, e, &key, b"v1").await.unwrap(), 1);
        match s.add_state_handle(&c, e, &key, b"again").await {
            Err(StoreError::Conflict) => {}
            other => panic!("a second add of one key: {other:?}"),
        }
        match s
            .replace_state_handle(&c, e, &key, HandleVersion(2), b"wrong")
            .await
        {
            Err(StoreError::VersionMismatch {
                current: HandleVersion(1),
            }) => {}
            other => panic!("replace with a wrong version: {other:?}"),
        }
        let h = s.get_state_handle(&c, &key).await.unwrap().unwrap();
        assert_eq!(
            (h.version, h.handle.as_slice()),
            (HandleVersion(1), &b"v1"[..])
        );
        assert_eq!(
            s.replace_state_handle(&c, e, &key, HandleVersion(1), b"v2")
                .await
                .unwrap(),
            2
        );
        let h = s.get_state_handle(&c, &key).await.unwrap().unwrap();
        assert_eq!(
            (h.version, h.handle.as_slice()),
            (HandleVersion(2), &b"v2"[..])
        );
        assert_eq!(h.job_id, Some(j));
        assert!(!h.marked_for_deletion);
        match s
            .replace_state_handle(&c, e, &checkpoint(j, "missing"), HandleVersion(1), b"x")
            .await
        {
            Err(StoreError::NotFound) => {}
            other => panic!("replace of a missing key: {other:?}"),
        }
        // The same name under another kind or job is another entry.
        assert_eq!(
            s.add_state_handle(&c, e, &checkpoint(job(), "0000000000000000042"), b"o")
                .await
                .unwrap(),
            1
        );
        let listed = s
            .list_state_handles(&c, HaKind::Checkpoint, Some(j), &whole_page())
            .await
            .unwrap()
            .handles;
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].version, 2);
        assert!(
            s.list_state_handles(&c, HaKind::ExecutionPlan, None, &whole_page())
                .await
                .unwrap()
                .handles
                .is_empty()
        );
    }
);

backend_tests!(remove_is_idempotent, |ts| async move {
    let s = &*ts.store;
    let c = cluster("remove");
    let e = acquire(s, &c, "jm", LONG).await.fence();
    let j = job();
    s.add_state_handle(&c, e, &plan(j), b"plan").await.unwrap();
    assert!(
        s.remove_state_handle(&c, e, &plan(j)).await.unwrap(),
        "removed"
    );
    assert!(
        !s.remove_state_handle(&c, e, &plan(j)).await.unwrap(),
        "already gone: Ok"
    );
    assert_eq!(s.get_state_handle(&c, &plan(j)).await.unwrap(), None);
    publish(s, &c, e, "restserver", ("http://a:8081", "s"))
        .await
        .unwrap();
    assert!(
        s.delete_leader_info(&c, e, &Component::from("restserver"))
            .await
            .unwrap()
    );
    assert!(
        !s.delete_leader_info(&c, e, &Component::from("restserver"))
            .await
            .unwrap()
    );
    assert_eq!(
        s.get_leader_info(&c, &Component::from("restserver"))
            .await
            .unwrap(),
        None
    );
});

backend_tests!(job_and_cluster_cleanup_remove_their_data, |ts| async move {
    let s = &*ts.store;
    let c = cluster("cleanup");
    let e = acquire(s, &c, "jm", LONG).await.fence();
    let (gone, kept) = (job(), job());
    for j in [gone, kept] {
        publish(s, &c, e, Component::job(j), ("pekko://jm", "s"))
            .await
            .unwrap();
        s.add_state_handle(&c, e, &plan(j), b"plan").await.unwrap();
        s.add_state_handle(&c, e, &checkpoint(j, "1"), b"cp")
            .await
            .unwrap();
        s.counter_get_and_increment(&c, e, j).await.unwrap();
    }
    publish(s, &c, e, "dispatcher", ("pekko://d", "s"))
        .await
        .unwrap();
    s.remove_job_ha_data(&c, e, gone).await.unwrap();
    assert_eq!(
        s.get_leader_info(&c, &Component::job(gone)).await.unwrap(),
        None
    );
    assert_eq!(s.get_state_handle(&c, &plan(gone)).await.unwrap(), None);
    assert!(
        s.list_state_handles(&c, HaKind::Checkpoint, Some(gone), &whole_page())
            .await
            .unwrap()
            .handles
            .is_empty()
    );
    assert_eq!(s.counter_get(&c, gone).await.unwrap(), None);
    assert!(
        s.get_leader_info(&c, &Component::job(kept))
            .await
            .unwrap()
            .is_some()
    );
    assert!(s.get_state_handle(&c, &plan(kept)).await.unwrap().is_some());
    assert_eq!(
        s.list_state_handles(&c, HaKind::Checkpoint, Some(kept), &whole_page())
            .await
            .unwrap()
            .handles
            .len(),
        1
    );
    assert_eq!(
        s.counter_get(&c, kept).await.unwrap(),
        Some(CheckpointId(2))
    );
    assert!(
        s.get_leader_info(&c, &Component::from("dispatcher"))
            .await
            .unwrap()
            .is_some()
    );

    // Another cluster's data stays when one cluster is cleaned up.
    let other = cluster("cleanup-other");
    let oe = acquire(s, &other, "jm", LONG).await.fence();
    s.add_state_handle(&other, oe, &plan(kept), b"plan")
        .await
        .unwrap();
    s.remove_cluster_ha_data(&c, None).await.unwrap();
    assert!(s.list_leader_info(&c).await.unwrap().is_empty());
    assert_eq!(s.get_state_handle(&c, &plan(kept)).await.unwrap(), None);
    assert_eq!(s.counter_get(&c, kept).await.unwrap(), None);
    assert!(
        s.get_state_handle(&other, &plan(kept))
            .await
            .unwrap()
            .is_some()
    );
    // The lease ended and its epoch stays: the next one is higher.
    assert_fenced(
        "after cleanup",
        s.add_state_handle(&c, e, &plan(kept), b"x").await,
    );
    assert_eq!(acquire(s, &c, "jm", LONG).await.epoch, e.epoch + 1);
});

backend_tests!(the_views_answer, |ts| async move {
    let s = &*ts.store;
    let c = cluster("views");
    let e = acquire(s, &c, "jm-1", LONG).await.fence();
    let j = job();
    publish(s, &c, e, "dispatcher", ("pekko://d", "s"))
        .await
        .unwrap();
    publish(s, &c, e, "resourcemanager", ("pekko://r", "s"))
        .await
        .unwrap();
    for n in ["1", "2", "3"] {
        s.add_state_handle(&c, e, &checkpoint(j, n), b"cp")
            .await
            .unwrap();
    }
    s.add_state_handle(&c, e, &plan(j), b"plan").await.unwrap();
    for _ in 0..4 {
        s.counter_get_and_increment(&c, e, j).await.unwrap();
    }
    assert_eq!(
        scalar(
            &ts,
            "SELECT count(*) FROM ha_leaders WHERE cluster_id = 'views' \
                     AND holder = 'jm-1' AND epoch = 1 AND live AND published_components = 2 \
                     AND leader_since <= renewed_at AND renewed_at < expires_at"
        )
        .await,
        1
    );
    let j = j.to_string();
    assert_eq!(
        scalar(
            &ts,
            &format!(
                "SELECT handles FROM ha_held_state WHERE cluster_id = 'views' \
                              AND kind = 'checkpoint' AND job_id = '{j}'"
            )
        )
        .await,
        3
    );
    assert_eq!(
        scalar(
            &ts,
            &format!(
                "SELECT next_checkpoint_id FROM ha_held_state \
                              WHERE cluster_id = 'views' AND kind = 'checkpoint' \
                              AND job_id = '{j}'"
            )
        )
        .await,
        5
    );
    assert_eq!(
        scalar(
            &ts,
            "SELECT handles FROM ha_held_state WHERE cluster_id = 'views' \
                     AND kind = 'execution-plan' AND job_id = ''"
        )
        .await,
        1
    );
});

backend_tests!(
    the_schema_refuses_rows_the_store_would_not_write,
    |ts| async move {
        let now = match ts.backend {
            Backend::Postgres => "now()",
            Backend::Sqlite => "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')",
        };
        let blob = match ts.backend {
            Backend::Postgres => "'\\x00'::bytea",
            Backend::Sqlite => "x'00'",
        };
        let lease_with_id = |epoch: i64, id: &str| {
            format!(
                "INSERT INTO ha_leases (cluster_id, holder, epoch, lease_id, expires_at) \
             VALUES ('c{epoch}', 'h', {epoch}, '{id}', {now})"
            )
        };
        let lease = |epoch: i64| lease_with_id(epoch, "0b5c9c55-3a55-4d0c-9e7a-35d0e4cb2c11");
        let handle = |kind: &str, version: i64| {
            format!(
                "INSERT INTO ha_state_handles (cluster_id, kind, job_id, name, version, handle) \
             VALUES ('c', '{kind}', '', 'n{version}{kind}', {version}, {blob})"
            )
        };
        let counter = |value: i64| {
            format!(
                "INSERT INTO ha_counters (cluster_id, job_id, value) \
             VALUES ('c', '{}', {value})",
                random_hex()
            )
        };
        // The valid rows go in (so that the refusals below are the CHECKs' doing).
        assert_eq!(execute(&ts, &lease(1)).await, Ok(1));
        assert_eq!(execute(&ts, &handle("checkpoint", 1)).await, Ok(1));
        assert_eq!(execute(&ts, &counter(1)).await, Ok(1));
        for (what, sql) in [
            ("epoch 0", lease(0)),
            ("a negative epoch", lease(-1)),
            ("an unknown kind", handle("savepoint", 1)),
            ("version 0", handle("checkpoint", 0)),
            ("counter 0", counter(0)),
            (
                "leader info of epoch 0",
                "INSERT INTO ha_leader_info (cluster_id, component, epoch, address, session_id) \
             VALUES ('c', 'dispatcher', 0, 'a', 's')"
                    .to_owned(),
            ),
            (
                "a job id that is not 32 hex",
                format!(
                    "INSERT INTO ha_state_handles (cluster_id, kind, job_id, name, version, handle) \
                 VALUES ('c', 'checkpoint', 'JOB', 'n', 1, {blob})"
                ),
            ),
        ] {
            let r = execute(&ts, &sql).await;
            let e = r.expect_err(what);
            assert!(e.to_lowercase().contains("check"), "{what}: {e}");
        }
        // A lease id is a UUID (PostgreSQL's type, SQLite's CHECK).
        let e = execute(
            &ts,
            &lease_with_id(2, "not-a-uuid-but-36-characters-long-xx"),
        )
        .await
        .expect_err("a lease id that is no UUID");
        assert!(
            e.to_lowercase().contains("check") || e.contains("uuid"),
            "{e}"
        );
    }
);
