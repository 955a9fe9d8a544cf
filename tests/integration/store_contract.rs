//! The `Store` trait on both backends: Flink's ten contract cases, for job results and
//! application results, and what the HTTP layer relies on beyond them (isolation of
//! clusters and kinds, paging, times, verbatim results, concurrent writers).

use crate::common;

use std::collections::BTreeSet;
use std::sync::Arc;

use jobstore::ids::ClusterId;
use jobstore::store::{Page, ResultEntry, ResultState, StateFilter, Store, StoreError};
use serde_json::{Value, json};

use common::contract::{Failure, FlinkResultStore};
use common::{KINDS, Kind, TestStore, at_once, flink_files, random_hex};

fn cluster(name: &str) -> ClusterId {
    name.parse().expect("a valid cluster id")
}

/// Flink's operations on the `Store` trait, for one cluster.
struct StoreAdapter {
    store: Arc<dyn Store>,
    cluster: ClusterId,
}

async fn store_adapter(ts: &TestStore, cluster_name: &str) -> StoreAdapter {
    StoreAdapter {
        store: ts.store.clone(),
        cluster: cluster(cluster_name),
    }
}

impl StoreAdapter {
    async fn state(&self, kind: Kind, id: &str) -> Option<ResultState> {
        self.store
            .get_result(&self.cluster, kind.id(id))
            .await
            .expect("get_result")
            .map(|e| e.state)
    }
}

impl FlinkResultStore for StoreAdapter {
    async fn create_dirty(&self, kind: Kind, result: &Value) -> Result<(), Failure> {
        let id = result[kind.result_id_field()].as_str().expect("an id");
        match self
            .store
            .create_result(&self.cluster, kind.id(id), result)
            .await
        {
            Ok(entry) => {
                assert_eq!(entry.state, ResultState::Dirty);
                assert_eq!(entry.id, id);
                assert_eq!(entry.cleaned_at, None);
                assert_eq!(&entry.result, result);
                Ok(())
            }
            Err(StoreError::Conflict) => Err(Failure::IllegalState),
            Err(e) => panic!("create_result: {e}"),
        }
    }

    async fn mark_clean(&self, kind: Kind, id: &str) -> Result<(), Failure> {
        match self
            .store
            .mark_result_clean(&self.cluster, kind.id(id))
            .await
        {
            Ok(entry) => {
                assert_eq!(entry.state, ResultState::Clean);
                assert!(entry.cleaned_at.is_some());
                Ok(())
            }
            Err(StoreError::NotFound) => Err(Failure::NoSuchElement),
            Err(e) => panic!("mark_result_clean: {e}"),
        }
    }

    async fn has_entry(&self, kind: Kind, id: &str) -> bool {
        self.state(kind, id).await.is_some()
    }

    async fn has_dirty(&self, kind: Kind, id: &str) -> bool {
        self.state(kind, id).await == Some(ResultState::Dirty)
    }

    async fn has_clean(&self, kind: Kind, id: &str) -> bool {
        self.state(kind, id).await == Some(ResultState::Clean)
    }

    async fn dirty_results(&self, kind: Kind) -> Vec<Value> {
        list_all(
            &*self.store,
            kind,
            &self.cluster,
            StateFilter::Only(ResultState::Dirty),
            10_000,
        )
        .await
        .into_iter()
        .map(|e| e.result)
        .collect()
    }
}

contract_cases!(store_adapter);

/// Every entry of a listing, page by page, checking the order and page sizes.
async fn list_all(
    store: &dyn Store, kind: Kind, cluster: &ClusterId, filter: StateFilter, limit: u32,
) -> Vec<ResultEntry> {
    let mut all: Vec<ResultEntry> = Vec::new();
    let mut after = None;
    loop {
        let page = store
            .list_results(kind.store(), cluster, filter, Page { after, limit })
            .await
            .expect("list_results");
        assert!(page.len() <= limit as usize, "page larger than its limit");
        for e in &page {
            assert_eq!(e.cluster_id, cluster.as_str(), "entry of another cluster");
            if let StateFilter::Only(state) = filter {
                assert_eq!(e.state, state, "entry of the wrong state");
            }
            if let Some(last) = all.last() {
                assert!(
                    last.id < e.id,
                    "not ordered by id: {} then {}",
                    last.id,
                    e.id
                );
            }
        }
        let full = page.len() == limit as usize;
        after = page.last().map(|e| e.id);
        all.extend(page);
        if !full {
            return all;
        }
    }
}

backend_tests!(
    mark_clean_keeps_the_result_and_its_first_cleaned_at,
    |ts| async move {
        let c = cluster("times");
        for kind in KINDS {
            let id = random_hex();
            let result = kind.result(&id);
            let created = ts
                .store
                .create_result(&c, kind.id(&id), &result)
                .await
                .unwrap();
            let cleaned = ts.store.mark_result_clean(&c, kind.id(&id)).await.unwrap();
            assert_eq!(cleaned.state, ResultState::Clean);
            assert_eq!(cleaned.created_at, created.created_at);
            let cleaned_at = cleaned.cleaned_at.expect("cleaned_at");
            assert!(cleaned_at >= created.created_at);
            assert_eq!(cleaned.result, result);
            // Cleaning again changes nothing, not even cleaned_at.
            let again = ts.store.mark_result_clean(&c, kind.id(&id)).await.unwrap();
            assert_eq!(again, cleaned);
            let read = ts.store.get_result(&c, kind.id(&id)).await.unwrap();
            assert_eq!(read, Some(cleaned));
        }
    }
);

backend_tests!(delete_removes_an_entry_in_either_state, |ts| async move {
    let c = cluster("delete");
    for kind in KINDS {
        let (dirty, clean) = (random_hex(), random_hex());
        for id in [&dirty, &clean] {
            ts.store
                .create_result(&c, kind.id(id), &kind.result(id))
                .await
                .unwrap();
        }
        ts.store
            .mark_result_clean(&c, kind.id(&clean))
            .await
            .unwrap();
        for id in [&dirty, &clean] {
            assert!(ts.store.delete_result(&c, kind.id(id)).await.unwrap());
            assert!(!ts.store.delete_result(&c, kind.id(id)).await.unwrap());
            assert_eq!(ts.store.get_result(&c, kind.id(id)).await.unwrap(), None);
            // A deleted id can be registered again, as a new dirty entry.
            let again = ts
                .store
                .create_result(&c, kind.id(id), &kind.result(id))
                .await
                .unwrap();
            assert_eq!(again.state, ResultState::Dirty);
        }
    }
});

backend_tests!(clusters_and_kinds_never_see_each_other, |ts| async move {
    let (a, b) = (cluster("cluster-a"), cluster("cluster-b"));
    let id = random_hex();
    // The same id in two clusters and in both stores: four independent entries.
    for c in [&a, &b] {
        for kind in KINDS {
            ts.store
                .create_result(c, kind.id(&id), &kind.result(&id))
                .await
                .unwrap();
        }
    }
    ts.store
        .mark_result_clean(&a, Kind::Job.id(&id))
        .await
        .unwrap();
    let state = |kind: Kind, c: ClusterId| {
        let store = ts.store.clone();
        let id = kind.id(&id);
        async move { store.get_result(&c, id).await.unwrap().map(|e| e.state) }
    };
    assert_eq!(state(Kind::Job, a.clone()).await, Some(ResultState::Clean));
    assert_eq!(state(Kind::Job, b.clone()).await, Some(ResultState::Dirty));
    assert_eq!(
        state(Kind::Application, a.clone()).await,
        Some(ResultState::Dirty)
    );
    assert!(
        ts.store
            .delete_result(&b, Kind::Application.id(&id))
            .await
            .unwrap()
    );
    assert_eq!(state(Kind::Application, b.clone()).await, None);
    assert_eq!(state(Kind::Job, b.clone()).await, Some(ResultState::Dirty));
    assert_eq!(
        state(Kind::Application, a.clone()).await,
        Some(ResultState::Dirty)
    );
    // Another cluster's entries never appear in a listing or a get.
    let other = random_hex();
    ts.store
        .create_result(&b, Kind::Job.id(&other), &Kind::Job.result(&other))
        .await
        .unwrap();
    let in_a = list_all(&*ts.store, Kind::Job, &a, StateFilter::All, 100).await;
    assert_eq!(
        in_a.iter().map(|e| e.id.to_string()).collect::<Vec<_>>(),
        [id.as_str()]
    );
    assert_eq!(
        ts.store.get_result(&a, Kind::Job.id(&other)).await.unwrap(),
        None
    );
    let empty = cluster("cluster-empty");
    for kind in KINDS {
        assert!(
            list_all(&*ts.store, kind, &empty, StateFilter::All, 10)
                .await
                .is_empty()
        );
    }
});

backend_tests!(
    listing_pages_through_every_entry_in_id_order,
    |ts| async move {
        let c = cluster("paging");
        let noise = cluster("paging-noise");
        let kind = Kind::Job;
        let mut dirty = BTreeSet::new();
        let mut clean = BTreeSet::new();
        for i in 0..45 {
            let id = random_hex();
            ts.store
                .create_result(&c, kind.id(&id), &kind.result(&id))
                .await
                .unwrap();
            if i % 3 == 0 {
                ts.store.mark_result_clean(&c, kind.id(&id)).await.unwrap();
                clean.insert(id);
            } else {
                dirty.insert(id);
            }
            let n = random_hex();
            ts.store
                .create_result(&noise, kind.id(&n), &kind.result(&n))
                .await
                .unwrap();
        }
        let ids = |entries: Vec<ResultEntry>| entries.into_iter().map(|e| e.id).collect::<Vec<_>>();
        let store = &*ts.store;
        for limit in [1, 4, 30, 10_000] {
            for (state, expected) in [(ResultState::Dirty, &dirty), (ResultState::Clean, &clean)] {
                let got = ids(list_all(store, kind, &c, StateFilter::Only(state), limit).await);
                assert_eq!(
                    got,
                    expected.iter().cloned().collect::<Vec<_>>(),
                    "limit {limit}"
                );
            }
            let got = ids(list_all(store, kind, &c, StateFilter::All, limit).await);
            let all: BTreeSet<_> = dirty.union(&clean).cloned().collect();
            assert_eq!(got, all.into_iter().collect::<Vec<_>>(), "limit {limit}");
        }
    }
);

backend_tests!(flink_files_are_kept_verbatim, |ts| async move {
    let c = cluster("flink-2-3-0");
    for kind in KINDS {
        let files = flink_files(kind);
        assert!(!files.is_empty());
        for (name, file) in files {
            let mut result = file["result"].clone();
            result["a-field-of-a-future-flink"] = json!({"nested": [1, "two", null, true, 2.5]});
            let id = kind.id(result[kind.result_id_field()].as_str().unwrap());
            let created = ts.store.create_result(&c, id, &result).await.unwrap();
            assert_eq!(created.result, result, "{name}");
            let read = ts.store.get_result(&c, id).await.unwrap().unwrap();
            assert_eq!(read.result, result, "{name}");
            assert_eq!(read.id, id.to_string());
        }
    }
});

backend_tests!(
    concurrent_creates_of_one_id_register_it_once,
    |ts| async move {
        let c = cluster("race");
        for (kind, id) in KINDS.map(|kind| (kind, random_hex())) {
            let outcomes = at_once(32, |_| {
                let (store, c, id) = (ts.store.clone(), c.clone(), id.clone());
                async move {
                    store
                        .create_result(&c, kind.id(&id), &kind.result(&id))
                        .await
                }
            })
            .await;
            let created = outcomes.iter().filter(|o| o.is_ok()).count();
            let conflicts = outcomes
                .iter()
                .filter(|o| matches!(o, Err(StoreError::Conflict)))
                .count();
            assert_eq!((created, conflicts), (1, 31), "{kind:?}: {outcomes:?}");
        }
    }
);

backend_tests!(
    concurrent_mark_cleans_agree_on_one_cleaned_at,
    |ts| async move {
        let c = cluster("race");
        for (kind, id) in KINDS.map(|kind| (kind, random_hex())) {
            ts.store
                .create_result(&c, kind.id(&id), &kind.result(&id))
                .await
                .unwrap();
            let outcomes = at_once(32, |_| {
                let (store, c, id) = (ts.store.clone(), c.clone(), id.clone());
                async move { store.mark_result_clean(&c, kind.id(&id)).await }
            })
            .await;
            let entries: Vec<ResultEntry> = outcomes
                .into_iter()
                .map(|o| o.expect("every mark-clean succeeds"))
                .collect();
            let cleaned_at: BTreeSet<_> = entries.iter().map(|e| e.cleaned_at).collect();
            assert_eq!(cleaned_at.len(), 1, "{kind:?}: {cleaned_at:?}");
            assert!(cleaned_at.first().unwrap().is_some());
            let stored = ts
                .store
                .get_result(&c, kind.id(&id))
                .await
                .unwrap()
                .unwrap();
            assert_eq!(stored.cleaned_at, *cleaned_at.first().unwrap());
        }
    }
);

backend_tests!(ready_on_a_migrated_database, |ts| async move {
    ts.store.ready().await.expect("ready");
    let expected = ts.backend.name();
    assert_eq!(ts.store.backend(), expected);
});
