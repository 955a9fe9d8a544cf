//! The one place that knows both database drivers: the pools of each backend, and running a
//! statement of `store::sql` on either, its parameters bound by name from a struct
//! ([`params!`], [`statement!`]: the compiler checks the struct against the statement's
//! names) and its rows decoded by column name; every statement of a store call within the
//! call's `--db-timeout` ([`Call`], [`Deadline`]). Everything above it (`SqlStore`) is
//! written once for both backends.

use std::borrow::Cow;
use std::future::Future;
use std::marker::PhantomData;
use std::time::Duration;

use serde_json::Value;
use sqlx::pool::PoolConnection;
use sqlx::postgres::PgRow;
use sqlx::sqlite::{SqlitePool, SqliteRow};
use sqlx::types::Json;
use sqlx::{Database, Encode, FromRow, PgConnection, Postgres, Sqlite, SqliteConnection, Type};
use tokio::time::Instant;

use super::migrate::Backend;
use super::postgres::{Link, PgDb};
use super::sql::{PgSql, Sql};
use super::{StoreError, StoreResult};
use crate::ids::{ApplicationId, ClusterId, FlinkRestUrl, JobId, TriggerId};
use crate::result_file::ResultId;

/// The pools of the database the store runs on.
#[derive(Clone)]
pub(crate) enum Db {
    /// One pool serves reads and writes (on a server that takes writes: see `postgres`).
    Postgres(PgDb),
    /// SQLite has one writer: one connection takes every write, in order; readers (read-only
    /// connections) work beside it (WAL).
    Sqlite { write: SqlitePool, read: SqlitePool },
}

/// Which connections a statement needs: reads that decide nothing may go to SQLite's
/// readers; writes, and reads that decide a writer's next step, go to the writer (which has
/// seen every committed write).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    Read,
    Write,
}

/// A statement argument, as either driver binds it. Each carries its type, also as NULL
/// (PostgreSQL binds a NULL with the type of its parameter).
#[derive(Debug, Clone)]
pub(crate) enum Arg<'a> {
    Text(Option<Cow<'a, str>>),
    Int(Option<i64>),
    Bool(Option<bool>),
    Json(Option<&'a Value>),
    Bytes(Option<&'a [u8]>),
    /// An array of text: PostgreSQL only (`pg_statement!`).
    Texts(&'a [String]),
}

/// How a value is bound as a statement's parameter: every type a parameters struct
/// (`params!`) holds.
pub(crate) trait ToArg {
    /// This type's NULL (what `None` of it binds).
    const NULL: Arg<'static>;
    /// Only PostgreSQL binds it (an array): a statement of both backends refuses it.
    const POSTGRES_ONLY: bool = false;
    fn to_arg(&self) -> Arg<'_>;
}

impl<T: ToArg + ?Sized> ToArg for &T {
    const NULL: Arg<'static> = T::NULL;
    const POSTGRES_ONLY: bool = T::POSTGRES_ONLY;
    fn to_arg(&self) -> Arg<'_> {
        (**self).to_arg()
    }
}

impl<T: ToArg> ToArg for Option<T> {
    const NULL: Arg<'static> = T::NULL;
    const POSTGRES_ONLY: bool = T::POSTGRES_ONLY;
    fn to_arg(&self) -> Arg<'_> {
        match self {
            Some(value) => value.to_arg(),
            None => T::NULL,
        }
    }
}

impl ToArg for str {
    const NULL: Arg<'static> = Arg::Text(None);
    fn to_arg(&self) -> Arg<'_> {
        Arg::Text(Some(Cow::Borrowed(self)))
    }
}

impl ToArg for String {
    const NULL: Arg<'static> = Arg::Text(None);
    fn to_arg(&self) -> Arg<'_> {
        self.as_str().to_arg()
    }
}

impl ToArg for bool {
    const NULL: Arg<'static> = Arg::Bool(None);
    fn to_arg(&self) -> Arg<'_> {
        Arg::Bool(Some(*self))
    }
}

impl ToArg for Value {
    const NULL: Arg<'static> = Arg::Json(None);
    fn to_arg(&self) -> Arg<'_> {
        Arg::Json(Some(self))
    }
}

impl ToArg for [u8] {
    const NULL: Arg<'static> = Arg::Bytes(None);
    fn to_arg(&self) -> Arg<'_> {
        Arg::Bytes(Some(self))
    }
}

impl ToArg for Vec<String> {
    const NULL: Arg<'static> = Arg::Texts(&[]);
    const POSTGRES_ONLY: bool = true;
    fn to_arg(&self) -> Arg<'_> {
        Arg::Texts(self)
    }
}

/// A duration in milliseconds (the statements compute times on the database's clock).
impl ToArg for std::time::Duration {
    const NULL: Arg<'static> = Arg::Int(None);
    fn to_arg(&self) -> Arg<'_> {
        Arg::Int(Some(i64::try_from(self.as_millis()).unwrap_or(i64::MAX)))
    }
}

/// Binds integer types (every integer parameter is bound as a bigint).
macro_rules! int_args {
    ($($t:ty => |$v:ident| $int:expr),* $(,)?) => {$(
        impl $crate::store::db::ToArg for $t {
            const NULL: $crate::store::db::Arg<'static> = $crate::store::db::Arg::Int(None);
            fn to_arg(&self) -> $crate::store::db::Arg<'_> {
                let $v = self;
                $crate::store::db::Arg::Int(Some($int))
            }
        }
    )*};
}
pub(crate) use int_args;

int_args!(
    i64 => |v| *v,
    i32 => |v| i64::from(*v),
    u32 => |v| i64::from(*v),
);

/// Binds types kept as their text (`Display`): ids, URLs, lease ids.
macro_rules! text_args {
    ($($t:ty),* $(,)?) => {$(
        impl ToArg for $t {
            const NULL: Arg<'static> = Arg::Text(None);
            fn to_arg(&self) -> Arg<'_> {
                Arg::Text(Some(Cow::Owned(self.to_string())))
            }
        }
    )*};
}

text_args!(JobId, ApplicationId, TriggerId, ResultId, uuid::Uuid);

/// Binds types that hold their text (`as_str`).
macro_rules! str_args {
    ($($t:ty),* $(,)?) => {$(
        impl $crate::store::db::ToArg for $t {
            const NULL: $crate::store::db::Arg<'static> = $crate::store::db::Arg::Text(None);
            fn to_arg(&self) -> $crate::store::db::Arg<'_> {
                let text = std::borrow::Cow::Borrowed(self.as_str());
                $crate::store::db::Arg::Text(Some(text))
            }
        }
    )*};
}
pub(crate) use str_args;

str_args!(ClusterId, FlinkRestUrl);

/// A text the schema keeps as '' for "none" (the key columns `job_id` of state handles,
/// schedules and retention policies, the cursors of listings before their first page): the
/// one place where `None` becomes ''. Rows give it back as NULL (`NULLIF(job_id, '')`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct OrEmpty<T>(pub Option<T>);

impl<T: std::fmt::Display> ToArg for OrEmpty<T> {
    const NULL: Arg<'static> = Arg::Text(None);
    fn to_arg(&self) -> Arg<'_> {
        Arg::Text(Some(match &self.0 {
            Some(value) => Cow::Owned(value.to_string()),
            None => Cow::Borrowed(""),
        }))
    }
}

/// Values of parameters, by name: a struct whose fields are named as the parameters a
/// statement's file uses (`:cluster`, ...), made by [`params!`].
pub(crate) trait Fields {
    /// The fields' names, in the order of [`Fields::args`].
    const NAMES: &'static [&'static str];
    /// Whether a field is one only PostgreSQL binds.
    const POSTGRES_ONLY: bool;
    fn args(&self) -> Vec<Arg<'_>>;
}

/// The values of all of one statement's parameters: one [`Fields`] struct, or a tuple of
/// them when the statement's parameters come in parts (a fenced write's lease and what it
/// writes, an operation's key and what a step sets). Each name is in one part only.
pub(crate) trait Params {
    /// The parts' names, in the order of [`Params::args`].
    const GROUPS: &'static [&'static [&'static str]];
    const POSTGRES_ONLY: bool;
    fn args(&self) -> Vec<Arg<'_>>;
}

impl<F: Fields> Params for F {
    const GROUPS: &'static [&'static [&'static str]] = &[F::NAMES];
    const POSTGRES_ONLY: bool = F::POSTGRES_ONLY;
    fn args(&self) -> Vec<Arg<'_>> {
        Fields::args(self)
    }
}

/// Parameters in parts: a tuple of [`Fields`] structs.
macro_rules! parts {
    ($($part:ident . $i:tt),+) => {
        impl<$($part: Fields),+> Params for ($($part,)+) {
            const GROUPS: &'static [&'static [&'static str]] = &[$($part::NAMES),+];
            const POSTGRES_ONLY: bool = false $(|| $part::POSTGRES_ONLY)+;
            fn args(&self) -> Vec<Arg<'_>> {
                let mut args = Vec::new();
                $(args.extend(self.$i.args());)+
                args
            }
        }
    };
}

parts!(A.0, B.1);
parts!(A.0, B.1, C.2);

/// Defines a struct of (a part of) a statement's parameters: its fields are named as the
/// statement's parameters (`:name` in the SQL file), each of a type that binds ([`ToArg`]).
/// [`statement!`] checks, when it compiles, that a statement names exactly those.
macro_rules! params {
    ($(
        $(#[$doc:meta])*
        $vis:vis struct $name:ident $(<$lt:lifetime>)? {
            $($(#[$fdoc:meta])* $field:ident: $ty:ty),* $(,)?
        }
    )*) => {$(
        $(#[$doc])*
        $vis struct $name $(<$lt>)? {
            $($(#[$fdoc])* pub $field: $ty,)*
        }

        impl $(<$lt>)? $crate::store::db::Fields for $name $(<$lt>)? {
            const NAMES: &'static [&'static str] = &[$(stringify!($field)),*];
            const POSTGRES_ONLY: bool =
                false $(|| <$ty as $crate::store::db::ToArg>::POSTGRES_ONLY)*;
            fn args(&self) -> Vec<$crate::store::db::Arg<'_>> {
                vec![$($crate::store::db::ToArg::to_arg(&self.$field)),*]
            }
        }
    )*};
}
pub(crate) use params;

/// Whether `names` (each once) are exactly the names of `groups`: as many, and each of them
/// in a group.
const fn same_names(names: &[&str], groups: &[&[&str]]) -> bool {
    let mut total = 0;
    let mut g = 0;
    while g < groups.len() {
        total += groups[g].len();
        g += 1;
    }
    if total != names.len() {
        return false;
    }
    let mut i = 0;
    while i < names.len() {
        if position(names[i], groups).is_none() {
            return false;
        }
        i += 1;
    }
    true
}

/// Where `name` stands in `groups` taken one after the other.
const fn position(name: &str, groups: &[&[&str]]) -> Option<usize> {
    let mut at = 0;
    let mut g = 0;
    while g < groups.len() {
        let mut j = 0;
        while j < groups[g].len() {
            if same_text(name, groups[g][j]) {
                return Some(at + j);
            }
            j += 1;
        }
        at += groups[g].len();
        g += 1;
    }
    None
}

const fn same_text(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// A statement and the parameters it takes (`P`): its name, its parameters' names, and the
/// text of each backend (`None` for SQLite: a statement only PostgreSQL runs). Made by
/// [`statement!`] and [`pg_statement!`]: parameters whose names are not the statement's fail
/// the build.
pub(crate) struct Statement<P> {
    name: &'static str,
    params: &'static [&'static str],
    postgres: &'static str,
    sqlite: Option<&'static str>,
    takes: PhantomData<fn() -> P>,
}

impl<P> Clone for Statement<P> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<P> Copy for Statement<P> {}

impl<P: Params> Statement<P> {
    /// A statement of both backends.
    pub const fn new(sql: Sql) -> Self {
        Self::checked(sql.name, sql.params, sql.postgres, Some(sql.sqlite))
    }

    /// A statement only PostgreSQL runs.
    pub const fn postgres(sql: PgSql) -> Self {
        Self::checked(sql.name, sql.params, sql.postgres, None)
    }

    /// Fails (when it compiles) unless `P` supplies exactly the parameters `params`, and only
    /// ones both backends bind for a statement of both.
    const fn checked(
        name: &'static str, params: &'static [&'static str], postgres: &'static str,
        sqlite: Option<&'static str>,
    ) -> Self {
        assert!(
            same_names(params, P::GROUPS),
            "the statement's parameters (`:name` in its file) are not the fields of its params"
        );
        assert!(
            sqlite.is_none() || !P::POSTGRES_ONLY,
            "a statement of both backends takes a parameter only PostgreSQL binds"
        );
        Statement {
            name,
            params,
            postgres,
            sqlite,
            takes: PhantomData,
        }
    }

    /// SQLite's text and `params`' arguments in the order of its parameters (`$1` first),
    /// for the group commit's runner on SQLite's own handle.
    pub(in crate::store) fn sqlite_args<'p>(
        &self, params: &'p P,
    ) -> Result<(&'static str, Vec<Arg<'p>>), sqlx::Error> {
        Ok((self.sqlite()?, ordered(self.params, params)))
    }

    /// SQLite's text; an error for a statement only PostgreSQL runs.
    fn sqlite(&self) -> Result<&'static str, sqlx::Error> {
        self.sqlite.ok_or_else(|| {
            sqlx::Error::Protocol(format!("{} is a PostgreSQL statement", self.name))
        })
    }
}

/// The statement `store::sql::NAME` with the parameters the call gives it, checked when it
/// compiles: `db.optional(Side::Read, statement!(JOB_RESULTS_GET), &ResultKey { .. })`.
macro_rules! statement {
    ($name:ident) => {
        const { $crate::store::db::Statement::new($crate::store::sql::$name) }
    };
}
pub(crate) use statement;

/// [`statement!`] of a PostgreSQL-only statement.
macro_rules! pg_statement {
    ($name:ident) => {
        const { $crate::store::db::Statement::postgres($crate::store::sql::$name) }
    };
}
pub(crate) use pg_statement;

/// `params`' arguments in the order of the statement's parameters (`names`: `$1` first).
fn ordered<'p, P: Params>(names: &[&str], params: &'p P) -> Vec<Arg<'p>> {
    let mut args: Vec<Option<Arg<'p>>> = params.args().into_iter().map(Some).collect();
    names
        .iter()
        .map(|name| {
            position(name, P::GROUPS)
                .and_then(|i| args[i].take())
                .expect("a statement's parameters are its params' fields (checked when built)")
        })
        .collect()
}

/// A row type every backend decodes (by column name: `#[derive(sqlx::FromRow)]`).
pub(crate) trait Decoded:
    for<'r> FromRow<'r, PgRow> + for<'r> FromRow<'r, SqliteRow> + Send + Unpin
{
}

impl<T> Decoded for T where
    T: for<'r> FromRow<'r, PgRow> + for<'r> FromRow<'r, SqliteRow> + Send + Unpin
{
}

/// Binding an array of text: PostgreSQL's; SQLite has no arrays (a statement of both
/// backends refuses such a parameter when it is built: [`Statement::new`]).
trait BindTexts: Database {
    fn bind_texts<'q>(
        query: sqlx::query::Query<'q, Self, Self::Arguments>, texts: &[String],
    ) -> sqlx::query::Query<'q, Self, Self::Arguments>;
}

impl BindTexts for Postgres {
    fn bind_texts<'q>(
        query: sqlx::query::Query<'q, Self, Self::Arguments>, texts: &[String],
    ) -> sqlx::query::Query<'q, Self, Self::Arguments> {
        query.bind(texts.to_vec())
    }
}

impl BindTexts for Sqlite {
    fn bind_texts<'q>(
        _: sqlx::query::Query<'q, Self, Self::Arguments>, _: &[String],
    ) -> sqlx::query::Query<'q, Self, Self::Arguments> {
        unreachable!("no SQLite statement takes an array (Statement::new refuses one)")
    }
}

/// The statement with its arguments bound, for either driver.
fn bound<DB: BindTexts>(
    sql: &'static str, args: &[Arg<'_>],
) -> sqlx::query::Query<'static, DB, DB::Arguments>
where
    for<'q> Option<&'q str>: Encode<'q, DB> + Type<DB>,
    Option<i64>: for<'q> Encode<'q, DB> + Type<DB>,
    Option<bool>: for<'q> Encode<'q, DB> + Type<DB>,
    for<'q> Option<Json<&'q Value>>: Encode<'q, DB> + Type<DB>,
    for<'q> Option<&'q [u8]>: Encode<'q, DB> + Type<DB>,
{
    let mut query = sqlx::query::<DB>(sql);
    for arg in args {
        query = match arg {
            Arg::Text(v) => query.bind(v.as_deref()),
            Arg::Int(v) => query.bind(*v),
            Arg::Bool(v) => query.bind(*v),
            Arg::Json(v) => query.bind(v.map(Json)),
            Arg::Bytes(v) => query.bind(*v),
            Arg::Texts(v) => DB::bind_texts(query, v),
        };
    }
    query
}

/// A row decoded, a decoder's panic (sqlx's chrono decoding panics on a timestamp past the
/// year 262143, which PostgreSQL holds) made a decode error: a stored value never takes the
/// connection or the task down with it.
fn decode<R: sqlx::Row, T: for<'r> FromRow<'r, R>>(row: &R) -> Result<T, sqlx::Error> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| T::from_row(row))).unwrap_or_else(
        |_| {
            Err(sqlx::Error::Decode(
                "a stored value is out of the range its type holds".into(),
            ))
        },
    )
}

/// A connection of either backend, borrowed from a pool or a transaction.
/// PostgreSQL's carries the link, which hears of failures that say the server went away
/// or became read-only.
pub(crate) enum On<'c> {
    Postgres(&'c mut PgConnection, &'c Link),
    Sqlite(&'c mut SqliteConnection),
}

impl On<'_> {
    pub async fn optional<P: Params, T: Decoded>(
        &mut self, statement: Statement<P>, params: &P,
    ) -> Result<Option<T>, sqlx::Error> {
        let args = ordered(statement.params, params);
        match self {
            On::Postgres(c, link) => bound(statement.postgres, &args)
                .fetch_optional(&mut **c)
                .await
                .inspect_err(|e| link.saw(e))?
                .as_ref()
                .map(decode)
                .transpose(),
            On::Sqlite(c) => bound(statement.sqlite()?, &args)
                .fetch_optional(&mut **c)
                .await?
                .as_ref()
                .map(decode)
                .transpose(),
        }
    }

    pub async fn all<P: Params, T: Decoded>(
        &mut self, statement: Statement<P>, params: &P,
    ) -> Result<Vec<T>, sqlx::Error> {
        let args = ordered(statement.params, params);
        match self {
            On::Postgres(c, link) => {
                let rows = bound(statement.postgres, &args)
                    .fetch_all(&mut **c)
                    .await
                    .inspect_err(|e| link.saw(e))?;
                rows.iter().map(decode).collect()
            }
            On::Sqlite(c) => {
                let rows = bound(statement.sqlite()?, &args)
                    .fetch_all(&mut **c)
                    .await?;
                rows.iter().map(decode).collect()
            }
        }
    }

    /// Runs a statement that answers no rows; the number of rows it changed.
    pub async fn execute<P: Params>(
        &mut self, statement: Statement<P>, params: &P,
    ) -> Result<u64, sqlx::Error> {
        let args = ordered(statement.params, params);
        Ok(match self {
            On::Postgres(c, link) => bound(statement.postgres, &args)
                .execute(&mut **c)
                .await
                .inspect_err(|e| link.saw(e))?
                .rows_affected(),
            On::Sqlite(c) => bound(statement.sqlite()?, &args)
                .execute(&mut **c)
                .await?
                .rows_affected(),
        })
    }
}

/// A pooled connection of either backend.
pub(crate) enum Conn {
    Postgres(PoolConnection<Postgres>, std::sync::Arc<Link>),
    Sqlite(PoolConnection<Sqlite>),
}

impl Conn {
    pub fn on(&mut self) -> On<'_> {
        match self {
            Conn::Postgres(c, link) => On::Postgres(c, link),
            Conn::Sqlite(c) => On::Sqlite(c),
        }
    }
}

/// A transaction on the writer; rolled back when dropped uncommitted.
pub(crate) enum Tx {
    Postgres(sqlx::Transaction<'static, Postgres>, std::sync::Arc<Link>),
    Sqlite(sqlx::Transaction<'static, Sqlite>),
}

impl Tx {
    pub fn on(&mut self) -> On<'_> {
        match self {
            Tx::Postgres(t, link) => On::Postgres(t, link),
            Tx::Sqlite(t) => On::Sqlite(t),
        }
    }

    pub async fn commit(self) -> Result<(), sqlx::Error> {
        match self {
            Tx::Postgres(t, link) => t.commit().await.inspect_err(|e| link.saw(e)),
            Tx::Sqlite(t) => t.commit().await,
        }
    }
}

impl Db {
    pub fn backend(&self) -> Backend {
        match self {
            Db::Postgres(_) => Backend::Postgres,
            Db::Sqlite { .. } => Backend::Sqlite,
        }
    }

    /// A connection for `side`.
    pub async fn conn(&self, side: Side) -> Result<Conn, sqlx::Error> {
        Ok(match (self, side) {
            (Db::Postgres(pg), _) => Conn::Postgres(pg.acquire().await?, pg.link.clone()),
            (Db::Sqlite { read, .. }, Side::Read) => Conn::Sqlite(read.acquire().await?),
            (Db::Sqlite { write, .. }, Side::Write) => Conn::Sqlite(write.acquire().await?),
        })
    }

    /// A transaction on the writer.
    pub async fn begin(&self) -> Result<Tx, sqlx::Error> {
        Ok(match self {
            Db::Postgres(pg) => Tx::Postgres(pg.begin().await?, pg.link.clone()),
            Db::Sqlite { write, .. } => Tx::Sqlite(write.begin().await?),
        })
    }

    /// Connections the pools hold, and how many of them are idle.
    pub fn pool_connections(&self) -> (u32, usize) {
        match self {
            Db::Postgres(pg) => (pg.size(), idle_of(pg.size(), pg.num_idle())),
            Db::Sqlite { write, read } => (
                write.size().saturating_add(read.size()),
                idle_of(write.size(), write.num_idle())
                    .saturating_add(idle_of(read.size(), read.num_idle())),
            ),
        }
    }
}

/// The bound of one store call: `--db-timeout` from the call's start, for everything the
/// call waits for (a connection, each statement, a transaction's commit, a group commit). The
/// pools bound only the wait for a connection, so a database that stops answering in the
/// middle of a statement (frozen, or behind a network partition) would otherwise hold the
/// request until `--request-timeout`. sqlx tests a connection whose statement was abandoned
/// before it reuses it; a transaction abandoned is rolled back.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Deadline {
    at: Instant,
    timeout: Duration,
}

impl Deadline {
    pub fn after(timeout: Duration) -> Self {
        Deadline {
            at: Instant::now() + timeout,
            timeout,
        }
    }

    /// `work`, or [`StoreError::Timeout`] once the deadline passed: the one place where the
    /// store's calls are bounded.
    pub async fn bound<T, E: Into<StoreError>>(
        &self, work: impl Future<Output = Result<T, E>>,
    ) -> StoreResult<T> {
        match tokio::time::timeout_at(self.at, work).await {
            Ok(answer) => answer.map_err(Into::into),
            Err(_) => Err(StoreError::Timeout(self.timeout)),
        }
    }
}

/// The database as one store call uses it: every statement and transaction of the call
/// within the call's [`Deadline`].
pub(crate) struct Call<'d> {
    db: &'d Db,
    deadline: Deadline,
}

impl<'d> Call<'d> {
    pub fn new(db: &'d Db, deadline: Deadline) -> Self {
        Call { db, deadline }
    }

    /// One statement on a connection of `side`: at most one row.
    pub async fn optional<P: Params, T: Decoded>(
        &self, side: Side, statement: Statement<P>, params: &P,
    ) -> StoreResult<Option<T>> {
        let run = async {
            self.db
                .conn(side)
                .await?
                .on()
                .optional(statement, params)
                .await
        };
        self.deadline.bound(run).await
    }

    /// One statement on a connection of `side`: every row.
    pub async fn all<P: Params, T: Decoded>(
        &self, side: Side, statement: Statement<P>, params: &P,
    ) -> StoreResult<Vec<T>> {
        let run = async { self.db.conn(side).await?.on().all(statement, params).await };
        self.deadline.bound(run).await
    }

    /// One statement that answers no rows, on the writer: the rows it changed.
    pub async fn execute<P: Params>(
        &self, statement: Statement<P>, params: &P,
    ) -> StoreResult<u64> {
        let run = async {
            let mut conn = self.db.conn(Side::Write).await?;
            conn.on().execute(statement, params).await
        };
        self.deadline.bound(run).await
    }

    /// A transaction on the writer, within the call's deadline.
    pub async fn begin(&self) -> StoreResult<Transaction> {
        let tx = self.deadline.bound(self.db.begin()).await?;
        Ok(Transaction {
            tx,
            deadline: self.deadline,
        })
    }
}

/// A transaction of a [`Call`]; rolled back when dropped uncommitted.
pub(crate) struct Transaction {
    tx: Tx,
    deadline: Deadline,
}

impl Transaction {
    pub async fn optional<P: Params, T: Decoded>(
        &mut self, statement: Statement<P>, params: &P,
    ) -> StoreResult<Option<T>> {
        let deadline = self.deadline;
        deadline
            .bound(async { self.tx.on().optional(statement, params).await })
            .await
    }

    pub async fn execute<P: Params>(
        &mut self, statement: Statement<P>, params: &P,
    ) -> StoreResult<u64> {
        let deadline = self.deadline;
        deadline
            .bound(async { self.tx.on().execute(statement, params).await })
            .await
    }

    pub async fn commit(self) -> StoreResult<()> {
        self.deadline.bound(self.tx.commit()).await
    }
}

/// A pool's idle count, read as sqlx keeps it: sqlx 0.9 pushes a released connection onto
/// its idle queue before it counts it, so a connection taken in between makes the count
/// wrap below zero for a moment (`usize::MAX`, which once made the metrics' sum overflow
/// and the request panic). No pool has more idle connections than connections.
fn idle_of(size: u32, idle: usize) -> usize {
    idle.min(size as usize)
}

#[cfg(test)]
mod idle_count {
    use super::idle_of;

    #[test]
    fn a_count_wrapped_below_zero_reads_as_at_most_the_pool_size() {
        assert_eq!(idle_of(4, usize::MAX), 4);
        assert_eq!(idle_of(4, 3), 3);
        assert_eq!(idle_of(0, 0), 0);
    }
}

#[cfg(test)]
mod named_parameters {
    use super::*;

    params! {
        struct Page<'a> {
            cluster: &'a str,
            limit: u32,
        }

        struct Job {
            job: u32,
        }
    }

    type Parts = (Page<'static>, Job);

    #[test]
    fn a_statement_names_exactly_the_fields_of_its_parts_in_any_order() {
        assert!(same_names(&["limit", "cluster"], Page::GROUPS));
        assert!(same_names(&["job", "cluster", "limit"], Parts::GROUPS));
        assert!(!same_names(&["cluster"], Page::GROUPS), "a field unused");
        assert!(
            !same_names(&["cluster", "limit", "offset"], Page::GROUPS),
            "a parameter missing"
        );
        assert!(
            !same_names(&["cluster", "job"], Page::GROUPS),
            "as many, not the same"
        );
    }

    #[test]
    fn arguments_are_bound_in_the_order_of_the_statements_parameters() {
        let parts: Parts = (
            Page {
                cluster: "c",
                limit: 3,
            },
            Job { job: 7 },
        );
        let args = ordered(&["job", "cluster", "limit"], &parts);
        assert_eq!(
            format!("{args:?}"),
            r#"[Int(Some(7)), Text(Some("c")), Int(Some(3))]"#
        );
    }
}
