//! Flink's result stores (its `JobResultStore` and `ApplicationResultStore`): one entry per
//! job or application of a cluster, dirty until Flink cleaned up after it.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

use super::{Page, ResultEntry, ResultState, StateFilter, StoreResult};
use crate::ids::ClusterId;
use crate::result_file::{ResultId, ResultKind};

/// Job results and application results. Creates and mark-cleans of concurrent callers are
/// committed together (`group_commit`), each answered as it would be alone.
#[async_trait]
pub trait ResultStore: Send + Sync {
    /// Registers a dirty entry. A present id, dirty or clean, is [`StoreError::Conflict`](super::StoreError::Conflict).
    async fn create_result(
        &self, cluster: &ClusterId, id: ResultId, result: &Value,
    ) -> StoreResult<ResultEntry>;

    /// Registers an entry directly in `state` (one statement; for imports of clean files,
    /// so that no reader ever sees them dirty). A present id is [`StoreError::Conflict`](super::StoreError::Conflict).
    async fn create_result_as(
        &self, cluster: &ClusterId, id: ResultId, result: &Value, state: ResultState,
    ) -> StoreResult<ResultEntry>;

    async fn get_result(
        &self, cluster: &ClusterId, id: ResultId,
    ) -> StoreResult<Option<ResultEntry>>;

    /// Dirty becomes clean; clean stays as it is (same `cleaned_at`); absent is
    /// [`StoreError::NotFound`](super::StoreError::NotFound).
    async fn mark_result_clean(
        &self, cluster: &ClusterId, id: ResultId,
    ) -> StoreResult<ResultEntry>;

    /// Removes an entry in whatever state; false when there was none.
    async fn delete_result(&self, cluster: &ClusterId, id: ResultId) -> StoreResult<bool>;

    /// Entries of one kind and cluster ordered by id, at most `page.limit` of them.
    async fn list_results(
        &self, kind: ResultKind, cluster: &ClusterId, filter: StateFilter, page: Page,
    ) -> StoreResult<Vec<ResultEntry>>;

    /// Removes clean entries cleaned longer ago than `retention`.
    async fn purge_clean_results(&self, kind: ResultKind, retention: Duration) -> StoreResult<u64>;
}
