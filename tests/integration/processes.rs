//! The `jobstore` binary as operators run it: replicas starting together on an empty
//! PostgreSQL database, `jobstore migrate`, a database migrated by a newer jobstore,
//! SIGTERM, and the docker-compose file that deploys it.
//!
//! Every `jobstore serve` is held by the harness's guard ([`Serve`]), which stops it by its
//! pid on drop, also when a test panics.

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitStatus;
use std::time::Duration;

use serde_json::json;

use common::{Backend, Kind, PgDatabase, Serve, TestDb, random_hex, run_jobstore};

/// Runs `jobstore ARGS` to its end (at most 60 s): its status and output.
fn run(args: &[&str]) -> (ExitStatus, String) {
    let run = run_jobstore(args, &[("JOBSTORE_LOG", "info")], Duration::from_secs(60));
    (run.status, run.output())
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

/// refinery's history (either backend): how many rows each version has.
async fn history(url: &str) -> BTreeMap<i64, i64> {
    let sql =
        "SELECT CAST(version AS BIGINT), COUNT(*) FROM refinery_schema_history GROUP BY version";
    common::fetch_all::<(i64, i64)>(url, sql)
        .await
        .into_iter()
        .collect()
}

/// refinery's history on PostgreSQL.
async fn pg_history(db: &PgDatabase) -> BTreeMap<i64, i64> {
    history(&db.url).await
}

/// Whether these tables exist in the PostgreSQL database.
async fn pg_tables_exist(db: &PgDatabase, tables: &[&str]) -> bool {
    for table in tables {
        let sql = format!("SELECT COUNT(to_regclass('{table}'))");
        if common::scalar(&db.url, &sql).await == 0 {
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
    // All four at the same moment, on a database with no schema yet.
    let mut replicas: Vec<Serve> = (0..4)
        .map(|i| Serve::spawn(&format!("replica-{i}"), &db.url, &[], &[]))
        .collect();
    for replica in &mut replicas {
        replica.wait_ready(Duration::from_secs(60)).await;
    }
    // The schema was applied once: one history row per migration, no more.
    assert_eq!(pg_history(&db).await, one_row_per_migration("postgres"));
    assert!(pg_tables_exist(&db, &RESULT_TABLES).await);

    // One shared store: written through one replica, read through another, and the same
    // create sent to all four at once registers one entry.
    let kind = Kind::Job;
    let id = random_hex();
    let r = replicas[0]
        .http
        .post_json(&kind.base("shared"), &kind.body(&id))
        .await;
    assert_eq!(r.status.as_u16(), 201);
    let read = replicas[3]
        .http
        .get(&kind.entry("shared", &id))
        .await
        .json();
    assert_eq!(read["result"], kind.result(&id));
    let raced = random_hex();
    let mut tasks = tokio::task::JoinSet::new();
    for replica in &replicas {
        let (http, path, body) = (replica.http.clone(), kind.base("shared"), kind.body(&raced));
        tasks.spawn(async move { http.post_json(&path, &body).await.status.as_u16() });
    }
    let mut statuses = tasks.join_all().await;
    statuses.sort();
    assert_eq!(statuses, [201, 409, 409, 409]);
    for replica in &mut replicas {
        assert!(replica.is_running(), "{} exited", replica.name);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_creates_the_schema_on_an_empty_postgres_database() {
    let db = PgDatabase::create().await;
    assert!(!pg_tables_exist(&db, &RESULT_TABLES).await);
    for round in ["first", "again"] {
        let (status, output) = run(&["migrate", "--database-url", &db.url]);
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
    let db = TestDb::new(Backend::Sqlite).await;
    let url = &db.url;
    let (status, output) = run(&["migrate", "--database-url", url]);
    assert!(status.success(), "migrate: {status}; output:\n{output}");
    // The write-ahead log was written back into the file and emptied when migrate closed
    // the store (after an upgrade that copies tables it can hold as much as they do).
    let wal = db.sqlite_dir().unwrap().join("jobstore.db-wal");
    let wal_len = std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0);
    assert_eq!(wal_len, 0, "{} after migrate", wal.display());
    for table in RESULT_TABLES {
        let n = common::scalar(
            url,
            &format!(
                "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = '{table}'"
            ),
        )
        .await;
        assert_eq!(n, 1, "table {table}");
    }
    assert_eq!(history(url).await, one_row_per_migration("sqlite"));
}

/// The row a jobstore from the future would have left in refinery's history.
const FUTURE_MIGRATION: &str = "INSERT INTO refinery_schema_history (version, name, applied_on, checksum) \
     VALUES (999, 'from_a_newer_jobstore', '2030-01-01T00:00:00Z', '0')";

/// `serve` and `migrate` on a database migrated by a newer jobstore: both exit non-zero
/// saying the database is newer, and serve never answers.
async fn assert_refused(url: &str) {
    for (command, listen) in [("migrate", None), ("serve", Some("127.0.0.1:0"))] {
        let mut args = vec![command, "--database-url", url];
        args.extend(listen.map(|l| ["--listen", l]).into_iter().flatten());
        let (status, output) = run(&args);
        assert!(
            !status.success(),
            "{command} succeeded on a newer database:\n{output}"
        );
        assert!(
            output.to_lowercase().contains("newer"),
            "{command}'s message:\n{output}"
        );
    }
}

async fn a_database_from_a_newer_jobstore_is_refused(backend: Backend) {
    let db = TestDb::new(backend).await;
    let (status, output) = run(&["migrate", "--database-url", &db.url]);
    assert!(status.success(), "migrate: {output}");
    db.execute(FUTURE_MIGRATION).await.unwrap();
    assert_refused(&db.url).await;
    if let Some(db) = db.pg() {
        // Nothing was changed: the history still has the future row and ours.
        let mut expected = one_row_per_migration("postgres");
        expected.insert(999, 1);
        assert_eq!(pg_history(db).await, expected);
    }
}

per_backend!(
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    a_database_from_a_newer_jobstore_is_refused =>
        a_postgres_database_from_a_newer_jobstore_is_refused,
        a_sqlite_database_from_a_newer_jobstore_is_refused
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_exits_zero_on_sigterm() {
    let db = TestDb::new(Backend::Sqlite).await;
    let mut serve = Serve::start(&db.url, &[]).await;
    let r = serve
        .http
        .post_json(
            &Kind::Application.base("c"),
            &json!({"result": {"application-id": random_hex()}, "version": 1}),
        )
        .await;
    assert_eq!(r.status.as_u16(), 201);
    // SIGTERM to this child, by its pid.
    serve.sigterm();
    let status = serve.wait_exit(Duration::from_secs(30)).await;
    assert!(
        status.success(),
        "exit after SIGTERM: {status}; output:\n{}",
        serve.logs()
    );
}

/// The Dockerfile's last stage (the image compose runs): its instructions, continuation
/// lines joined and comments dropped, as (KEYWORD, arguments).
fn dockerfile_runtime_stage(root: &Path) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(root.join("Dockerfile"))
        .expect("a Dockerfile at the repository root");
    let mut instrs: Vec<(String, String)> = Vec::new();
    let mut buf = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('#') || (trimmed.is_empty() && buf.is_empty()) {
            continue;
        }
        match line.trim_end().strip_suffix('\\') {
            Some(head) => {
                buf.push_str(head);
                buf.push(' ');
            }
            None => {
                buf.push_str(line);
                let (keyword, args) = buf.trim().split_once(' ').unwrap_or((buf.trim(), ""));
                instrs.push((keyword.to_ascii_uppercase(), args.trim().to_owned()));
                buf.clear();
            }
        }
    }
    let last_from = instrs
        .iter()
        .rposition(|(k, _)| k == "FROM")
        .expect("a FROM");
    instrs.split_off(last_from + 1)
}

/// The one `KEYWORD` instruction of a stage.
fn instruction<'a>(stage: &'a [(String, String)], keyword: &str) -> &'a str {
    let found: Vec<&str> = stage
        .iter()
        .filter(|(k, _)| k == keyword)
        .map(|(_, a)| a.as_str())
        .collect();
    assert_eq!(
        found.len(),
        1,
        "the image's last stage has {} {keyword}",
        found.len()
    );
    found[0]
}

/// A compose `command`/`entrypoint`/`test` value, or an exec-form instruction, as words.
fn words(value: &yaml_rust2::Yaml) -> Option<Vec<String>> {
    use yaml_rust2::Yaml;
    match value {
        Yaml::String(s) => Some(s.split_whitespace().map(str::to_owned).collect()),
        Yaml::Array(items) => Some(
            items
                .iter()
                .map(|i| i.as_str().expect("a string").to_owned())
                .collect(),
        ),
        _ => None,
    }
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

    // The image those services run (the Dockerfile's last stage; scripts/docker-check.py
    // builds its build stage and runs its command and health check).
    let stage = dockerfile_runtime_stage(root);
    let exec = |keyword: &str| -> Vec<String> {
        serde_json::from_str(instruction(&stage, keyword))
            .unwrap_or_else(|e| panic!("{keyword} is not in the JSON exec form: {e}"))
    };
    let (image_entrypoint, image_cmd) = (exec("ENTRYPOINT"), exec("CMD"));
    let image_health = instruction(&stage, "HEALTHCHECK").to_owned();
    let image_listen = stage
        .iter()
        .filter(|(k, _)| k == "ENV")
        .find_map(|(_, a)| a.strip_prefix("JOBSTORE_LISTEN="))
        .map(str::to_owned);
    // The routes the binary serves: the generated OpenAPI document (tests/integration/openapi.rs checks
    // the snapshot against it).
    let openapi: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("tests/snapshots/openapi.json"))
            .expect("the OpenAPI snapshot"),
    )
    .expect("the OpenAPI snapshot parses");
    // The variables `jobstore serve` reads.
    let (status, help) = run(&["serve", "--help"]);
    assert!(status.success(), "jobstore serve --help: {status}\n{help}");

    // Every service built from this repository is a jobstore replica, and every jobstore
    // service is built from it.
    let jobstore: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| n.starts_with("jobstore") || !docs[0]["services"][*n]["build"].is_badvalue())
        .collect();
    assert_eq!(
        jobstore,
        ["jobstore-1", "jobstore-2"],
        "the jobstore services"
    );
    for name in jobstore {
        let service = &docs[0]["services"][name];
        // `build: .` or `build: {context: ., dockerfile: Dockerfile}`.
        let build = &service["build"];
        let context = build.as_str().or_else(|| build["context"].as_str());
        assert!(
            matches!(context, Some("." | "./")),
            "{name} is not built from the repository root: {build:?}"
        );
        assert!(
            matches!(build["dockerfile"].as_str(), None | Some("Dockerfile")),
            "{name} is not built from ./Dockerfile: {build:?}"
        );
        assert!(
            service["image"].is_badvalue(),
            "{name} names an image besides its build"
        );

        // What it runs: the image's ENTRYPOINT and CMD unless compose replaces them.
        let entrypoint = words(&service["entrypoint"]).unwrap_or_else(|| image_entrypoint.clone());
        let command = words(&service["command"]).unwrap_or_else(|| image_cmd.clone());
        assert_eq!(entrypoint, ["jobstore"], "{name}: entrypoint");
        assert_eq!(
            command.first().map(String::as_str),
            Some("serve"),
            "{name}: command {command:?}"
        );

        // `environment` as a map or as a list of KEY=VALUE.
        let env = &service["environment"];
        let vars: BTreeMap<String, String> = match env {
            Yaml::Hash(map) => map
                .iter()
                .map(|(k, v)| {
                    let value = v
                        .as_str()
                        .map(str::to_owned)
                        .or_else(|| v.as_i64().map(|i| i.to_string()));
                    (
                        k.as_str().expect("a name").to_owned(),
                        value.unwrap_or_default(),
                    )
                })
                .collect(),
            Yaml::Array(items) => items
                .iter()
                .filter_map(Yaml::as_str)
                .filter_map(|s| s.split_once('='))
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
            _ => BTreeMap::new(),
        };
        for var in vars.keys().filter(|k| k.starts_with("JOBSTORE_")) {
            assert!(
                help.contains(&format!("[env: {var}]")) || help.contains(&format!("[env: {var}=")),
                "{name}: {var} is not a variable `jobstore serve` reads"
            );
        }
        let url = vars
            .get("JOBSTORE_DATABASE_URL")
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

        // The port it listens on is the one published and the one its health check calls.
        let listen = vars
            .get("JOBSTORE_LISTEN")
            .or(image_listen.as_ref())
            .unwrap_or_else(|| {
                panic!("{name}: no JOBSTORE_LISTEN (jobstore listens on 127.0.0.1 by default)")
            });
        let (listen_host, listen_port) = listen.rsplit_once(':').expect("HOST:PORT");
        assert!(
            matches!(listen_host, "0.0.0.0" | "[::]"),
            "{name}: listens on {listen}, unreachable from outside its container"
        );
        let published: Vec<String> = service["ports"]
            .as_vec()
            .unwrap_or_else(|| panic!("{name} publishes no port"))
            .iter()
            .map(|p| {
                let p = p.as_str().expect("ports as \"HOST:CONTAINER\" strings");
                p.rsplit(':')
                    .next()
                    .unwrap()
                    .split('/')
                    .next()
                    .unwrap()
                    .to_owned()
            })
            .collect();
        assert_eq!(
            published,
            [listen_port],
            "{name}: published container ports"
        );

        // The health check: compose's own, or the image's; on that port, at a GET route the
        // binary serves.
        let health = &service["healthcheck"];
        assert!(
            health["disable"].as_bool() != Some(true),
            "{name}: health check disabled"
        );
        let test = match words(&health["test"]) {
            Some(test) => test.join(" "),
            None => image_health.clone(),
        };
        let (_, after) = test.split_once("http://127.0.0.1:").unwrap_or_else(|| {
            panic!("{name}: the health check {test:?} calls no http://127.0.0.1:PORT/")
        });
        let (port, path) = after.split_once('/').expect("a path");
        let path = format!("/{}", path.split_whitespace().next().unwrap());
        assert_eq!(port, listen_port, "{name}: the health check's port");
        assert_eq!(path, "/readyz", "{name}: the health check's endpoint");
        assert!(
            !openapi["paths"][&path]["get"].is_null(),
            "{name}: the health check calls {path}, which jobstore does not serve"
        );
    }
}

/// The rows of one SQLite result table, straight from the database, in key order.
async fn sqlite_result_rows(db: &TestDb, table: &str, id: &str) -> Vec<ResultRow> {
    common::fetch_all(
        &db.url,
        &format!(
            "SELECT cluster_id, {id}, state, result, created_at, cleaned_at FROM {table} \
             ORDER BY cluster_id, {id}"
        ),
    )
    .await
}

type ResultRow = (String, String, String, String, String, Option<String>);

/// A SQLite database of the previous release (schema V12, the result tables WITHOUT ROWID)
/// with dirty and clean entries of both stores, one of them Flink's 36 KB failure-cause,
/// upgraded by opening the store: every row kept byte for byte, the tables are rowid tables
/// now, and the key, the CHECKs, the indexes and the views hold as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_result_tables_become_rowid_tables_keeping_every_entry() {
    let db = TestDb::new(Backend::Sqlite).await;
    db.migrate_to(12).await;
    let without_rowid = "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' \
         AND name IN ('job_results', 'application_results') AND sql LIKE '%WITHOUT ROWID%'";
    assert_eq!(db.scalar(without_rowid).await, 2, "V12's tables");

    let large = common::flink_files(Kind::Job)
        .into_iter()
        .map(|(_, file)| file)
        .max_by_key(|file| file.to_string().len())
        .expect("Flink's files");
    let (small, clean, big) = (random_hex(), random_hex(), random_hex());
    let mut big_result = large["result"].clone();
    big_result["id"] = json!(big);
    assert!(big_result.to_string().len() > 30_000, "the 36 KB result");
    let job = |id: &str| Kind::Job.result(id).to_string();
    let application = |id: &str| Kind::Application.result(id).to_string();
    let (app_dirty, app_clean) = (random_hex(), random_hex());
    db.execute(&format!(
        "INSERT INTO job_results (cluster_id, job_id, state, result) VALUES \
             ('a', '{small}', 'dirty', '{}'), ('b', '{big}', 'dirty', '{}'); \
         INSERT INTO job_results (cluster_id, job_id, state, result, created_at, cleaned_at) \
             VALUES ('a', '{clean}', 'clean', '{}', '2026-01-01T00:00:00.000Z', \
                     '2026-01-01T00:00:01.000Z'); \
         INSERT INTO application_results (cluster_id, application_id, state, result) \
             VALUES ('a', '{app_dirty}', 'dirty', '{}'); \
         INSERT INTO application_results (cluster_id, application_id, state, result, \
                                          cleaned_at) \
             VALUES ('a', '{app_clean}', 'clean', '{}', '2026-01-01T00:00:02.000Z')",
        job(&small),
        big_result.to_string().replace('\'', "''"),
        job(&clean),
        application(&app_dirty),
        application(&app_clean),
    ))
    .await
    .expect("rows of the V12 schema");
    let jobs = sqlite_result_rows(&db, "job_results", "job_id").await;
    let applications = sqlite_result_rows(&db, "application_results", "application_id").await;
    let per_cluster = "SELECT COUNT(*) FROM dirty_results_per_cluster";
    assert_eq!((jobs.len(), applications.len()), (3, 2));
    assert_eq!(
        db.scalar(per_cluster).await,
        3,
        "dirty: jobs of a, b; applications of a"
    );

    let store = jobstore::store::open(&common::store_config(&db.url))
        .await
        .expect("opening upgrades the schema");
    assert_eq!(db.scalar(without_rowid).await, 0, "rowid tables now");
    assert_eq!(
        db.scalar("SELECT COUNT(*) FROM job_results WHERE rowid > 0")
            .await,
        3
    );
    assert_eq!(sqlite_result_rows(&db, "job_results", "job_id").await, jobs);
    assert_eq!(
        sqlite_result_rows(&db, "application_results", "application_id").await,
        applications
    );
    assert_eq!(db.scalar(per_cluster).await, 3);
    for (view, rows) in [
        ("dirty_results", 3),
        ("job_results_readable", 3),
        ("job_names", 3),
    ] {
        let n = db.scalar(&format!("SELECT COUNT(*) FROM {view}")).await;
        assert_eq!(n, rows, "{view}");
    }
    // Each table's key and its two partial indexes.
    for table in ["job_results", "application_results"] {
        let n = db
            .scalar(&format!(
                "SELECT COUNT(*) FROM pragma_index_list('{table}')"
            ))
            .await;
        assert_eq!(n, 3, "{table}'s indexes");
    }
    // The key and the CHECKs hold.
    let duplicate = db
        .execute(&format!(
            "INSERT INTO job_results (cluster_id, job_id, state, result) \
             VALUES ('a', '{small}', 'dirty', '{}')",
            job(&small)
        ))
        .await;
    assert!(duplicate.unwrap_err().contains("UNIQUE"));
    let other = random_hex();
    let wrong_id = db
        .execute(&format!(
            "INSERT INTO job_results (cluster_id, job_id, state, result) \
             VALUES ('a', '{other}', 'dirty', '{}')",
            job(&small)
        ))
        .await;
    assert!(wrong_id.unwrap_err().contains("CHECK"));

    // The store goes on from the kept rows: a duplicate create conflicts, a mark-clean
    // works, and the listing has them all.
    let cluster: jobstore::ids::ClusterId = "a".parse().unwrap();
    let conflict = store
        .create_result(&cluster, Kind::Job.id(&small), &Kind::Job.result(&small))
        .await;
    assert!(
        matches!(conflict, Err(jobstore::store::StoreError::Conflict)),
        "{conflict:?}"
    );
    store
        .mark_result_clean(&cluster, Kind::Job.id(&small))
        .await
        .expect("mark-clean of a kept dirty entry");
    let entries = db.entries(Kind::Job.store(), "a").await;
    assert_eq!(entries.len(), 2);
    assert!(entries.values().all(|e| e.cleaned_at.is_some()));
    let big_entry = db.entries(Kind::Job.store(), "b").await;
    assert_eq!(big_entry[&big].result, big_result);
}
