//! Store-level invariants under races, and the plans the store's statements get, on both
//! backends: N concurrent claims of one open operation give it to exactly one claimer, and
//! the dirty listing reads the partial index `job_results_dirty` (never the whole table).

use crate::common;

use std::time::Duration;

use common::{Backend, TestStore, at_once, operation_key, random_hex};
use jobstore::ids::ClusterId;
use jobstore::store::{ClusterConfig, ConfiguredBy, NewOperation, OperationKind, Owner, migrate};
use sqlx::Connection;

const CLAIMERS: usize = 16;

async fn concurrent_claims_of_one_operation_give_it_to_one(backend: Backend) {
    let ts = TestStore::new(backend).await;
    let cluster = "race".parse::<ClusterId>().unwrap();
    ts.store
        .put_cluster(
            &ClusterConfig {
                cluster_id: cluster.clone(),
                flink_rest_url: Some("http://127.0.0.1:9".parse().unwrap()),
                savepoint_directory: None,
            },
            ConfiguredBy::Api,
        )
        .await
        .unwrap();
    let key = operation_key("race", &random_hex(), &random_hex());
    ts.store
        .create_operation(&NewOperation {
            target_directory: Some("file:///tmp/sp".into()),
            format_type: jobstore::store::FormatType::Canonical,
            ..NewOperation::new(key.clone(), OperationKind::Savepoint)
        })
        .await
        .unwrap();

    // Every claimer waits at one barrier, then claims at once.
    let claims = at_once(CLAIMERS, |i| {
        let store = ts.store.clone();
        async move {
            store
                .claim_operation(
                    &Owner::from(format!("claimer-{i}")),
                    Duration::from_secs(60),
                )
                .await
        }
    })
    .await;
    let mut winners = Vec::new();
    for (i, claim) in claims.into_iter().enumerate() {
        match claim {
            Ok(Some(claimed)) => winners.push((i, claimed)),
            Ok(None) => {}
            Err(e) => panic!("{backend:?}: claim {i} failed: {e}"),
        }
    }
    assert_eq!(
        winners.len(),
        1,
        "{backend:?}: {CLAIMERS} concurrent claims of one open operation: exactly one wins, got {}",
        winners.len()
    );
    let (i, claimed) = &winners[0];
    assert_eq!(
        (claimed.operation.job_id, claimed.operation.request_id),
        (key.job, key.request)
    );
    assert_eq!(
        claimed.operation.attempt, 1,
        "{backend:?}: the first claim is attempt 1"
    );
    assert_eq!(
        claimed.operation.lease_owner.as_deref(),
        Some(format!("claimer-{i}").as_str()),
        "{backend:?}: the stored lease names the winner"
    );
    // Held under a live lease: nobody else gets it.
    assert!(
        ts.store
            .claim_operation(&Owner::from("late"), Duration::from_secs(60))
            .await
            .unwrap()
            .is_none(),
        "{backend:?}: a held operation is not claimed again"
    );
}

per_backend!(
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    concurrent_claims_of_one_operation_give_it_to_one =>
        concurrent_claims_postgres,
        concurrent_claims_sqlite
);

/// Rows loaded in SQL: `clean` clean entries and `dirty` dirty ones in one cluster.
const CLEAN: i64 = 50_000;
const DIRTY: i64 = 20;

/// Loads [`CLEAN`] clean and [`DIRTY`] dirty job results into the cluster `big`, with the
/// statement `insert(state, count)` of the store's backend.
async fn fill(ts: &TestStore, insert: impl Fn(&str, i64) -> String) {
    for (state, n) in [("clean", CLEAN), ("dirty", DIRTY)] {
        ts.db.execute(&insert(state, n)).await.unwrap();
    }
}

fn listing(backend: migrate::Backend) -> String {
    // The statement the dirty listing of job results runs (`sql/*/job_results_list_dirty.sql`).
    let sql = jobstore::store::sql::JOB_RESULTS_LIST_DIRTY;
    match backend {
        migrate::Backend::Postgres => sql.postgres,
        migrate::Backend::Sqlite => sql.sqlite,
    }
    .to_owned()
}

/// [`fill`] on PostgreSQL, then ANALYZE: a connection to the filled database.
async fn fill_postgres(ts: &TestStore) -> sqlx::PgConnection {
    fill(ts, |state, n| {
        format!(
            "INSERT INTO job_results (cluster_id, job_id, state, result, created_at, cleaned_at) \
             SELECT 'big', md5('{state}' || i::text), '{state}', \
                    json_build_object('id', md5('{state}' || i::text)), \
                    now(), CASE WHEN '{state}' = 'clean' THEN now() END \
             FROM generate_series(1, {n}) AS i"
        )
    })
    .await;
    let mut conn = sqlx::PgConnection::connect(&ts.url).await.unwrap();
    sqlx::query("ANALYZE job_results")
        .execute(&mut conn)
        .await
        .unwrap();
    conn
}

#[tokio::test]
async fn dirty_listing_uses_the_partial_index_postgres() {
    let ts = TestStore::new(Backend::Postgres).await;
    let mut conn = fill_postgres(&ts).await;
    let sql = listing(migrate::Backend::Postgres);
    // The plan of the statement as the store prepares it, with its parameters, both as a
    // custom plan and as the generic plan PostgreSQL switches to for a prepared statement.
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "PREPARE listing(text, text, bigint) AS {sql}"
    )))
    .execute(&mut conn)
    .await
    .unwrap();
    for mode in ["force_custom_plan", "force_generic_plan"] {
        sqlx::query(sqlx::AssertSqlSafe(format!("SET plan_cache_mode = {mode}")))
            .execute(&mut conn)
            .await
            .unwrap();
        let plan: Vec<String> = sqlx::query_scalar("EXPLAIN EXECUTE listing('big', '', 1001)")
            .fetch_all(&mut conn)
            .await
            .unwrap();
        let plan = plan.join("\n");
        assert!(
            plan.contains("job_results_dirty"),
            "{mode}: the dirty listing does not use the partial index:\n{plan}"
        );
        assert!(
            !plan.contains("Seq Scan"),
            "{mode}: the dirty listing scans the table:\n{plan}"
        );
    }
}

#[tokio::test]
async fn dirty_listing_uses_the_partial_index_sqlite() {
    let ts = TestStore::new(Backend::Sqlite).await;
    fill(&ts, |state, n| {
        format!(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {n}) \
             INSERT INTO job_results (cluster_id, job_id, state, result, created_at, cleaned_at) \
             SELECT 'big', printf('%s%031x', substr('{state}', 1, 1), i), '{state}', \
                    json_object('id', printf('%s%031x', substr('{state}', 1, 1), i)), \
                    strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), \
                    CASE WHEN '{state}' = 'clean' THEN strftime('%Y-%m-%dT%H:%M:%fZ', 'now') END \
             FROM n"
        )
    })
    .await;
    let mut conn = sqlx::SqliteConnection::connect(&ts.url).await.unwrap();
    sqlx::query("ANALYZE").execute(&mut conn).await.unwrap();
    let sql = listing(migrate::Backend::Sqlite);
    let rows: Vec<(i64, i64, i64, String)> =
        sqlx::query_as(sqlx::AssertSqlSafe(format!("EXPLAIN QUERY PLAN {sql}")))
            .bind("big")
            .bind("")
            .bind(1001i64)
            .fetch_all(&mut conn)
            .await
            .unwrap();
    let plan: Vec<String> = rows.into_iter().map(|r| r.3).collect();
    let plan = plan.join("\n");
    assert!(
        plan.contains("job_results_dirty"),
        "the dirty listing does not use the partial index:\n{plan}"
    );
    assert!(
        !plan.lines().any(|l| l.starts_with("SCAN job_results")),
        "the dirty listing scans the table:\n{plan}"
    );
}

/// The group commit's batch (`results_batch.sql`, in a transaction begun as the group commit
/// begins it, `BEGIN_INDEX_LOOKUPS_ONLY`) finds the rows it marks clean by an index probe per
/// row, with the generic plan PostgreSQL keeps for the connection, whether that plan was made
/// on a new, empty table (before any ANALYZE) or on one of 50,000 entries, analyzed: never a
/// scan of every dirty entry.
#[tokio::test]
async fn batch_mark_cleans_probe_the_index_whatever_the_table_postgres() {
    let ts = TestStore::new(Backend::Postgres).await;
    let sql = jobstore::store::sql::RESULTS_BATCH.postgres;
    let plan = || async {
        // A new session, so a new prepared statement and a new generic plan.
        let mut conn = sqlx::PgConnection::connect(&ts.url).await.unwrap();
        let mut tx = conn
            .begin_with(jobstore::store::BEGIN_INDEX_LOOKUPS_ONLY)
            .await
            .unwrap();
        sqlx::query(sqlx::AssertSqlSafe(format!("PREPARE batch AS {sql}")))
            .execute(&mut *tx)
            .await
            .unwrap();
        let plan: Vec<String> = sqlx::query_scalar(
            "EXPLAIN EXECUTE batch('{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', \
             '{c}', '{0000000000000000000000000000000a}', '{c}', '{0000000000000000000000000000000b}')",
        )
        .fetch_all(&mut *tx)
        .await
        .unwrap();
        plan.join("\n")
    };
    let check = |plan: &str, table: &str| {
        for scan in ["Seq Scan", "Bitmap", "Hash Join", "Merge Join"] {
            assert!(
                !plan.contains(scan),
                "{table}: the batch's plan has a {scan}:\n{plan}"
            );
        }
        for kind in ["job", "application"] {
            assert!(
                plan.contains(&format!(
                    "Index Cond: ((cluster_id = t_{n}.c) AND ({kind}_id = t_{n}.i))",
                    n = if kind == "job" { 2 } else { 3 }
                )),
                "{table}: the batch's {kind} mark-cleans do not probe the index by key:\n{plan}"
            );
        }
    };
    check(&plan().await, "a new, empty table");
    fill_postgres(&ts).await;
    check(&plan().await, "a table of many entries");
}
