//! Everything the bench takes from the `jobstore` crate, in one place: the in-process
//! baseline ("direct": the service's own `Store` and its statements), the listing
//! statement the scale test EXPLAINs, and what the floor instrument (`status_floor`) serves.
//! When the store's API changes, this file is the one to adapt.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use jobstore::ids::{ClusterId, JobId, TriggerId};
use jobstore::result_file::{ResultId, ResultKind};
use jobstore::store::{self, OperationKey, Page, ResultState, StateFilter, StoreConfig};
use serde_json::Value;

use crate::cli::Backend;

/// A job or trigger id (32 hex characters on the wire); the store takes it as either.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Id(JobId);

impl Id {
    pub fn random() -> Id {
        Id(JobId::random())
    }

    fn job(self) -> JobId {
        self.0
    }

    fn trigger(self) -> TriggerId {
        self.0
            .to_string()
            .parse()
            .expect("a job id's text is a trigger id's")
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl FromStr for Id {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> anyhow::Result<Id> {
        Ok(Id(s
            .parse()
            .map_err(|e| anyhow::anyhow!("id {s:?}: {e}"))?))
    }
}

/// A cluster id, parsed once.
#[derive(Clone)]
pub struct Cluster(ClusterId);

impl FromStr for Cluster {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> anyhow::Result<Cluster> {
        Ok(Cluster(
            s.parse()
                .map_err(|e| anyhow::anyhow!("cluster {s:?}: {e}"))?,
        ))
    }
}

impl fmt::Display for Cluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0.as_str())
    }
}

/// The service's store, opened as `serve` opens it (`store::open`, same pool settings).
#[derive(Clone)]
pub struct Store(Arc<dyn store::Store>);

impl Store {
    pub async fn open(
        url: &str, max_connections: u32, timeout: Duration, migrate: bool,
    ) -> anyhow::Result<Store> {
        Ok(Store(
            store::open(&StoreConfig {
                url: url.to_owned(),
                max_connections,
                acquire_timeout: timeout,
                migrate,
                group_commit: Default::default(),
                // The direct figures measure the database: every read goes to it.
                operation_cache: 0,
            })
            .await?,
        ))
    }

    /// Flink's createDirtyResult: `result` is the file's `result` object.
    pub async fn create_job_result(
        &self, cluster: &Cluster, id: Id, result: &Value,
    ) -> Result<(), String> {
        self.0
            .create_result(&cluster.0, ResultId::Job(id.job()), result)
            .await
            .map(|_| ())
            .map_err(|e| format!("create: {e}"))
    }

    /// Flink's markResultAsClean.
    pub async fn mark_job_result_clean(&self, cluster: &Cluster, id: Id) -> Result<(), String> {
        match self
            .0
            .mark_result_clean(&cluster.0, ResultId::Job(id.job()))
            .await
        {
            Ok(e) if e.state == ResultState::Clean => Ok(()),
            Ok(_) => Err("clean: the entry is not clean".into()),
            Err(e) => Err(format!("clean: {e}")),
        }
    }

    /// The store call of a savepoint status poll (no JSON: the statement alone).
    pub async fn has_operation(
        &self, cluster: &Cluster, job: Id, trigger: Id,
    ) -> Result<(), String> {
        match self.0.get_operation(&key(cluster, job, trigger)).await {
            Ok(Some(_)) => Ok(()),
            Ok(None) => Err("operation not found".into()),
            Err(e) => Err(format!("get_operation: {e}")),
        }
    }

    /// The status poll's answer as serve writes it (for the floor instrument); None when
    /// there is no such operation or the store failed.
    pub async fn status_body(&self, cluster: &Cluster, job: Id, trigger: Id) -> Option<Vec<u8>> {
        let op = self
            .0
            .get_operation(&key(cluster, job, trigger))
            .await
            .ok()??;
        serde_json::to_vec(&jobstore::http::answers::FlinkStatus::of(&op)).ok()
    }

    /// The `state=dirty` listing as the HTTP handler asks it: the default page of 1,000,
    /// one more than the limit; answers the entries' count.
    pub async fn list_dirty_job_results(&self, cluster: &Cluster) -> Result<usize, String> {
        self.0
            .list_results(
                ResultKind::Job,
                &cluster.0,
                StateFilter::Only(ResultState::Dirty),
                Page {
                    after: None,
                    limit: 1001,
                },
            )
            .await
            .map(|v| v.len())
            .map_err(|e| format!("list_results: {e}"))
    }

    /// serve's whole router on this store, with the default configuration.
    pub fn router(&self) -> axum::Router {
        use jobstore::http::{AppState, HttpConfig, router};
        router(AppState::new(self.0.clone(), HttpConfig::default()))
    }
}

fn key(cluster: &Cluster, job: Id, trigger: Id) -> OperationKey {
    OperationKey {
        cluster: cluster.0.clone(),
        job: Some(job.job()),
        request: trigger.trigger(),
    }
}

/// The statement the service runs for a `state=dirty` listing of job results
/// (`src/store/sql/*/job_results_list_dirty.sql`), with placeholders `$1` (cluster), `$2`
/// (after), `$3` (limit) on both backends.
pub fn list_dirty_sql(backend: Backend) -> String {
    let sql = store::sql::JOB_RESULTS_LIST_DIRTY;
    match backend {
        Backend::Postgres => sql.postgres,
        Backend::Sqlite => sql.sqlite,
    }
    .to_owned()
}
