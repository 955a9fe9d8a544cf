//! SQLite: a batch written on the writer connection's own handle, in one hand-over.
//!
//! sqlx runs every statement of a SQLite connection on that connection's worker thread: each
//! statement, and the transaction's `BEGIN` and `COMMIT`, is a message to the thread and its
//! answer back, two thread wake-ups. A batch of n rows paid n + 2 of those hand-overs, and on
//! a machine whose cores are not busy every wake-up is a core woken from idle. Here the
//! flusher locks the handle out from the worker (`lock_handle`: one hand-over) and runs the
//! whole transaction itself through SQLite's C API, with the statements every other path
//! runs (their SQLite text and parameters from `statement!`), so each row gets exactly the
//! answer it gets alone: a constraint failure aborts its statement alone (SQLite's default
//! `ABORT`) and the transaction goes on.

use std::ffi::{c_char, c_int};
use std::ptr;

use chrono::{DateTime, NaiveDateTime, Utc};
use libsqlite3_sys as ffi;
use sqlx::sqlite::LockedSqliteHandle;

use super::{Job, RowFailure, Steps, absent_or_clean, created, sqlite_row_failure};
use crate::result_file::ResultId;
use crate::store::db::{Arg, Params, Statement};
use crate::store::model::{ResultEntry, ResultState};
use crate::store::{StoreError, StoreResult};

/// What a transaction on the handle came to.
pub(super) struct Outcome {
    /// Each row's answer, in the batch's order, up to the row whose failure ended the batch.
    pub answers: Vec<StoreResult<ResultEntry>>,
    /// Why the transaction did not commit (or may not have): the batch's failure.
    pub failed: Option<StoreError>,
    /// The handle is still inside a transaction that could not be rolled back: the
    /// connection must not be used again.
    pub poisoned: bool,
}

/// The batch in one transaction on the locked handle. Blocks (SQLite's statements and its
/// commit's fsync): the caller runs it where blocking is allowed.
pub(super) fn transaction(h: &mut LockedSqliteHandle<'_>, batch: &[Job]) -> Outcome {
    let mut answers = Vec::with_capacity(batch.len());
    let mut failed = None;
    if let Err(e) = exec(h, c"BEGIN IMMEDIATE") {
        failed = Some(StoreError::from(e));
    } else {
        let mut statements = Statements::default();
        for job in batch {
            match row(h, &mut statements, job) {
                Ok(entry) => answers.push(Ok(entry)),
                Err(RowFailure::Row(e)) => answers.push(Err(e)),
                Err(RowFailure::Batch(e)) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        // Finalized before the transaction ends.
        drop(statements);
        if failed.is_none() {
            failed = exec(h, c"COMMIT").err().map(StoreError::from);
        }
    }
    // Not committed: rolled back, if SQLite has not done so itself (a failed commit may have
    // left the transaction open, an I/O error may have rolled it back).
    if failed.is_some() && in_transaction(h) {
        let _ = exec(h, c"ROLLBACK");
    }
    let poisoned = in_transaction(h);
    Outcome {
        answers,
        failed,
        poisoned,
    }
}

/// One write, as `super::row` runs it through sqlx.
fn row(
    h: &mut LockedSqliteHandle<'_>, statements: &mut Statements, job: &Job,
) -> Result<ResultEntry, RowFailure> {
    let fail = |e: sqlx::Error| {
        if sqlite_row_failure(&e) {
            RowFailure::Row(StoreError::from(e))
        } else {
            RowFailure::Batch(StoreError::from(e))
        }
    };
    match job.steps() {
        Steps::Create { insert, new } => created(
            statements
                .run(h, Slot::Insert, insert, &new, job.id)
                .map_err(fail)?,
        ),
        Steps::Clean { clean, get, key } => {
            let cleaned = statements
                .run(h, Slot::Clean, clean, &key, job.id)
                .map_err(fail)?;
            if let Some(cleaned) = cleaned {
                return Ok(cleaned);
            }
            absent_or_clean(
                statements
                    .run(h, Slot::Get, get, &key, job.id)
                    .map_err(fail)?,
            )
        }
    }
}

/// Which statement of a kind.
#[derive(Clone, Copy)]
enum Slot {
    Insert,
    Clean,
    Get,
}

/// The batch's prepared statements, each prepared at its first use and kept for the batch:
/// by result kind and [`Slot`].
#[derive(Default)]
struct Statements {
    prepared: [[Option<Prepared>; 3]; 2],
}

impl Statements {
    /// Runs `statement` with `params` and decodes its one row, if any.
    fn run<P: Params>(
        &mut self, h: &mut LockedSqliteHandle<'_>, slot: Slot, statement: Statement<P>, params: &P,
        id: ResultId,
    ) -> Result<Option<ResultEntry>, sqlx::Error> {
        let (sql, args) = statement.sqlite_args(params)?;
        let kind = match id {
            ResultId::Job(_) => 0,
            ResultId::Application(_) => 1,
        };
        let cell = &mut self.prepared[kind][slot as usize];
        if cell.is_none() {
            *cell = Some(Prepared::new(h, sql)?);
        }
        let prepared = cell.as_mut().expect("prepared above");
        prepared.bind(h, &args)?;
        let entry = prepared.step_entry(h, id);
        prepared.reset();
        entry
    }
}

/// A prepared statement, finalized when dropped.
struct Prepared {
    raw: *mut ffi::sqlite3_stmt,
    /// SQLite's index of `$1`, `$2`, ... (the build's spelling of the parameters), in order.
    indices: Vec<c_int>,
}

impl Drop for Prepared {
    fn drop(&mut self) {
        // SAFETY: `raw` came from sqlite3_prepare_v2 and is finalized once, here.
        unsafe {
            ffi::sqlite3_finalize(self.raw);
        }
    }
}

impl Prepared {
    fn new(h: &mut LockedSqliteHandle<'_>, sql: &str) -> Result<Prepared, sqlx::Error> {
        let db = h.as_raw_handle().as_ptr();
        let len = c_int::try_from(sql.len())
            .map_err(|_| sqlx::Error::Protocol("statement too long".into()))?;
        let mut raw = ptr::null_mut();
        // SAFETY: the handle is locked out from sqlx's worker for as long as `h` lives; the
        // text is valid for `len` bytes.
        let rc = unsafe {
            ffi::sqlite3_prepare_v2(
                db,
                sql.as_ptr().cast::<c_char>(),
                len,
                &mut raw,
                ptr::null_mut(),
            )
        };
        if rc != ffi::SQLITE_OK || raw.is_null() {
            if !raw.is_null() {
                // SAFETY: a statement prepared despite the failure is finalized.
                unsafe {
                    ffi::sqlite3_finalize(raw);
                }
            }
            return Err(last_error(h));
        }
        let mut prepared = Prepared {
            raw,
            indices: Vec::new(),
        };
        // SAFETY: `raw` is a live statement.
        let count = unsafe { ffi::sqlite3_bind_parameter_count(raw) };
        for n in 1..=count {
            let name = format!("${n}\0");
            // SAFETY: `raw` is a live statement; `name` is NUL-terminated.
            let index = unsafe { ffi::sqlite3_bind_parameter_index(raw, name.as_ptr().cast()) };
            if index == 0 {
                return Err(sqlx::Error::Protocol(format!(
                    "the statement has no parameter ${n}"
                )));
            }
            prepared.indices.push(index);
        }
        Ok(prepared)
    }

    /// Binds the arguments to `$1`, `$2`, ... in order.
    fn bind(
        &mut self, h: &mut LockedSqliteHandle<'_>, args: &[Arg<'_>],
    ) -> Result<(), sqlx::Error> {
        if args.len() != self.indices.len() {
            return Err(sqlx::Error::Protocol(format!(
                "{} arguments for {} parameters",
                args.len(),
                self.indices.len()
            )));
        }
        for (&index, arg) in self.indices.iter().zip(args) {
            let text = |s: &[u8]| -> Result<c_int, sqlx::Error> {
                let len = c_int::try_from(s.len())
                    .map_err(|_| sqlx::Error::Protocol("a parameter over 2 GiB".into()))?;
                // SAFETY: SQLITE_TRANSIENT makes SQLite copy the bytes before it returns.
                Ok(unsafe {
                    ffi::sqlite3_bind_text(
                        self.raw,
                        index,
                        s.as_ptr().cast(),
                        len,
                        ffi::SQLITE_TRANSIENT(),
                    )
                })
            };
            // SAFETY (the binds below): `raw` is a live statement and `index` one of its
            // parameters.
            let rc = match arg {
                Arg::Text(Some(s)) => text(s.as_bytes())?,
                Arg::Json(Some(v)) => text(v.to_string().as_bytes())?,
                Arg::Int(Some(n)) => unsafe { ffi::sqlite3_bind_int64(self.raw, index, *n) },
                Arg::Bool(Some(b)) => unsafe {
                    ffi::sqlite3_bind_int64(self.raw, index, i64::from(*b))
                },
                Arg::Text(None) | Arg::Json(None) | Arg::Int(None) | Arg::Bool(None) => unsafe {
                    ffi::sqlite3_bind_null(self.raw, index)
                },
                Arg::Bytes(_) | Arg::Texts(_) => {
                    return Err(sqlx::Error::Protocol(
                        "a result write binds text and integers only".into(),
                    ));
                }
            };
            if rc != ffi::SQLITE_OK {
                return Err(last_error(h));
            }
        }
        Ok(())
    }

    /// Steps the statement to its end; its first row (`cluster_id, <kind>_id, state,
    /// result, created_at, cleaned_at`) as the entry `id`.
    fn step_entry(
        &mut self, h: &mut LockedSqliteHandle<'_>, id: ResultId,
    ) -> Result<Option<ResultEntry>, sqlx::Error> {
        let mut entry = None;
        loop {
            // SAFETY: `raw` is a live statement, its parameters bound.
            let rc = unsafe { ffi::sqlite3_step(self.raw) };
            match rc {
                ffi::SQLITE_ROW if entry.is_none() => entry = Some(self.entry(id)?),
                ffi::SQLITE_ROW => {}
                ffi::SQLITE_DONE => return Ok(entry),
                _ => return Err(last_error(h)),
            }
        }
    }

    /// The current row as an entry.
    fn entry(&self, id: ResultId) -> Result<ResultEntry, sqlx::Error> {
        let decode = |what: &str| sqlx::Error::Decode(format!("a result row's {what}").into());
        let cluster = self
            .text(0)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| decode("cluster_id"))?;
        let stored_id = self
            .text(1)
            .and_then(|s| ResultId::parse(id.kind(), s).ok());
        if stored_id != Some(id) {
            return Err(decode("id"));
        }
        let state = self
            .text(2)
            .and_then(ResultState::parse)
            .ok_or_else(|| decode("state"))?;
        let result = self
            .text(3)
            .and_then(|s| serde_json::from_str(s).ok())
            .ok_or_else(|| decode("result"))?;
        let created_at = self
            .text(4)
            .and_then(time)
            .ok_or_else(|| decode("created_at"))?;
        let cleaned_at = match self.text(5) {
            None => None,
            Some(s) => Some(time(s).ok_or_else(|| decode("cleaned_at"))?),
        };
        Ok(ResultEntry {
            cluster_id: cluster,
            id,
            state,
            created_at,
            cleaned_at,
            result,
        })
    }

    /// Column `i` of the current row as text; `None` for NULL (or text that is not UTF-8).
    fn text(&self, i: c_int) -> Option<&str> {
        // SAFETY: `raw` is on a row; the text SQLite returns stays valid until the next step,
        // reset or finalize, which need `&mut self`.
        unsafe {
            if ffi::sqlite3_column_type(self.raw, i) == ffi::SQLITE_NULL {
                return None;
            }
            let p = ffi::sqlite3_column_text(self.raw, i);
            let n = usize::try_from(ffi::sqlite3_column_bytes(self.raw, i)).ok()?;
            if p.is_null() {
                return Some("");
            }
            std::str::from_utf8(std::slice::from_raw_parts(p, n)).ok()
        }
    }

    fn reset(&mut self) {
        // SAFETY: `raw` is a live statement. A failure was reported by its step already.
        unsafe {
            ffi::sqlite3_reset(self.raw);
            ffi::sqlite3_clear_bindings(self.raw);
        }
    }
}

/// A time as the store writes it (`strftime('%Y-%m-%dT%H:%M:%fZ')`), or in the other forms
/// sqlx reads.
fn time(s: &str) -> Option<DateTime<Utc>> {
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Some(t.to_utc());
    }
    [
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M",
    ]
    .iter()
    .find_map(|f| NaiveDateTime::parse_from_str(s, f).ok())
    .map(|t| t.and_utc())
}

/// One statement without parameters or rows (`BEGIN`, `COMMIT`, `ROLLBACK`).
fn exec(h: &mut LockedSqliteHandle<'_>, sql: &std::ffi::CStr) -> Result<(), sqlx::Error> {
    let db = h.as_raw_handle().as_ptr();
    // SAFETY: the handle is locked out from sqlx's worker; `sql` is NUL-terminated.
    let rc = unsafe { ffi::sqlite3_exec(db, sql.as_ptr(), None, ptr::null_mut(), ptr::null_mut()) };
    if rc == ffi::SQLITE_OK {
        Ok(())
    } else {
        Err(last_error(h))
    }
}

/// Whether the handle is inside a transaction.
fn in_transaction(h: &mut LockedSqliteHandle<'_>) -> bool {
    // SAFETY: the handle is locked out from sqlx's worker.
    unsafe { ffi::sqlite3_get_autocommit(h.as_raw_handle().as_ptr()) == 0 }
}

/// The handle's last error as sqlx reports it (its extended code and message).
fn last_error(h: &mut LockedSqliteHandle<'_>) -> sqlx::Error {
    match h.last_error() {
        Some(e) => sqlx::Error::Database(Box::new(e)),
        None => sqlx::Error::Protocol("SQLite failed without an error code".into()),
    }
}
