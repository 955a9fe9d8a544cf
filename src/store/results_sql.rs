//! The result-store statements, written once for both backends. Each transition is one
//! statement: uniqueness comes from the primary key (a duplicate insert fails with a unique
//! violation), and mark-clean is an update conditional on the dirty state.

use crate::wire::ResultKind;

use super::result_table;

/// SQL dialect differences between the two backends.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Dialect {
    /// The current time as the column type stores it.
    pub now: &'static str,
    /// Positional parameter n (1-based): `$n` on PostgreSQL, `?n` on SQLite.
    pub param: fn(usize) -> String,
    /// The current time plus (`+`) or minus (`-`) a number of milliseconds given as a
    /// parameter.
    pub now_offset_ms: fn(char, &str) -> String,
    /// Row locking for a claim (PostgreSQL skips rows another claim holds; SQLite has one
    /// writer and needs none).
    pub claim_lock: &'static str,
    /// What follows the table name in the dirty listing, given the partial index's name.
    /// SQLite's planner (3.51, without ANALYZE statistics) prefers the covering primary key
    /// and then walks every clean entry of the cluster (300 ms at 1,000,000 clean entries,
    /// BENCHMARKS.md): it is told to use the partial index of dirty entries.
    pub dirty_index_hint: fn(&str) -> String,
}

pub(crate) const POSTGRES: Dialect = Dialect {
    now: "now()",
    param: |n| format!("${n}"),
    now_offset_ms: |sign, p| {
        format!("(now() {sign} make_interval(secs => CAST({p} AS double precision) / 1000.0))")
    },
    claim_lock: " FOR UPDATE OF s SKIP LOCKED",
    dirty_index_hint: |_| String::new(),
};

pub(crate) const SQLITE: Dialect = Dialect {
    now: "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')",
    param: |n| format!("?{n}"),
    now_offset_ms: |sign, p| {
        format!(
            "strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '{sign}' || (CAST({p} AS REAL) / 1000.0) || ' seconds')"
        )
    },
    claim_lock: "",
    dirty_index_hint: |index| format!(" INDEXED BY {index}"),
};

/// The statements of one result kind, built once at start from constant names.
#[derive(Debug, Clone)]
pub(crate) struct ResultSql {
    pub insert: String,
    pub select: String,
    pub mark_clean: String,
    pub delete: String,
    pub list_all: String,
    pub list_dirty: String,
    pub list_clean: String,
    pub purge_clean: String,
    pub count: String,
}

impl ResultSql {
    pub fn new(kind: ResultKind, d: Dialect) -> Self {
        let (table, id) = result_table(kind);
        let p = d.param;
        let (p1, p2, p3) = (p(1), p(2), p(3));
        let cols = format!("cluster_id, {id} AS id, state, result, created_at, cleaned_at");
        let key = format!("cluster_id = {p1} AND {id} = {p2}");
        // A literal state in the listing lets the planner use the partial index of dirty
        // entries; the cursor is the last id of the previous page ('' before the first).
        let list = |state: &str, hint: &str| {
            format!(
                "SELECT {cols} FROM {table}{hint} WHERE cluster_id = {p1}{state} AND {id} > {p2} \
                 ORDER BY {id} LIMIT {p3}"
            )
        };
        ResultSql {
            insert: format!(
                "INSERT INTO {table} (cluster_id, {id}, state, result, cleaned_at) \
                 VALUES ({p1}, {p2}, {p4}, {p3}, CASE WHEN {p4} = 'clean' THEN {now} END) \
                 RETURNING {cols}",
                p4 = p(4),
                now = d.now
            ),
            select: format!("SELECT {cols} FROM {table} WHERE {key}"),
            mark_clean: format!(
                "UPDATE {table} SET state = 'clean', cleaned_at = {now} \
                 WHERE {key} AND state = 'dirty' RETURNING {cols}",
                now = d.now
            ),
            delete: format!("DELETE FROM {table} WHERE {key}"),
            list_all: list("", ""),
            list_dirty: list(
                " AND state = 'dirty'",
                &(d.dirty_index_hint)(&format!("{table}_dirty")),
            ),
            list_clean: list(" AND state = 'clean'", ""),
            count: format!(
                "SELECT cluster_id, state, COUNT(*), MIN(created_at) FROM {table} \
                 GROUP BY cluster_id, state"
            ),
            purge_clean: format!(
                "DELETE FROM {table} WHERE state = 'clean' AND cleaned_at < {}",
                (d.now_offset_ms)('-', &p1)
            ),
        }
    }

    pub fn list(&self, filter: super::StateFilter) -> &str {
        use super::{ResultState, StateFilter};
        match filter {
            StateFilter::All => &self.list_all,
            StateFilter::Only(ResultState::Dirty) => &self.list_dirty,
            StateFilter::Only(ResultState::Clean) => &self.list_clean,
        }
    }
}

/// Both result kinds' statements for one dialect.
#[derive(Debug, Clone)]
pub(crate) struct AllResultSql {
    job: ResultSql,
    application: ResultSql,
}

impl AllResultSql {
    pub fn new(d: Dialect) -> Self {
        AllResultSql {
            job: ResultSql::new(ResultKind::Job, d),
            application: ResultSql::new(ResultKind::Application, d),
        }
    }

    pub fn get(&self, kind: ResultKind) -> &ResultSql {
        match kind {
            ResultKind::Job => &self.job,
            ResultKind::Application => &self.application,
        }
    }
}

/// The result-store methods, the same for both backends, as inherent `*_impl` methods of a
/// store with fields `write` and `read` (pools) and `sql` (an [`AllResultSql`]).
macro_rules! result_store_methods {
    () => {
        async fn create_result_impl(
            &self,
            kind: $crate::wire::ResultKind,
            cluster: &$crate::ids::ClusterId,
            id: $crate::ids::HexId,
            result: &serde_json::Value,
            state: $crate::store::ResultState,
        ) -> $crate::store::StoreResult<$crate::store::ResultEntry> {
            // The INSERT ... RETURNING with its parameters, run on the pool or in a
            // transaction below.
            let id = id.to_string();
            let insert = || {
                sqlx::query(sqlx::AssertSqlSafe(self.sql.get(kind).insert.as_str()))
                    .bind(cluster.as_str())
                    .bind(id.as_str())
                    .bind(sqlx::types::Json(result))
                    .bind(state.as_str())
            };
            if !$crate::store::has_float(result) {
                // Integers, strings, booleans and nulls come back from either database
                // exactly as sent: one autocommitted statement (BENCHMARKS.md).
                let row = insert().fetch_one(&self.write).await?;
                return Ok($crate::store::entry_from_row(&row)?);
            }
            // A result with a floating-point number is read back before it is committed:
            // a result the database keeps in a form that cannot be read again
            // (PostgreSQL's jsonb prints a number near f64::MAX in full, which serde_json
            // refuses) is refused, not stored where every later read of it, and every
            // listing of its cluster, would fail.
            let mut tx = self.write.begin().await?;
            let row = insert().fetch_one(&mut *tx).await?;
            let entry = $crate::store::entry_from_row(&row)
                .map_err($crate::store::StoreError::Unstorable)?;
            tx.commit().await?;
            Ok(entry)
        }

        async fn get_result_impl(
            &self,
            kind: $crate::wire::ResultKind,
            cluster: &$crate::ids::ClusterId,
            id: $crate::ids::HexId,
        ) -> $crate::store::StoreResult<Option<$crate::store::ResultEntry>> {
            let row = sqlx::query(sqlx::AssertSqlSafe(self.sql.get(kind).select.as_str()))
                .bind(cluster.as_str())
                .bind(id.to_string())
                .fetch_optional(&self.read)
                .await?;
            Ok(row
                .as_ref()
                .map($crate::store::entry_from_row)
                .transpose()?)
        }

        async fn mark_result_clean_impl(
            &self,
            kind: $crate::wire::ResultKind,
            cluster: &$crate::ids::ClusterId,
            id: $crate::ids::HexId,
        ) -> $crate::store::StoreResult<$crate::store::ResultEntry> {
            let row = sqlx::query(sqlx::AssertSqlSafe(self.sql.get(kind).mark_clean.as_str()))
                .bind(cluster.as_str())
                .bind(id.to_string())
                .fetch_optional(&self.write)
                .await?;
            if let Some(row) = row {
                return Ok($crate::store::entry_from_row(&row)?);
            }
            // Not dirty: already clean (answered as it is, same cleaned-at) or absent. A
            // new statement sees every committed clean, also a concurrent one.
            let row = sqlx::query(sqlx::AssertSqlSafe(self.sql.get(kind).select.as_str()))
                .bind(cluster.as_str())
                .bind(id.to_string())
                .fetch_optional(&self.write)
                .await?;
            match row {
                Some(row) => Ok($crate::store::entry_from_row(&row)?),
                None => Err($crate::store::StoreError::NotFound),
            }
        }

        async fn delete_result_impl(
            &self,
            kind: $crate::wire::ResultKind,
            cluster: &$crate::ids::ClusterId,
            id: $crate::ids::HexId,
        ) -> $crate::store::StoreResult<bool> {
            let done = sqlx::query(sqlx::AssertSqlSafe(self.sql.get(kind).delete.as_str()))
                .bind(cluster.as_str())
                .bind(id.to_string())
                .execute(&self.write)
                .await?;
            Ok(done.rows_affected() > 0)
        }

        async fn purge_clean_results_impl(
            &self,
            kind: $crate::wire::ResultKind,
            retention: std::time::Duration,
        ) -> $crate::store::StoreResult<u64> {
            let done = sqlx::query(sqlx::AssertSqlSafe(self.sql.get(kind).purge_clean.as_str()))
                .bind(retention.as_millis() as i64)
                .execute(&self.write)
                .await?;
            Ok(done.rows_affected())
        }

        async fn list_results_impl(
            &self,
            kind: $crate::wire::ResultKind,
            cluster: &$crate::ids::ClusterId,
            filter: $crate::store::StateFilter,
            page: $crate::store::Page,
        ) -> $crate::store::StoreResult<Vec<$crate::store::ResultEntry>> {
            let after = page.after.map(|id| id.to_string()).unwrap_or_default();
            let rows = sqlx::query(sqlx::AssertSqlSafe(self.sql.get(kind).list(filter)))
                .bind(cluster.as_str())
                .bind(after)
                .bind(i64::from(page.limit))
                .fetch_all(&self.read)
                .await?;
            Ok(rows
                .iter()
                .map($crate::store::entry_from_row)
                .collect::<Result<Vec<_>, _>>()?)
        }
    };
}

pub(crate) use result_store_methods;
