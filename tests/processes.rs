//! The `jobstore` binary as operators run it: replicas starting together on an empty
//! PostgreSQL database, `jobstore migrate`, a database migrated by a newer jobstore,
//! SIGTERM, and the docker-compose file that deploys it.
//!
//! Every child process is held by a [`Child`] guard that kills and reaps it on drop, also
//! when a test panics.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sqlx::Connection;

use common::{Kind, PgDatabase, random_hex};

const BIN: &str = env!("CARGO_BIN_EXE_jobstore");

/// A running `jobstore` process; killed and reaped on drop.
struct Child {
    name: String,
    child: std::process::Child,
    log: PathBuf,
}

impl Child {
    /// Starts `jobstore ARGS`, output to a log file in `dir`, with no `JOBSTORE_*` variable
    /// of the environment leaking in.
    fn start(dir: &Path, name: &str, args: &[&str]) -> Child {
        let log = dir.join(format!("{name}.log"));
        let out = std::fs::File::create(&log).expect("a log file");
        let mut command = Command::new(BIN);
        command
            .args(args)
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("a log file"))
            .stderr(out);
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("JOBSTORE_") {
                command.env_remove(key);
            }
        }
        command.env("JOBSTORE_LOG", "info");
        let child = command
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {BIN}: {e}"));
        Child {
            name: name.to_owned(),
            child,
            log,
        }
    }

    fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The exit status, waiting at most `limit`.
    async fn wait(&mut self, limit: Duration) -> ExitStatus {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(
                start.elapsed() < limit,
                "{} still running after {limit:?}; output:\n{}",
                self.name,
                self.output()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Polls `GET /readyz` until it answers 200, failing if the process exits first.
    async fn wait_ready(&mut self, base: &str, limit: Duration) {
        let client = reqwest::Client::new();
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                panic!(
                    "{} exited ({status}) before it was ready; output:\n{}",
                    self.name,
                    self.output()
                );
            }
            if let Ok(r) = client
                .get(format!("{base}/readyz"))
                .timeout(Duration::from_secs(2))
                .send()
                .await
                && r.status() == reqwest::StatusCode::OK
            {
                return;
            }
            assert!(
                start.elapsed() < limit,
                "{} not ready after {limit:?}; output:\n{}",
                self.name,
                self.output()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        // Kill the one process this guard started, by its handle, and reap it.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `n` distinct free ports on 127.0.0.1 (held together while choosing, so none repeats).
fn free_ports(n: usize) -> Vec<u16> {
    let listeners: Vec<std::net::TcpListener> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("a free port"))
        .collect();
    listeners
        .iter()
        .map(|l| l.local_addr().unwrap().port())
        .collect()
}

/// Runs `jobstore ARGS` to its end (at most 60 s): its status and output.
async fn run(dir: &Path, name: &str, args: &[&str]) -> (ExitStatus, String) {
    let mut child = Child::start(dir, name, args);
    let status = child.wait(Duration::from_secs(60)).await;
    (status, child.output())
}

/// The versions of this source tree's migrations (`V{n}__*.sql`) for one backend.
fn migration_versions(backend: &str) -> Vec<i64> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("migrations")
        .join(backend);
    let mut versions: Vec<i64> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            let rest = name.strip_prefix('V')?;
            let (n, _) = rest.split_once("__")?;
            n.parse().ok()
        })
        .collect();
    versions.sort();
    assert!(!versions.is_empty(), "no migrations in {}", dir.display());
    versions
}

/// refinery's history on PostgreSQL: how many rows each version has.
async fn pg_history(db: &PgDatabase) -> BTreeMap<i64, i64> {
    let mut conn = db.connect().await;
    let rows: Vec<(i64, i64)> = sqlx::query_as(
        "SELECT CAST(version AS BIGINT), COUNT(*) FROM refinery_schema_history GROUP BY version",
    )
    .fetch_all(&mut conn)
    .await
    .expect("refinery_schema_history");
    rows.into_iter().collect()
}

/// Whether these tables exist in the PostgreSQL database.
async fn pg_tables_exist(db: &PgDatabase, tables: &[&str]) -> bool {
    let mut conn = db.connect().await;
    for table in tables {
        let found: Option<String> = sqlx::query_scalar("SELECT CAST(to_regclass($1) AS TEXT)")
            .bind(*table)
            .fetch_one(&mut conn)
            .await
            .expect("to_regclass");
        if found.is_none() {
            return false;
        }
    }
    true
}

fn one_row_per_migration(backend: &str) -> BTreeMap<i64, i64> {
    migration_versions(backend)
        .into_iter()
        .map(|v| (v, 1))
        .collect()
}

const RESULT_TABLES: [&str; 2] = ["job_results", "application_results"];

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn four_replicas_start_together_on_an_empty_database() {
    let db = PgDatabase::create().await;
    let dir = tempfile::TempDir::new().unwrap();
    let ports = free_ports(4);
    let bases: Vec<String> = ports
        .iter()
        .map(|p| format!("http://127.0.0.1:{p}"))
        .collect();
    // All four at the same moment, on a database with no schema yet.
    let mut replicas: Vec<Child> = ports
        .iter()
        .enumerate()
        .map(|(i, port)| {
            let listen = format!("127.0.0.1:{port}");
            Child::start(
                dir.path(),
                &format!("replica-{i}"),
                &["serve", "--database-url", &db.url, "--listen", &listen],
            )
        })
        .collect();
    for (replica, base) in replicas.iter_mut().zip(&bases) {
        replica.wait_ready(base, Duration::from_secs(60)).await;
    }
    // The schema was applied once: one history row per migration, no more.
    assert_eq!(pg_history(&db).await, one_row_per_migration("postgres"));
    assert!(pg_tables_exist(&db, &RESULT_TABLES).await);

    // One shared store: written through one replica, read through another, and the same
    // create sent to all four at once registers one entry.
    let client = reqwest::Client::new();
    let kind = Kind::Job;
    let id = random_hex();
    let r = client
        .post(format!("{}{}", bases[0], kind.base("shared")))
        .json(&kind.body(&id))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201);
    let read: Value = client
        .get(format!("{}{}", bases[3], kind.entry("shared", &id)))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(read["result"], kind.result(&id));
    let raced = random_hex();
    let mut tasks = tokio::task::JoinSet::new();
    for base in &bases {
        let request = client
            .post(format!("{base}{}", kind.base("shared")))
            .json(&kind.body(&raced));
        tasks.spawn(async move { request.send().await.unwrap().status().as_u16() });
    }
    let mut statuses = tasks.join_all().await;
    statuses.sort();
    assert_eq!(statuses, [201, 409, 409, 409]);
    for replica in &mut replicas {
        assert!(
            replica.child.try_wait().unwrap().is_none(),
            "{} exited",
            replica.name
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_creates_the_schema_on_an_empty_postgres_database() {
    let db = PgDatabase::create().await;
    let dir = tempfile::TempDir::new().unwrap();
    assert!(!pg_tables_exist(&db, &RESULT_TABLES).await);
    for round in ["first", "again"] {
        let (status, output) = run(
            dir.path(),
            &format!("migrate-{round}"),
            &["migrate", "--database-url", &db.url],
        )
        .await;
        assert!(
            status.success(),
            "migrate ({round}): {status}; output:\n{output}"
        );
        assert!(pg_tables_exist(&db, &RESULT_TABLES).await);
        assert_eq!(
            pg_history(&db).await,
            one_row_per_migration("postgres"),
            "{round}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_creates_the_schema_in_a_new_sqlite_file() {
    let dir = tempfile::TempDir::new().unwrap();
    let url = format!("sqlite://{}/jobstore.db", dir.path().display());
    let (status, output) = run(dir.path(), "migrate", &["migrate", "--database-url", &url]).await;
    assert!(status.success(), "migrate: {status}; output:\n{output}");
    let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
    for table in RESULT_TABLES {
        let n: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?1",
        )
        .bind(table)
        .fetch_one(&mut conn)
        .await
        .unwrap();
        assert_eq!(n, 1, "table {table}");
    }
    let rows: Vec<(i64, i64)> =
        sqlx::query_as("SELECT version, COUNT(*) FROM refinery_schema_history GROUP BY version")
            .fetch_all(&mut conn)
            .await
            .unwrap();
    assert_eq!(
        rows.into_iter().collect::<BTreeMap<_, _>>(),
        one_row_per_migration("sqlite")
    );
}

/// The row a jobstore from the future would have left in refinery's history.
const FUTURE_MIGRATION: &str = "INSERT INTO refinery_schema_history (version, name, applied_on, checksum) \
     VALUES (999, 'from_a_newer_jobstore', '2030-01-01T00:00:00Z', '0')";

/// `serve` and `migrate` on a database migrated by a newer jobstore: both exit non-zero
/// saying the database is newer, and serve never answers.
async fn assert_refused(dir: &Path, url: &str) {
    let (status, output) = run(dir, "migrate-newer", &["migrate", "--database-url", url]).await;
    assert!(
        !status.success(),
        "migrate succeeded on a newer database:\n{output}"
    );
    assert!(
        output.to_lowercase().contains("newer"),
        "migrate's message:\n{output}"
    );
    let port = free_ports(1)[0];
    let listen = format!("127.0.0.1:{port}");
    let mut serve = Child::start(
        dir,
        "serve-newer",
        &["serve", "--database-url", url, "--listen", &listen],
    );
    let status = serve.wait(Duration::from_secs(60)).await;
    let output = serve.output();
    assert!(
        !status.success(),
        "serve succeeded on a newer database:\n{output}"
    );
    assert!(
        output.to_lowercase().contains("newer"),
        "serve's message:\n{output}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_database_from_a_newer_jobstore_is_refused() {
    let db = PgDatabase::create().await;
    let dir = tempfile::TempDir::new().unwrap();
    let (status, output) = run(
        dir.path(),
        "migrate",
        &["migrate", "--database-url", &db.url],
    )
    .await;
    assert!(status.success(), "migrate: {output}");
    let mut conn = db.connect().await;
    sqlx::query(FUTURE_MIGRATION)
        .execute(&mut conn)
        .await
        .unwrap();
    conn.close().await.unwrap();
    assert_refused(dir.path(), &db.url).await;
    // Nothing was changed: the history still has the future row and ours.
    let mut expected = one_row_per_migration("postgres");
    expected.insert(999, 1);
    assert_eq!(pg_history(&db).await, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sqlite_database_from_a_newer_jobstore_is_refused() {
    let dir = tempfile::TempDir::new().unwrap();
    let url = format!("sqlite://{}/jobstore.db", dir.path().display());
    let (status, output) = run(dir.path(), "migrate", &["migrate", "--database-url", &url]).await;
    assert!(status.success(), "migrate: {output}");
    let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
    sqlx::query(FUTURE_MIGRATION)
        .execute(&mut conn)
        .await
        .unwrap();
    conn.close().await.unwrap();
    assert_refused(dir.path(), &url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_exits_zero_on_sigterm() {
    let dir = tempfile::TempDir::new().unwrap();
    let url = format!("sqlite://{}/jobstore.db", dir.path().display());
    let port = free_ports(1)[0];
    let base = format!("http://127.0.0.1:{port}");
    let listen = format!("127.0.0.1:{port}");
    let mut serve = Child::start(
        dir.path(),
        "serve",
        &["serve", "--database-url", &url, "--listen", &listen],
    );
    serve.wait_ready(&base, Duration::from_secs(60)).await;
    let r = reqwest::Client::new()
        .post(format!("{base}{}", Kind::Application.base("c")))
        .json(&json!({"result": {"application-id": random_hex()}, "version": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201);
    // SIGTERM to this child, by its pid.
    let pid = serve.child.id().to_string();
    let sent = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(sent.success());
    let status = serve.wait(Duration::from_secs(30)).await;
    assert!(
        status.success(),
        "exit after SIGTERM: {status}; output:\n{}",
        serve.output()
    );
}

#[test]
fn docker_compose_runs_postgres_and_two_replicas_built_here() {
    use yaml_rust2::{Yaml, YamlLoader};
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text =
        std::fs::read_to_string(root.join("docker-compose.yml")).expect("docker-compose.yml");
    let docs = YamlLoader::load_from_str(&text).expect("docker-compose.yml parses as YAML");
    assert_eq!(docs.len(), 1);
    let services = docs[0]["services"].as_hash().expect("a services map");
    let names: Vec<&str> = services.keys().filter_map(Yaml::as_str).collect();
    for name in ["postgres", "jobstore-1", "jobstore-2"] {
        assert!(names.contains(&name), "no service {name}: {names:?}");
    }
    assert!(
        root.join("Dockerfile").is_file(),
        "no Dockerfile at the repository root"
    );
    for name in ["jobstore-1", "jobstore-2"] {
        let service = &docs[0]["services"][name];
        // `build: .` or `build: {context: .}`.
        let build = &service["build"];
        let context = build.as_str().or_else(|| build["context"].as_str());
        assert!(
            matches!(context, Some("." | "./")),
            "{name} is not built from the repository root: {build:?}"
        );
        // `environment` as a map or as a list of KEY=VALUE.
        let env = &service["environment"];
        let url = match env {
            Yaml::Hash(_) => env["JOBSTORE_DATABASE_URL"].as_str().map(str::to_owned),
            Yaml::Array(items) => items
                .iter()
                .filter_map(Yaml::as_str)
                .find_map(|s| s.strip_prefix("JOBSTORE_DATABASE_URL="))
                .map(str::to_owned),
            _ => None,
        }
        .unwrap_or_else(|| panic!("{name} sets no JOBSTORE_DATABASE_URL: {env:?}"));
        let (scheme, rest) = url.split_once("://").expect("a URL");
        assert!(matches!(scheme, "postgres" | "postgresql"), "{name}: {url}");
        let authority = rest.split('/').next().unwrap();
        let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        let host = host_port.split(':').next().unwrap();
        assert_eq!(
            host, "postgres",
            "{name} does not use the postgres service: {url}"
        );
    }
}
