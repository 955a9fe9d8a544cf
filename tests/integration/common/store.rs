//! Everything of the harness that names the store's own types (`jobstore::store`): a
//! migrated store on a fresh database, the macro that runs one test body on both backends,
//! and the small helpers the suites share to build keys and read entries. When the store's
//! API changes, this is the one file of the harness to follow it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use jobstore::http::HttpConfig;
use jobstore::ids::ClusterId;
use jobstore::result_file::ResultKind;
use jobstore::store::{
    Operation, OperationKey, Page, ResultEntry, StateFilter, Store, StoreConfig,
};

use super::{Backend, Client, Kind, Service, TestDb};

/// A store as the service holds it.
pub type SharedStore = Arc<dyn Store>;

/// The store configuration the tests open stores with.
pub fn store_config(url: &str) -> StoreConfig {
    StoreConfig {
        url: url.to_owned(),
        max_connections: 8,
        acquire_timeout: Duration::from_secs(10),
        migrate: true,
        group_commit: Default::default(),
        operation_cache: jobstore::store::DEFAULT_OPERATION_CACHE_SIZE,
    }
}

/// A migrated store on a database of its own. Dropping it removes the database.
pub struct TestStore {
    pub backend: Backend,
    pub url: String,
    pub store: SharedStore,
    // Declared last: dropped after the store.
    pub db: TestDb,
}

impl TestStore {
    pub async fn new(backend: Backend) -> TestStore {
        let db = TestDb::new(backend).await;
        let store = jobstore::store::open(&store_config(&db.url))
            .await
            .unwrap_or_else(|e| panic!("opening the {backend:?} store failed: {e:#}"));
        TestStore {
            backend,
            url: db.url.clone(),
            store,
            db,
        }
    }

    /// The router over this store, driven in-process.
    pub fn api(&self, config: HttpConfig) -> Client {
        Client::in_process(self.store.clone(), config)
    }

    /// The router over this store on a real listener.
    pub async fn serve(&self, config: HttpConfig) -> Service {
        Service::start(self.store.clone(), config).await
    }
}

/// Runs one async test body against both backends: `backend_tests!(name, |ts| async move
/// {...})` makes the tests `name::postgres` and `name::sqlite`, each with its own fresh
/// [`TestStore`] bound to `ts`, on a multi-thread runtime.
#[macro_export]
macro_rules! backend_tests {
    ($(#[$attr:meta])* $name:ident, |$ts:ident| $body:expr) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            $(#[$attr])*
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn postgres() {
                $crate::backend_test!($crate::common::Backend::Postgres, |$ts| $body);
            }

            $(#[$attr])*
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn sqlite() {
                $crate::backend_test!($crate::common::Backend::Sqlite, |$ts| $body);
            }
        }
    };
}

/// The body of one test of [`backend_tests!`].
#[macro_export]
macro_rules! backend_test {
    ($backend:expr, |$ts:ident| $body:expr) => {
        // A local of the test function, not a closure argument: an `async move` body that
        // captures only some fields leaves the guard here, alive to the end.
        let $ts = $crate::common::TestStore::new($backend).await;
        let test = $body;
        test.await;
    };
}

/// Two tests, `$postgres` and `$sqlite`, with the test attribute given, that run the async
/// function `$f(Backend)` on each backend: `per_backend!(#[tokio::test] f => f_postgres,
/// f_sqlite);`.
#[macro_export]
macro_rules! per_backend {
    (#[$test:meta] $f:ident => $postgres:ident, $sqlite:ident) => {
        #[$test]
        async fn $postgres() {
            $f($crate::common::Backend::Postgres).await;
        }

        #[$test]
        async fn $sqlite() {
            $f($crate::common::Backend::Sqlite).await;
        }
    };
}

impl Kind {
    /// The store-level kind.
    pub fn store(self) -> ResultKind {
        match self {
            Kind::Job => ResultKind::Job,
            Kind::Application => ResultKind::Application,
        }
    }

    /// An id of this kind's entries, from its hex text.
    pub fn id(self, hex: &str) -> jobstore::result_file::ResultId {
        jobstore::result_file::ResultId::parse(self.store(), hex).expect("a valid hex id")
    }
}

/// The key of a savepoint operation, from its three ids as text.
pub fn operation_key(cluster: &str, job: &str, request: &str) -> OperationKey {
    OperationKey {
        cluster: cluster.parse().unwrap(),
        job: Some(job.parse().unwrap()),
        request: request.parse().unwrap(),
    }
}

impl TestStore {
    /// Stores `kind`'s result for `id` in `cluster` (as [`Kind::result`] shapes it), dirty,
    /// or marked clean with `clean`.
    pub async fn put_result(&self, kind: Kind, cluster: &str, id: &str, clean: bool) {
        let cluster: ClusterId = cluster.parse().unwrap();
        self.store
            .create_result(&cluster, kind.id(id), &kind.result(id))
            .await
            .unwrap();
        if clean {
            self.store
                .mark_result_clean(&cluster, kind.id(id))
                .await
                .unwrap();
        }
    }

    /// The savepoint operation stored under these ids (which must be there).
    pub async fn operation(&self, cluster: &str, job: &str, request: &str) -> Operation {
        self.store
            .get_operation(&operation_key(cluster, job, request))
            .await
            .expect("reading the operation")
            .unwrap_or_else(|| panic!("operation {request} of job {job} is not stored"))
    }
}

impl TestDb {
    /// Every entry of one kind of a cluster, by id, read through a store opened on this
    /// database (not migrating it).
    pub async fn entries(&self, kind: ResultKind, cluster: &str) -> BTreeMap<String, ResultEntry> {
        let store = jobstore::store::open(&StoreConfig {
            max_connections: 2,
            migrate: false,
            ..store_config(&self.url)
        })
        .await
        .expect("open the store");
        let list = store
            .list_results(
                kind,
                &cluster.parse().unwrap(),
                StateFilter::All,
                Page {
                    after: None,
                    limit: 10_000,
                },
            )
            .await
            .expect("list the entries");
        list.into_iter().map(|e| (e.id.to_string(), e)).collect()
    }
}

impl TestDb {
    /// Migrates this (empty) database to schema `version` only: the schema of an older
    /// release, for upgrade tests.
    pub async fn migrate_to(&self, version: i32) {
        use jobstore::store::migrate;
        use sqlx::Connection;
        let applied = match self.backend {
            Backend::Sqlite => {
                let url = format!("{}?mode=rwc", self.url);
                let mut c = sqlx::SqliteConnection::connect(&url)
                    .await
                    .unwrap_or_else(|e| panic!("SQLite at {url}: {e}"));
                migrate::migrate_sqlite_to(&mut c, Some(version)).await
            }
            Backend::Postgres => {
                let mut c = super::pg_connect(&self.url).await;
                migrate::migrate_postgres_to(&mut c, Some(version)).await
            }
        };
        let applied = applied.unwrap_or_else(|e| panic!("migrating to V{version}: {e}"));
        assert!(applied > 0, "migrations applied up to V{version}");
        // Versions may skip numbers on one backend (SQLite has no V10).
        let reached = self
            .scalar("SELECT CAST(max(version) AS BIGINT) FROM refinery_schema_history")
            .await;
        assert_eq!(reached, i64::from(version), "migrated to V{version}");
    }
}

/// Publishes `component`'s leader information (its address and session id) of `cluster`
/// under `fence`.
pub async fn publish(
    store: &dyn jobstore::store::Store, cluster: &ClusterId, fence: jobstore::store::Fence,
    component: impl Into<jobstore::store::Component>, (address, session_id): (&str, &str),
) -> jobstore::store::StoreResult<jobstore::store::LeaderInfo> {
    let leader = jobstore::store::Leader {
        address,
        session_id,
    };
    store
        .publish_leader_info(cluster, fence, &component.into(), leader)
        .await
}
