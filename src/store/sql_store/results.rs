//! [`ResultStore`] on the SQL store: job results and application results (statements
//! `job_results_*` and `application_results_*`, one pair per step). Creates and mark-cleans go
//! through the group commit (`group_commit`), which runs the single-row statements of this
//! file or its PostgreSQL batch.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::Value;

use super::{Retention, SqlStore};
use crate::ids::{ApplicationId, ClusterId, JobId};
use crate::result_file::{ResultId, ResultKind};
use crate::store::db::{OrEmpty, Side, Statement, params, statement};
use crate::store::{Page, ResultEntry, ResultState, ResultStore, StateFilter, StoreResult};

/// The statement of a result kind.
pub(in crate::store) fn pick<P>(
    kind: ResultKind, job: Statement<P>, application: Statement<P>,
) -> Statement<P> {
    match kind {
        ResultKind::Job => job,
        ResultKind::Application => application,
    }
}

params! {
    /// An entry (`*_results_get`, `*_results_delete`, `*_results_mark_clean`).
    pub(in crate::store) struct ResultKey<'a> {
        cluster: &'a ClusterId,
        id: ResultId,
    }

    /// A new entry (`*_results_insert`): `result` is the JSON text jobstore writes.
    pub(in crate::store) struct NewResult<'a> {
        cluster: &'a ClusterId,
        id: ResultId,
        result: &'a str,
        state: ResultState,
    }

    /// A page of a listing (`*_results_list_*`): after the last id of the previous page.
    struct ResultPage<'a> {
        cluster: &'a ClusterId,
        after: OrEmpty<ResultId>,
        limit: u32,
    }
}

/// A result-store row: `cluster_id, job_id | application_id, state, result, created_at,
/// cleaned_at`.
#[derive(sqlx::FromRow)]
pub(in crate::store) struct ResultRow {
    cluster_id: ClusterId,
    #[sqlx(default)]
    job_id: Option<JobId>,
    #[sqlx(default)]
    application_id: Option<ApplicationId>,
    state: ResultState,
    #[sqlx(json)]
    result: Value,
    created_at: DateTime<Utc>,
    cleaned_at: Option<DateTime<Utc>>,
}

impl TryFrom<ResultRow> for ResultEntry {
    type Error = sqlx::Error;
    fn try_from(row: ResultRow) -> Result<Self, sqlx::Error> {
        let id = match (row.job_id, row.application_id) {
            (Some(job), None) => ResultId::Job(job),
            (None, Some(application)) => ResultId::Application(application),
            _ => {
                return Err(sqlx::Error::Decode(
                    "a result row names exactly one of job_id, application_id".into(),
                ));
            }
        };
        Ok(ResultEntry {
            cluster_id: row.cluster_id,
            id,
            state: row.state,
            created_at: row.created_at,
            cleaned_at: row.cleaned_at,
            result: row.result,
        })
    }
}

pub(in crate::store) fn entry(row: Option<ResultRow>) -> StoreResult<Option<ResultEntry>> {
    Ok(row.map(ResultEntry::try_from).transpose()?)
}

/// Every row an entry.
pub(super) fn entries(rows: Vec<ResultRow>) -> StoreResult<Vec<ResultEntry>> {
    Ok(rows
        .into_iter()
        .map(ResultEntry::try_from)
        .collect::<Result<_, _>>()?)
}

#[async_trait]
impl ResultStore for SqlStore {
    async fn create_result(
        &self, cluster: &ClusterId, id: ResultId, result: &Value,
    ) -> StoreResult<ResultEntry> {
        self.create_result_as(cluster, id, result, ResultState::Dirty)
            .await
    }

    async fn create_result_as(
        &self, cluster: &ClusterId, id: ResultId, result: &Value, state: ResultState,
    ) -> StoreResult<ResultEntry> {
        // One statement of a batch of concurrent writes (`group_commit`).
        let deadline = self.deadline();
        self.group
            .create(deadline, cluster, id, result, state)
            .await
    }

    async fn get_result(
        &self, cluster: &ClusterId, id: ResultId,
    ) -> StoreResult<Option<ResultEntry>> {
        let get = pick(
            id.kind(),
            statement!(JOB_RESULTS_GET),
            statement!(APPLICATION_RESULTS_GET),
        );
        let key = ResultKey { cluster, id };
        entry(self.call().optional(Side::Read, get, &key).await?)
    }

    async fn mark_result_clean(
        &self, cluster: &ClusterId, id: ResultId,
    ) -> StoreResult<ResultEntry> {
        // Dirty becomes clean in a batch of concurrent writes (`group_commit`); clean is
        // answered as it is, absent is not found.
        self.group.clean(self.deadline(), cluster, id).await
    }

    async fn delete_result(&self, cluster: &ClusterId, id: ResultId) -> StoreResult<bool> {
        let delete = pick(
            id.kind(),
            statement!(JOB_RESULTS_DELETE),
            statement!(APPLICATION_RESULTS_DELETE),
        );
        let key = ResultKey { cluster, id };
        Ok(self.call().execute(delete, &key).await? > 0)
    }

    async fn list_results(
        &self, kind: ResultKind, cluster: &ClusterId, filter: StateFilter, page: Page,
    ) -> StoreResult<Vec<ResultEntry>> {
        let list = match filter {
            StateFilter::All => pick(
                kind,
                statement!(JOB_RESULTS_LIST_ALL),
                statement!(APPLICATION_RESULTS_LIST_ALL),
            ),
            StateFilter::Only(ResultState::Dirty) => pick(
                kind,
                statement!(JOB_RESULTS_LIST_DIRTY),
                statement!(APPLICATION_RESULTS_LIST_DIRTY),
            ),
            StateFilter::Only(ResultState::Clean) => pick(
                kind,
                statement!(JOB_RESULTS_LIST_CLEAN),
                statement!(APPLICATION_RESULTS_LIST_CLEAN),
            ),
        };
        let page = ResultPage {
            cluster,
            after: OrEmpty(page.after),
            limit: page.limit,
        };
        entries(self.call().all(Side::Read, list, &page).await?)
    }

    async fn purge_clean_results(&self, kind: ResultKind, retention: Duration) -> StoreResult<u64> {
        let purge = pick(
            kind,
            statement!(JOB_RESULTS_PURGE_CLEAN),
            statement!(APPLICATION_RESULTS_PURGE_CLEAN),
        );
        let older = Retention {
            retention_ms: retention,
        };
        self.call().execute(purge, &older).await
    }
}
