//! The shared test harness: a fresh PostgreSQL database or SQLite file per test, a macro
//! that runs one test body against both backends, the router driven in-process
//! (`tower::ServiceExt::oneshot`) or on a real 127.0.0.1 listener, and the Flink 2.3.0
//! reference files.
//!
//! PostgreSQL is taken from `DATABASE_URL`, or `postgres://postgres@127.0.0.1:5432/postgres`
//! when it is unset. Each test gets its own database (`jobstore_test_<hex>`), dropped by a
//! guard when the test ends, also when it panics. Without a reachable server the tests
//! fail: they never pass without having run.

// Each test crate uses its own part of the harness.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Method, Request, StatusCode, header};
use jobstore::http::{AppState, HttpConfig};
use jobstore::store::{Store, StoreConfig};
use jobstore::wire::ResultKind;
use serde_json::{Value, json};
use sqlx::Connection;
use tower::ServiceExt;

/// The server the tests use when `DATABASE_URL` is unset.
pub const DEFAULT_DATABASE_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// The PostgreSQL server to create test databases on.
pub fn admin_url() -> String {
    std::env::var("DATABASE_URL")
        .ok()
        .filter(|u| !u.trim().is_empty())
        .unwrap_or_else(|| DEFAULT_DATABASE_URL.to_owned())
}

/// `url` with its database name replaced by `database` (the query string kept).
pub fn with_database(url: &str, database: &str) -> String {
    let (scheme, rest) = url
        .split_once("://")
        .unwrap_or_else(|| panic!("DATABASE_URL is not a URL: {url:?}"));
    let (before_query, query) = match rest.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (rest, None),
    };
    let authority = before_query.split('/').next().unwrap_or(before_query);
    match query {
        Some(q) => format!("{scheme}://{authority}/{database}?{q}"),
        None => format!("{scheme}://{authority}/{database}"),
    }
}

/// 32 random lowercase hex characters.
pub fn random_hex() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

fn unreachable_message(url: &str, error: &dyn std::fmt::Display) -> String {
    format!(
        "PostgreSQL is not reachable at {} ({error}).\n\
         These tests need a PostgreSQL server on which the user may CREATE DATABASE:\n\
         - set DATABASE_URL=postgres://USER[:PASSWORD]@HOST:PORT/DB to point at one, or\n\
         - start the local server: pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start\n\
         (default when DATABASE_URL is unset: {DEFAULT_DATABASE_URL}).",
        jobstore::store::redact_url(url)
    )
}

/// A connection to `url`, or a panic that says how to provide PostgreSQL.
pub async fn pg_connect(url: &str) -> sqlx::PgConnection {
    match tokio::time::timeout(Duration::from_secs(10), sqlx::PgConnection::connect(url)).await {
        Ok(Ok(conn)) => conn,
        Ok(Err(e)) => panic!("{}", unreachable_message(url, &e)),
        Err(_) => panic!("{}", unreachable_message(url, &"no answer within 10 s")),
    }
}

/// A fresh, empty PostgreSQL database, dropped (`WITH (FORCE)`) when the guard goes.
pub struct PgDatabase {
    pub name: String,
    /// URL of the new database.
    pub url: String,
    admin_url: String,
}

impl PgDatabase {
    pub async fn create() -> PgDatabase {
        let admin_url = admin_url();
        let name = format!("jobstore_test_{}", random_hex());
        let mut admin = pg_connect(&admin_url).await;
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE \"{name}\"")))
            .execute(&mut admin)
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "cannot create the test database {name} on {}: {e}; the user of \
                     DATABASE_URL must be allowed to CREATE DATABASE",
                    jobstore::store::redact_url(&admin_url)
                )
            });
        let _ = admin.close().await;
        PgDatabase {
            url: with_database(&admin_url, &name),
            name,
            admin_url,
        }
    }

    /// A plain connection to this database, for inspecting it with SQL.
    pub async fn connect(&self) -> sqlx::PgConnection {
        pg_connect(&self.url).await
    }
}

impl Drop for PgDatabase {
    fn drop(&mut self) {
        // Drop runs inside the test's runtime, where nothing can block on a future: drop
        // the database from a thread with its own runtime, and wait for it.
        let (admin_url, name) = (self.admin_url.clone(), self.name.clone());
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            runtime.block_on(async move {
                let mut admin = tokio::time::timeout(
                    Duration::from_secs(10),
                    sqlx::PgConnection::connect(&admin_url),
                )
                .await
                .map_err(|_| "timed out connecting".to_owned())?
                .map_err(|e| e.to_string())?;
                sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                    "DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"
                )))
                .execute(&mut admin)
                .await
                .map_err(|e| e.to_string())?;
                let _ = admin.close().await;
                Ok::<(), String>(())
            })
        })
        .join();
        match dropped {
            Ok(Ok(())) => {}
            // A leaked database is harmless (its name says what it was): report, go on.
            Ok(Err(e)) => eprintln!("could not drop test database {}: {e}", self.name),
            Err(_) => eprintln!(
                "could not drop test database {}: thread panicked",
                self.name
            ),
        }
    }
}

/// The two storage backends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Postgres,
    Sqlite,
}

/// What keeps a test store's database alive.
pub enum DatabaseGuard {
    Postgres(PgDatabase),
    Sqlite(tempfile::TempDir),
}

/// A migrated store on a database of its own. Dropping it removes the database.
pub struct TestStore {
    pub backend: Backend,
    pub url: String,
    pub store: Arc<dyn Store>,
    // Declared last: dropped after the store.
    pub guard: DatabaseGuard,
}

/// The store configuration the tests open stores with.
pub fn store_config(url: &str) -> StoreConfig {
    StoreConfig {
        url: url.to_owned(),
        max_connections: 8,
        acquire_timeout: Duration::from_secs(10),
        migrate: true,
    }
}

impl TestStore {
    pub async fn new(backend: Backend) -> TestStore {
        let (url, guard) = match backend {
            Backend::Postgres => {
                let db = PgDatabase::create().await;
                (db.url.clone(), DatabaseGuard::Postgres(db))
            }
            Backend::Sqlite => {
                let dir = tempfile::TempDir::new().expect("a temporary directory");
                let url = format!("sqlite://{}/jobstore.db", dir.path().display());
                (url, DatabaseGuard::Sqlite(dir))
            }
        };
        let store = jobstore::store::open(&store_config(&url))
            .await
            .unwrap_or_else(|e| panic!("opening the {backend:?} store failed: {e:#}"));
        TestStore {
            backend,
            url,
            store,
            guard,
        }
    }

    /// The router over this store, driven in-process.
    pub fn api(&self, config: HttpConfig) -> Api {
        Api::new(self.store.clone(), config)
    }

    /// The router over this store on a real listener.
    pub async fn serve(&self, config: HttpConfig) -> TestServer {
        TestServer::start(self.store.clone(), config).await
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
                // A local of this function, not a closure argument: an `async move` body
                // that captures only some fields leaves the guard here, alive to the end.
                let $ts = $crate::common::TestStore::new($crate::common::Backend::Postgres).await;
                let test = $body;
                test.await;
            }

            $(#[$attr])*
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn sqlite() {
                // A local of this function, not a closure argument: an `async move` body
                // that captures only some fields leaves the guard here, alive to the end.
                let $ts = $crate::common::TestStore::new($crate::common::Backend::Sqlite).await;
                let test = $body;
                test.await;
            }
        }
    };
}

/// An answer of the router.
#[derive(Debug)]
pub struct Resp {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
    /// "METHOD path", for messages.
    pub request: String,
}

/// Words that betray database or SQL text in an error message.
pub const DATABASE_WORDS: [&str; 2] = ["SELECT", "INSERT"];
pub const DATABASE_WORDS_ANY_CASE: [&str; 3] = ["sqlx", "constraint", "database error"];

impl Resp {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body as JSON (panics, showing it, when it is not).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "{}: answer {} is not JSON ({e}): {:?}",
                self.request,
                self.status,
                self.text()
            )
        })
    }

    /// Asserts the status, showing the answer when it differs.
    #[track_caller]
    pub fn expect(&self, status: StatusCode) -> &Self {
        assert_eq!(
            self.status,
            status,
            "{}: expected {status}, got {} {:?}",
            self.request,
            self.status,
            self.text()
        );
        self
    }

    /// Asserts the status and the contract's error body `{"errors": ["<message>"]}` (JSON
    /// content type, one non-empty message, no database text) and returns the message.
    #[track_caller]
    pub fn error(&self, status: StatusCode) -> String {
        self.expect(status);
        let ct = self
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        assert!(
            ct.starts_with("application/json"),
            "{}: error answer with content type {ct:?}",
            self.request
        );
        let body = self.json();
        let errors = body["errors"]
            .as_array()
            .unwrap_or_else(|| panic!("{}: not an error body: {body}", self.request));
        assert_eq!(
            body.as_object().map(|o| o.len()),
            Some(1),
            "{}: {body}",
            self.request
        );
        assert_eq!(errors.len(), 1, "{}: {body}", self.request);
        let message = errors[0]
            .as_str()
            .unwrap_or_else(|| panic!("{}: message not a string: {body}", self.request))
            .to_owned();
        assert!(
            !message.trim().is_empty(),
            "{}: empty message",
            self.request
        );
        assert_no_database_text(&self.request, &message);
        message
    }

    /// Asserts a 4xx error whose message contains each of `words` (case-insensitively).
    #[track_caller]
    pub fn error_naming(&self, status: StatusCode, words: &[&str]) -> String {
        assert!(status.is_client_error(), "{status} is not a 4xx");
        let message = self.error(status);
        for word in words {
            assert!(
                message.to_lowercase().contains(&word.to_lowercase()),
                "{}: message {message:?} does not name {word:?}",
                self.request
            );
        }
        message
    }
}

/// No SQL or database text in a message meant for clients.
#[track_caller]
pub fn assert_no_database_text(context: &str, message: &str) {
    for word in DATABASE_WORDS {
        assert!(
            !message.contains(word),
            "{context}: message carries SQL ({word}): {message:?}"
        );
    }
    let lower = message.to_lowercase();
    for word in DATABASE_WORDS_ANY_CASE {
        assert!(
            !lower.contains(word),
            "{context}: message carries database text ({word}): {message:?}"
        );
    }
}

/// The router driven in-process with `tower::ServiceExt::oneshot`.
#[derive(Clone)]
pub struct Api {
    pub router: axum::Router,
}

impl Api {
    pub fn new(store: Arc<dyn Store>, config: HttpConfig) -> Api {
        Api {
            router: jobstore::http::router(AppState::new(store, config)),
        }
    }

    /// Any request; `content_type` None sends none.
    pub async fn request(
        &self,
        method: Method,
        path: &str,
        content_type: Option<&str>,
        body: impl Into<Body>,
    ) -> Resp {
        let mut builder = Request::builder().method(method.clone()).uri(path);
        if let Some(ct) = content_type {
            builder = builder.header(header::CONTENT_TYPE, ct);
        }
        let request = builder
            .body(body.into())
            .unwrap_or_else(|e| panic!("cannot build {method} {path}: {e}"));
        let response = self
            .router
            .clone()
            .oneshot(request)
            .await
            .unwrap_or_else(|e| match e {});
        let (parts, body) = response.into_parts();
        let body = axum::body::to_bytes(body, usize::MAX)
            .await
            .expect("the answer's body");
        Resp {
            status: parts.status,
            headers: parts.headers,
            body,
            request: format!("{method} {}", shorten(path)),
        }
    }

    pub async fn get(&self, path: &str) -> Resp {
        self.request(Method::GET, path, None, Body::empty()).await
    }

    pub async fn head(&self, path: &str) -> Resp {
        self.request(Method::HEAD, path, None, Body::empty()).await
    }

    pub async fn delete(&self, path: &str) -> Resp {
        self.request(Method::DELETE, path, None, Body::empty())
            .await
    }

    /// POST without a body (mark clean).
    pub async fn post_empty(&self, path: &str) -> Resp {
        self.request(Method::POST, path, None, Body::empty()).await
    }

    pub async fn post_json(&self, path: &str, body: &Value) -> Resp {
        self.request(
            Method::POST,
            path,
            Some("application/json"),
            serde_json::to_vec(body).expect("JSON"),
        )
        .await
    }
}

fn shorten(s: &str) -> String {
    match s.char_indices().nth(160) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_owned(),
    }
}

/// The router served on a real listener on 127.0.0.1 (a free port); stopped on drop.
pub struct TestServer {
    /// `http://127.0.0.1:<port>`
    pub base: String,
    pub client: reqwest::Client,
    task: tokio::task::JoinHandle<()>,
}

impl TestServer {
    pub async fn start(store: Arc<dyn Store>, config: HttpConfig) -> TestServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a listener on 127.0.0.1");
        let addr = listener.local_addr().expect("its address");
        let app = jobstore::http::router(AppState::new(store, config));
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.expect("serving");
        });
        TestServer {
            base: format!("http://{addr}"),
            client: reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                .build()
                .expect("an HTTP client"),
            task,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The two result stores as the HTTP contract names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Job,
    Application,
}

pub const KINDS: [Kind; 2] = [Kind::Job, Kind::Application];

impl Kind {
    /// The store-level kind.
    pub fn store(self) -> ResultKind {
        match self {
            Kind::Job => ResultKind::Job,
            Kind::Application => ResultKind::Application,
        }
    }

    /// An id of this kind's entries, from its hex text.
    pub fn id(self, hex: &str) -> jobstore::wire::ResultId {
        jobstore::wire::ResultId::parse(self.store(), hex).expect("a valid hex id")
    }

    /// The path segment after `/v1/clusters/{cluster}/`.
    pub fn segment(self) -> &'static str {
        match self {
            Kind::Job => "job-results",
            Kind::Application => "application-results",
        }
    }

    /// The field of `result` that holds the id.
    pub fn result_id_field(self) -> &'static str {
        match self {
            Kind::Job => "id",
            Kind::Application => "application-id",
        }
    }

    /// The field of an entry that holds the id.
    pub fn entry_id_field(self) -> &'static str {
        match self {
            Kind::Job => "job-id",
            Kind::Application => "application-id",
        }
    }

    /// The key of the list in a listing.
    pub fn list_field(self) -> &'static str {
        self.segment()
    }

    /// `/v1/clusters/{cluster}/{segment}`
    pub fn base(self, cluster: &str) -> String {
        format!("/v1/clusters/{cluster}/{}", self.segment())
    }

    /// `/v1/clusters/{cluster}/{segment}/{id}`
    pub fn entry(self, cluster: &str, id: &str) -> String {
        format!("{}/{id}", self.base(cluster))
    }

    /// `/v1/clusters/{cluster}/{segment}/{id}/clean`
    pub fn clean(self, cluster: &str, id: &str) -> String {
        format!("{}/{id}/clean", self.base(cluster))
    }

    /// A valid `result` object for `id`, shaped like Flink 2.3 writes it.
    pub fn result(self, id: &str) -> Value {
        match self {
            Kind::Job => json!({
                "id": id,
                "name": "test-job",
                "application-status": "SUCCEEDED",
                "accumulator-results": {},
                "net-runtime": 1234,
                "application-id": id,
                "start-time": 1_796_013_188_511_i64,
                "end-time": 1_796_013_191_017_i64,
            }),
            Kind::Application => json!({
                "application-id": id,
                "application-state": "FINISHED",
                "application-name": "test-application",
                "start-time": 1_796_013_188_480_i64,
                "end-time": 1_796_013_191_017_i64,
            }),
        }
    }

    /// The envelope Flink writes: `{"result": ..., "version": 1}`.
    pub fn body(self, id: &str) -> Value {
        json!({"result": self.result(id), "version": 1})
    }
}

/// Folder of the copies of Flink 2.3.0's files kept with the tests.
pub fn flink_data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/flink-2.3.0")
}

/// Folder of the shared originals (`../shared/flink-reference` beside the repository).
pub fn shared_reference_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/flink-reference")
}

/// The `*.json` files of `dir`, sorted by name, as (file name, parsed JSON, raw bytes).
pub fn json_files(dir: &Path) -> Vec<(String, Value, Vec<u8>)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let raw = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            let json = serde_json::from_slice(&raw)
                .unwrap_or_else(|e| panic!("{} is not JSON: {e}", p.display()));
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, json, raw)
        })
        .collect()
}

/// Flink 2.3.0's files of one store, from `tests/data` (five job results, one application
/// result).
pub fn flink_files(kind: Kind) -> Vec<(String, Value)> {
    let dir = flink_data_dir().join(match kind {
        Kind::Job => "job-result-store",
        Kind::Application => "application-result-store",
    });
    json_files(&dir)
        .into_iter()
        .map(|(name, json, _)| (name, json))
        .collect()
}

/// Flink's `JobResultStoreContractTest`, written once against [`contract::FlinkResultStore`]
/// (Flink's store operations), run on the `Store` trait and through HTTP, on both backends,
/// for job results and application results.
pub mod contract {
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

    /// 1. create twice with the same id -> IllegalStateException
    pub async fn create_twice_fails(s: &impl FlinkResultStore, kind: Kind) {
        let id = random_hex();
        assert_eq!(s.create_dirty(kind, &kind.result(&id)).await, Ok(()));
        assert_eq!(
            s.create_dirty(kind, &kind.result(&id)).await,
            Err(Failure::IllegalState)
        );
    }

    /// 2. create, mark clean, create again -> IllegalStateException
    pub async fn create_after_clean_fails(s: &impl FlinkResultStore, kind: Kind) {
        let id = random_hex();
        assert_eq!(s.create_dirty(kind, &kind.result(&id)).await, Ok(()));
        assert_eq!(s.mark_clean(kind, &id).await, Ok(()));
        assert_eq!(
            s.create_dirty(kind, &kind.result(&id)).await,
            Err(Failure::IllegalState)
        );
    }

    /// 3. create, mark clean, mark clean again -> no error
    pub async fn clean_twice_succeeds(s: &impl FlinkResultStore, kind: Kind) {
        let id = random_hex();
        assert_eq!(s.create_dirty(kind, &kind.result(&id)).await, Ok(()));
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
        let id = random_hex();
        assert_eq!(s.create_dirty(kind, &kind.result(&id)).await, Ok(()));
        assert!(s.has_dirty(kind, &id).await);
        assert!(!s.has_clean(kind, &id).await);
        assert!(s.has_entry(kind, &id).await);
    }

    /// 6. after mark clean: hasDirty=false, hasClean=true, has=true
    pub async fn cleaned_entry_is_clean(s: &impl FlinkResultStore, kind: Kind) {
        let id = random_hex();
        assert_eq!(s.create_dirty(kind, &kind.result(&id)).await, Ok(()));
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
}

/// Instantiates one case of [`contract`] for both backends and both kinds, on the adapter
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

/// Every case of [`contract`], on one adapter.
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
