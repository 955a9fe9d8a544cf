//! Flink's `JobResultStoreContractTest`, written once against [`FlinkResultStore`] (Flink's
//! store operations), run on the `Store` trait and through HTTP, on both backends, for job
//! results and application results; and the comparison of JSON that PostgreSQL's jsonb may
//! have reformatted.

use serde_json::Value;

use super::{Kind, random_hex};

/// Flink's two failures of the result store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// `IllegalStateException`: the id is already registered.
    IllegalState,
    /// `NoSuchElementException`: the id is not there.
    NoSuchElement,
}

/// Flink's `JobResultStore` operations; implementations panic on any other failure.
#[allow(async_fn_in_trait)]
pub trait FlinkResultStore {
    async fn create_dirty(&self, kind: Kind, result: &Value) -> Result<(), Failure>;
    async fn mark_clean(&self, kind: Kind, id: &str) -> Result<(), Failure>;
    async fn has_entry(&self, kind: Kind, id: &str) -> bool;
    async fn has_dirty(&self, kind: Kind, id: &str) -> bool;
    async fn has_clean(&self, kind: Kind, id: &str) -> bool;
    /// Every dirty entry's `result`, in any order.
    async fn dirty_results(&self, kind: Kind) -> Vec<Value>;
}

fn sorted(mut results: Vec<Value>, kind: Kind) -> Vec<Value> {
    results.sort_by(|a, b| {
        a[kind.result_id_field()]
            .as_str()
            .cmp(&b[kind.result_id_field()].as_str())
    });
    results
}

/// A fresh id, created dirty (asserting that the create succeeds).
async fn created(s: &impl FlinkResultStore, kind: Kind) -> String {
    let id = random_hex();
    assert_eq!(s.create_dirty(kind, &kind.result(&id)).await, Ok(()));
    id
}

/// Creating `id` (again) fails with IllegalStateException.
async fn create_fails(s: &impl FlinkResultStore, kind: Kind, id: &str) {
    assert_eq!(
        s.create_dirty(kind, &kind.result(id)).await,
        Err(Failure::IllegalState)
    );
}

/// 1. create twice with the same id -> IllegalStateException
pub async fn create_twice_fails(s: &impl FlinkResultStore, kind: Kind) {
    let id = created(s, kind).await;
    create_fails(s, kind, &id).await;
}

/// 2. create, mark clean, create again -> IllegalStateException
pub async fn create_after_clean_fails(s: &impl FlinkResultStore, kind: Kind) {
    let id = created(s, kind).await;
    assert_eq!(s.mark_clean(kind, &id).await, Ok(()));
    create_fails(s, kind, &id).await;
}

/// 3. create, mark clean, mark clean again -> no error
pub async fn clean_twice_succeeds(s: &impl FlinkResultStore, kind: Kind) {
    let id = created(s, kind).await;
    assert_eq!(s.mark_clean(kind, &id).await, Ok(()));
    assert_eq!(s.mark_clean(kind, &id).await, Ok(()));
    assert!(s.has_clean(kind, &id).await);
}

/// 4. mark clean on an empty store -> NoSuchElementException
pub async fn clean_on_empty_store_fails(s: &impl FlinkResultStore, kind: Kind) {
    let id = random_hex();
    assert_eq!(s.mark_clean(kind, &id).await, Err(Failure::NoSuchElement));
    assert!(!s.has_entry(kind, &id).await);
}

/// 5. with a dirty entry: hasDirty=true, hasClean=false, has=true
pub async fn dirty_entry_is_dirty(s: &impl FlinkResultStore, kind: Kind) {
    let id = created(s, kind).await;
    assert!(s.has_dirty(kind, &id).await);
    assert!(!s.has_clean(kind, &id).await);
    assert!(s.has_entry(kind, &id).await);
}

/// 6. after mark clean: hasDirty=false, hasClean=true, has=true
pub async fn cleaned_entry_is_clean(s: &impl FlinkResultStore, kind: Kind) {
    let id = created(s, kind).await;
    assert_eq!(s.mark_clean(kind, &id).await, Ok(()));
    assert!(!s.has_dirty(kind, &id).await);
    assert!(s.has_clean(kind, &id).await);
    assert!(s.has_entry(kind, &id).await);
}

/// 7. empty store: all three false
pub async fn empty_store_has_nothing(s: &impl FlinkResultStore, kind: Kind) {
    let id = random_hex();
    assert!(!s.has_dirty(kind, &id).await);
    assert!(!s.has_clean(kind, &id).await);
    assert!(!s.has_entry(kind, &id).await);
}

/// 8. getDirtyResults on an empty store -> empty
pub async fn empty_store_has_no_dirty_results(s: &impl FlinkResultStore, kind: Kind) {
    assert_eq!(s.dirty_results(kind).await, Vec::<Value>::new());
}

/// 9. one dirty entry -> getDirtyResults returns exactly it
pub async fn dirty_results_return_the_dirty_entry(s: &impl FlinkResultStore, kind: Kind) {
    let id = random_hex();
    let result = kind.result(&id);
    assert_eq!(s.create_dirty(kind, &result).await, Ok(()));
    assert_eq!(s.dirty_results(kind).await, vec![result]);
}

/// 10. A clean + B dirty -> getDirtyResults returns only B
pub async fn dirty_results_skip_clean_entries(s: &impl FlinkResultStore, kind: Kind) {
    let (a, b) = (random_hex(), random_hex());
    assert_eq!(s.create_dirty(kind, &kind.result(&a)).await, Ok(()));
    assert_eq!(s.create_dirty(kind, &kind.result(&b)).await, Ok(()));
    assert_eq!(s.mark_clean(kind, &a).await, Ok(()));
    assert_eq!(
        sorted(s.dirty_results(kind).await, kind),
        vec![kind.result(&b)]
    );
}

/// Instantiates one case of this contract for both backends and both kinds, on the adapter
/// that `$adapter(&TestStore, cluster)` builds: `contract_case!(adapter_fn, case_name)`.
#[macro_export]
macro_rules! contract_case {
    ($adapter:path, $case:ident) => {
        $crate::backend_tests!($case, |ts| async move {
            for kind in $crate::common::KINDS {
                let adapter = $adapter(&ts, "flink-contract").await;
                $crate::common::contract::$case(&adapter, kind).await;
            }
        });
    };
}

/// Every case of this contract, on one adapter.
#[macro_export]
macro_rules! contract_cases {
    ($adapter:path) => {
        $crate::contract_case!($adapter, create_twice_fails);
        $crate::contract_case!($adapter, create_after_clean_fails);
        $crate::contract_case!($adapter, clean_twice_succeeds);
        $crate::contract_case!($adapter, clean_on_empty_store_fails);
        $crate::contract_case!($adapter, dirty_entry_is_dirty);
        $crate::contract_case!($adapter, cleaned_entry_is_clean);
        $crate::contract_case!($adapter, empty_store_has_nothing);
        $crate::contract_case!($adapter, empty_store_has_no_dirty_results);
        $crate::contract_case!($adapter, dirty_results_return_the_dirty_entry);
        $crate::contract_case!($adapter, dirty_results_skip_clean_entries);
    };
}

/// Whether two JSON values are equal, numbers by their text except that a number written
/// with an exponent equals the same value written out (PostgreSQL's jsonb prints `1e-7` as
/// `0.0000001`; every number without an exponent comes back with its exact text).
pub fn same_json(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            let (x, y) = (x.to_string(), y.to_string());
            x == y
                || ((x.contains(['e', 'E']) || y.contains(['e', 'E']))
                    && x.parse::<f64>().ok() == y.parse::<f64>().ok())
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_json(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_json(v, w)))
        }
        _ => a == b,
    }
}
