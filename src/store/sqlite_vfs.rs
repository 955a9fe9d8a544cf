//! The writer's VFS: SQLite's default VFS, with the frames of a commit written to the
//! write-ahead log in one system call instead of two per page.
//!
//! SQLite writes each WAL frame as two `pwrite` calls, its 24-byte header and its page, so a
//! group commit of 17 pages made 34 calls before its one `fsync` (BENCHMARKS.md: on a 2-vCPU
//! virtual machine a frame cost 9.5 µs as two calls, 1.5 µs in one call of 17). This VFS
//! passes every call through to the default VFS ("unix") except the writes of a WAL file:
//! those that continue the previous one are gathered in memory and written as one call when
//! the file is synced, read, sized, truncated, closed or controlled, when a write does not
//! continue them, or when 256 KB have gathered.
//!
//! Why that is safe:
//! - A frame is visible to other connections only once the WAL-index header names it,
//!   which SQLite writes after the commit's `xSync` when the connection's `synchronous` is
//!   FULL: the gathered frames are in the file before any reader can look for them. The
//!   writer is opened with FULL (`sqlite::open`), and only the writer uses this VFS.
//! - The writer's own connection reads a WAL file only through `xRead`, which writes what
//!   has gathered first.
//! - What reaches the disk, and when, is unchanged: nothing is acknowledged before the
//!   `fsync`, and the `fsync` comes after the write. A write that fails is reported by the
//!   call that wrote it (the sync of the commit), so the commit fails as it would have, and
//!   what had gathered is dropped: SQLite writes the next commit's frames over the failed
//!   one's (test: `a_failed_write_fails_its_commit_and_the_committed_rows_stay`, a full disk
//!   below the gathering).

use std::ffi::{CStr, c_char, c_int, c_void};
use std::ptr;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use libsqlite3_sys as ffi;

/// The VFS's name, for `SqliteConnectOptions::vfs`.
pub(crate) const NAME: &str = "jobstore-wal";
const NAME_C: &CStr = c"jobstore-wal";

/// Gathered bytes that are written at once, whatever comes next.
const GATHER_LIMIT: usize = 256 * 1024;

/// The most one call to the default VFS writes: its `xWrite` passes at most 0x1ffff bytes
/// to one `pwrite` (`seekAndWriteFd` masks the length to 17 bits; 128 KB becomes 0 bytes,
/// which SQLite reports as a full disk), so the gathered bytes go in pieces of 124 KB.
const MAX_WRITE: usize = 0x1f000;

/// Writes to WAL files asked of this VFS, and the calls that reached the default VFS for
/// them: for tests and the bench.
static WAL_WRITES_ASKED: AtomicU64 = AtomicU64::new(0);
static WAL_WRITES_MADE: AtomicU64 = AtomicU64::new(0);

/// (writes asked, writes made) to WAL files through this VFS since the process started.
#[cfg(test)]
fn wal_writes() -> (u64, u64) {
    (
        WAL_WRITES_ASKED.load(Ordering::Relaxed),
        WAL_WRITES_MADE.load(Ordering::Relaxed),
    )
}

/// Registers the VFS (once; not as the default). Fails when SQLite has no default VFS.
pub(crate) fn register() -> anyhow::Result<()> {
    static REGISTERED: OnceLock<Result<(), String>> = OnceLock::new();
    REGISTERED
        .get_or_init(|| {
            // SAFETY: sqlite3_vfs_find and sqlite3_vfs_register are thread-safe once SQLite
            // is initialized (sqlite3_initialize is idempotent); the registered struct is
            // leaked, so it lives as long as the process.
            unsafe {
                if ffi::sqlite3_initialize() != ffi::SQLITE_OK {
                    return Err("SQLite could not be initialized".into());
                }
                let inner = ffi::sqlite3_vfs_find(ptr::null());
                if inner.is_null() {
                    return Err("SQLite has no default VFS".into());
                }
                let vfs = Box::leak(Box::new(ffi::sqlite3_vfs {
                    iVersion: (*inner).iVersion.min(3),
                    szOsFile: (std::mem::size_of::<File>() as c_int) + (*inner).szOsFile,
                    mxPathname: (*inner).mxPathname,
                    pNext: ptr::null_mut(),
                    zName: NAME_C.as_ptr(),
                    pAppData: inner.cast(),
                    xOpen: Some(open),
                    xDelete: Some(delete),
                    xAccess: Some(access),
                    xFullPathname: Some(full_pathname),
                    xDlOpen: Some(dl_open),
                    xDlError: Some(dl_error),
                    xDlSym: Some(dl_sym),
                    xDlClose: Some(dl_close),
                    xRandomness: Some(randomness),
                    xSleep: Some(sleep),
                    xCurrentTime: Some(current_time),
                    xGetLastError: Some(get_last_error),
                    xCurrentTimeInt64: Some(current_time_int64),
                    xSetSystemCall: None,
                    xGetSystemCall: None,
                    xNextSystemCall: None,
                }));
                if (*inner).xCurrentTimeInt64.is_none() {
                    vfs.xCurrentTimeInt64 = None;
                }
                match ffi::sqlite3_vfs_register(vfs, 0) {
                    ffi::SQLITE_OK => Ok(()),
                    rc => Err(format!("registering SQLite's VFS {NAME} failed: code {rc}")),
                }
            }
        })
        .clone()
        .map_err(anyhow::Error::msg)
}

/// An open file: the default VFS's file follows this struct in the same allocation
/// (`szOsFile` is the sum of both).
#[repr(C)]
struct File {
    /// SQLite's part: the methods.
    base: ffi::sqlite3_file,
    /// The default VFS's file, right after this struct.
    inner: *mut ffi::sqlite3_file,
    /// A WAL file's gathered writes (null for every other file).
    gather: *mut Gather,
}

/// Writes that continue each other, not yet made: `bytes` belong at `offset`.
struct Gather {
    offset: i64,
    bytes: Vec<u8>,
    /// Tests: the WAL file's path, for [`tests::full_past`].
    #[cfg(test)]
    path: String,
}

/// The default VFS, kept in our VFS's `pAppData`.
unsafe fn inner_vfs(vfs: *mut ffi::sqlite3_vfs) -> *mut ffi::sqlite3_vfs {
    // SAFETY: pAppData was set to the default VFS at registration.
    unsafe { (*vfs).pAppData.cast() }
}

unsafe fn file<'a>(f: *mut ffi::sqlite3_file) -> &'a mut File {
    // SAFETY: every file SQLite hands our methods was opened by `open`, a `File`.
    unsafe { &mut *f.cast::<File>() }
}

/// The inner file's method `$m`, called with `$args`.
macro_rules! inner {
    ($f:expr, $m:ident $(, $arg:expr)*) => {{
        let inner = $f.inner;
        // SAFETY: the inner file is open (its methods are set) while ours is.
        match unsafe { (*(*inner).pMethods).$m } {
            Some(m) => unsafe { m(inner $(, $arg)*) },
            None => ffi::SQLITE_IOERR,
        }
    }};
}

/// Writes what has gathered, if anything.
fn flush(f: &mut File) -> c_int {
    if f.gather.is_null() {
        return ffi::SQLITE_OK;
    }
    // SAFETY: a WAL file's gather lives until its close.
    let g = unsafe { &mut *f.gather };
    if g.bytes.is_empty() {
        return ffi::SQLITE_OK;
    }
    let mut rc = ffi::SQLITE_OK;
    let mut offset = g.offset;
    for piece in g.bytes.chunks(MAX_WRITE) {
        #[cfg(test)]
        if let Some(limit) = tests::full_past(&g.path)
            && offset + piece.len() as i64 > limit
        {
            // A full disk, as the default VFS meets one: what fits is written, then the
            // write fails.
            let room = (limit - offset).clamp(0, piece.len() as i64) as usize;
            if room > 0 {
                let _ = inner!(f, xWrite, piece.as_ptr().cast(), room as c_int, offset);
            }
            rc = ffi::SQLITE_FULL;
            break;
        }
        WAL_WRITES_MADE.fetch_add(1, Ordering::Relaxed);
        rc = inner!(
            f,
            xWrite,
            piece.as_ptr().cast(),
            piece.len() as c_int,
            offset
        );
        if rc != ffi::SQLITE_OK {
            break;
        }
        offset += piece.len() as i64;
    }
    g.bytes.clear();
    rc
}

unsafe extern "C" fn open(
    vfs: *mut ffi::sqlite3_vfs, name: ffi::sqlite3_filename, f: *mut ffi::sqlite3_file,
    flags: c_int, out_flags: *mut c_int,
) -> c_int {
    // SAFETY: SQLite gives `szOsFile` bytes at `f`, aligned for a pointer; the inner file
    // takes the bytes after our struct, whose size is a multiple of the pointer's.
    unsafe {
        let inner = inner_vfs(vfs);
        let ours = f.cast::<File>();
        let inner_file = f.cast::<u8>().add(std::mem::size_of::<File>()).cast();
        ptr::write(
            ours,
            File {
                base: ffi::sqlite3_file {
                    pMethods: ptr::null(),
                },
                inner: inner_file,
                gather: ptr::null_mut(),
            },
        );
        let Some(inner_open) = (*inner).xOpen else {
            return ffi::SQLITE_CANTOPEN;
        };
        let rc = inner_open(inner, name, inner_file, flags, out_flags);
        if rc != ffi::SQLITE_OK {
            // SQLite closes nothing whose methods are null (ours are): the inner file is
            // closed here if its VFS wants that of a failed open.
            let methods = (*inner_file).pMethods;
            if !methods.is_null()
                && let Some(close) = (*methods).xClose
            {
                close(inner_file);
            }
            return rc;
        }
        if (*inner_file).pMethods.is_null() {
            return ffi::SQLITE_CANTOPEN;
        }
        if flags & ffi::SQLITE_OPEN_WAL != 0 {
            (*ours).gather = Box::into_raw(Box::new(Gather {
                offset: 0,
                bytes: Vec::new(),
                #[cfg(test)]
                path: if name.is_null() {
                    String::new()
                } else {
                    CStr::from_ptr(name).to_string_lossy().into_owned()
                },
            }));
        }
        (*ours).base.pMethods = &METHODS;
        ffi::SQLITE_OK
    }
}

static METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
    iVersion: 3,
    xClose: Some(close),
    xRead: Some(read),
    xWrite: Some(write),
    xTruncate: Some(truncate),
    xSync: Some(sync),
    xFileSize: Some(file_size),
    xLock: Some(lock),
    xUnlock: Some(unlock),
    xCheckReservedLock: Some(check_reserved_lock),
    xFileControl: Some(file_control),
    xSectorSize: Some(sector_size),
    xDeviceCharacteristics: Some(device_characteristics),
    xShmMap: Some(shm_map),
    xShmLock: Some(shm_lock),
    xShmBarrier: Some(shm_barrier),
    xShmUnmap: Some(shm_unmap),
    xFetch: Some(fetch),
    xUnfetch: Some(unfetch),
};

unsafe extern "C" fn close(f: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: SQLite closes a file once; the gather is freed here, once.
    let f = unsafe { file(f) };
    let flushed = flush(f);
    let rc = inner!(f, xClose);
    if !f.gather.is_null() {
        drop(unsafe { Box::from_raw(f.gather) });
        f.gather = ptr::null_mut();
    }
    if flushed != ffi::SQLITE_OK {
        flushed
    } else {
        rc
    }
}

unsafe extern "C" fn read(
    f: *mut ffi::sqlite3_file, buf: *mut c_void, n: c_int, off: i64,
) -> c_int {
    let f = unsafe { file(f) };
    let rc = flush(f);
    if rc != ffi::SQLITE_OK {
        return rc;
    }
    inner!(f, xRead, buf, n, off)
}

unsafe extern "C" fn write(
    f: *mut ffi::sqlite3_file, buf: *const c_void, n: c_int, off: i64,
) -> c_int {
    let f = unsafe { file(f) };
    if f.gather.is_null() || n <= 0 {
        return inner!(f, xWrite, buf, n, off);
    }
    WAL_WRITES_ASKED.fetch_add(1, Ordering::Relaxed);
    // SAFETY: a WAL file's gather lives until its close.
    let g = unsafe { &mut *f.gather };
    if !g.bytes.is_empty() && off != g.offset + g.bytes.len() as i64 {
        let rc = flush(f);
        if rc != ffi::SQLITE_OK {
            return rc;
        }
    }
    let g = unsafe { &mut *f.gather };
    if g.bytes.is_empty() {
        g.offset = off;
    }
    // SAFETY: SQLite passes `n` readable bytes at `buf`.
    g.bytes
        .extend_from_slice(unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), n as usize) });
    if g.bytes.len() >= GATHER_LIMIT {
        return flush(f);
    }
    ffi::SQLITE_OK
}

unsafe extern "C" fn truncate(f: *mut ffi::sqlite3_file, size: i64) -> c_int {
    let f = unsafe { file(f) };
    let rc = flush(f);
    if rc != ffi::SQLITE_OK {
        return rc;
    }
    inner!(f, xTruncate, size)
}

unsafe extern "C" fn sync(f: *mut ffi::sqlite3_file, flags: c_int) -> c_int {
    let f = unsafe { file(f) };
    let rc = flush(f);
    if rc != ffi::SQLITE_OK {
        return rc;
    }
    inner!(f, xSync, flags)
}

unsafe extern "C" fn file_size(f: *mut ffi::sqlite3_file, size: *mut i64) -> c_int {
    let f = unsafe { file(f) };
    let rc = flush(f);
    if rc != ffi::SQLITE_OK {
        return rc;
    }
    inner!(f, xFileSize, size)
}

unsafe extern "C" fn lock(f: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    let f = unsafe { file(f) };
    inner!(f, xLock, level)
}

unsafe extern "C" fn unlock(f: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    let f = unsafe { file(f) };
    inner!(f, xUnlock, level)
}

unsafe extern "C" fn check_reserved_lock(f: *mut ffi::sqlite3_file, out: *mut c_int) -> c_int {
    let f = unsafe { file(f) };
    inner!(f, xCheckReservedLock, out)
}

unsafe extern "C" fn file_control(f: *mut ffi::sqlite3_file, op: c_int, arg: *mut c_void) -> c_int {
    let f = unsafe { file(f) };
    let rc = flush(f);
    if rc != ffi::SQLITE_OK {
        return rc;
    }
    inner!(f, xFileControl, op, arg)
}

unsafe extern "C" fn sector_size(f: *mut ffi::sqlite3_file) -> c_int {
    let f = unsafe { file(f) };
    let inner = f.inner;
    match unsafe { (*(*inner).pMethods).xSectorSize } {
        Some(m) => unsafe { m(inner) },
        None => 4096,
    }
}

unsafe extern "C" fn device_characteristics(f: *mut ffi::sqlite3_file) -> c_int {
    let f = unsafe { file(f) };
    let inner = f.inner;
    match unsafe { (*(*inner).pMethods).xDeviceCharacteristics } {
        Some(m) => unsafe { m(inner) },
        None => 0,
    }
}

unsafe extern "C" fn shm_map(
    f: *mut ffi::sqlite3_file, page: c_int, size: c_int, extend: c_int, out: *mut *mut c_void,
) -> c_int {
    let f = unsafe { file(f) };
    inner!(f, xShmMap, page, size, extend, out)
}

unsafe extern "C" fn shm_lock(
    f: *mut ffi::sqlite3_file, offset: c_int, n: c_int, flags: c_int,
) -> c_int {
    let f = unsafe { file(f) };
    inner!(f, xShmLock, offset, n, flags)
}

unsafe extern "C" fn shm_barrier(f: *mut ffi::sqlite3_file) {
    let f = unsafe { file(f) };
    let inner = f.inner;
    if let Some(m) = unsafe { (*(*inner).pMethods).xShmBarrier } {
        unsafe { m(inner) }
    }
}

unsafe extern "C" fn shm_unmap(f: *mut ffi::sqlite3_file, delete: c_int) -> c_int {
    let f = unsafe { file(f) };
    inner!(f, xShmUnmap, delete)
}

unsafe extern "C" fn fetch(
    f: *mut ffi::sqlite3_file, off: i64, n: c_int, out: *mut *mut c_void,
) -> c_int {
    let f = unsafe { file(f) };
    let rc = flush(f);
    if rc != ffi::SQLITE_OK {
        return rc;
    }
    if unsafe { (*(*f.inner).pMethods).iVersion } < 3 {
        // SAFETY: `out` is where SQLite reads the mapping; none means "read instead".
        unsafe { *out = ptr::null_mut() };
        return ffi::SQLITE_OK;
    }
    inner!(f, xFetch, off, n, out)
}

unsafe extern "C" fn unfetch(f: *mut ffi::sqlite3_file, off: i64, p: *mut c_void) -> c_int {
    let f = unsafe { file(f) };
    if unsafe { (*(*f.inner).pMethods).iVersion } < 3 {
        return ffi::SQLITE_OK;
    }
    inner!(f, xUnfetch, off, p)
}

// The VFS's other methods: the default VFS's, called with the default VFS.

unsafe extern "C" fn delete(
    vfs: *mut ffi::sqlite3_vfs, name: *const c_char, sync_dir: c_int,
) -> c_int {
    let inner = unsafe { inner_vfs(vfs) };
    match unsafe { (*inner).xDelete } {
        Some(m) => unsafe { m(inner, name, sync_dir) },
        None => ffi::SQLITE_IOERR_DELETE,
    }
}

unsafe extern "C" fn access(
    vfs: *mut ffi::sqlite3_vfs, name: *const c_char, flags: c_int, out: *mut c_int,
) -> c_int {
    let inner = unsafe { inner_vfs(vfs) };
    match unsafe { (*inner).xAccess } {
        Some(m) => unsafe { m(inner, name, flags, out) },
        None => ffi::SQLITE_IOERR_ACCESS,
    }
}

unsafe extern "C" fn full_pathname(
    vfs: *mut ffi::sqlite3_vfs, name: *const c_char, n: c_int, out: *mut c_char,
) -> c_int {
    let inner = unsafe { inner_vfs(vfs) };
    match unsafe { (*inner).xFullPathname } {
        Some(m) => unsafe { m(inner, name, n, out) },
        None => ffi::SQLITE_CANTOPEN,
    }
}

unsafe extern "C" fn dl_open(vfs: *mut ffi::sqlite3_vfs, name: *const c_char) -> *mut c_void {
    let inner = unsafe { inner_vfs(vfs) };
    match unsafe { (*inner).xDlOpen } {
        Some(m) => unsafe { m(inner, name) },
        None => ptr::null_mut(),
    }
}

unsafe extern "C" fn dl_error(vfs: *mut ffi::sqlite3_vfs, n: c_int, out: *mut c_char) {
    let inner = unsafe { inner_vfs(vfs) };
    if let Some(m) = unsafe { (*inner).xDlError } {
        unsafe { m(inner, n, out) }
    }
}

type DlSym = Option<unsafe extern "C" fn(*mut ffi::sqlite3_vfs, *mut c_void, *const c_char)>;

unsafe extern "C" fn dl_sym(
    vfs: *mut ffi::sqlite3_vfs, handle: *mut c_void, name: *const c_char,
) -> DlSym {
    let inner = unsafe { inner_vfs(vfs) };
    match unsafe { (*inner).xDlSym } {
        Some(m) => unsafe { m(inner, handle, name) },
        None => None,
    }
}

unsafe extern "C" fn dl_close(vfs: *mut ffi::sqlite3_vfs, handle: *mut c_void) {
    let inner = unsafe { inner_vfs(vfs) };
    if let Some(m) = unsafe { (*inner).xDlClose } {
        unsafe { m(inner, handle) }
    }
}

unsafe extern "C" fn randomness(vfs: *mut ffi::sqlite3_vfs, n: c_int, out: *mut c_char) -> c_int {
    let inner = unsafe { inner_vfs(vfs) };
    match unsafe { (*inner).xRandomness } {
        Some(m) => unsafe { m(inner, n, out) },
        None => 0,
    }
}

unsafe extern "C" fn sleep(vfs: *mut ffi::sqlite3_vfs, micros: c_int) -> c_int {
    let inner = unsafe { inner_vfs(vfs) };
    match unsafe { (*inner).xSleep } {
        Some(m) => unsafe { m(inner, micros) },
        None => 0,
    }
}

unsafe extern "C" fn current_time(vfs: *mut ffi::sqlite3_vfs, out: *mut f64) -> c_int {
    let inner = unsafe { inner_vfs(vfs) };
    match unsafe { (*inner).xCurrentTime } {
        Some(m) => unsafe { m(inner, out) },
        None => ffi::SQLITE_ERROR,
    }
}

unsafe extern "C" fn get_last_error(
    vfs: *mut ffi::sqlite3_vfs, n: c_int, out: *mut c_char,
) -> c_int {
    let inner = unsafe { inner_vfs(vfs) };
    match unsafe { (*inner).xGetLastError } {
        Some(m) => unsafe { m(inner, n, out) },
        None => 0,
    }
}

unsafe extern "C" fn current_time_int64(vfs: *mut ffi::sqlite3_vfs, out: *mut i64) -> c_int {
    let inner = unsafe { inner_vfs(vfs) };
    match unsafe { (*inner).xCurrentTimeInt64 } {
        Some(m) => unsafe { m(inner, out) },
        None => ffi::SQLITE_ERROR,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlx::sqlite::{
        SqliteConnectOptions, SqliteConnection, SqliteJournalMode, SqliteSynchronous,
    };
    use sqlx::{ConnectOptions, Connection, Executor};
    use std::sync::Mutex;

    /// WAL files (by path) whose writes fail past a size, as on a full disk.
    static FULL: Mutex<Vec<(String, i64)>> = Mutex::new(Vec::new());

    /// The size past which writes to the WAL file at `path` fail, if a test set one.
    pub(super) fn full_past(path: &str) -> Option<i64> {
        let full = FULL.lock().unwrap_or_else(|e| e.into_inner());
        full.iter().find(|(p, _)| p == path).map(|&(_, n)| n)
    }

    fn set_full_past(path: &str, limit: Option<i64>) {
        let mut full = FULL.lock().unwrap_or_else(|e| e.into_inner());
        full.retain(|(p, _)| p != path);
        if let Some(n) = limit {
            full.push((path.to_string(), n));
        }
    }

    /// A fresh database in a folder of its own, in WAL mode with `synchronous=FULL`, with a
    /// table `t (k, v)`: a writer on this VFS with one more pragma, and a reader on the
    /// default VFS.
    struct Db {
        dir: std::path::PathBuf,
        options: SqliteConnectOptions,
        writer: SqliteConnection,
        reader: SqliteConnection,
    }

    impl Db {
        async fn new(pragma: &'static str, value: &'static str) -> Db {
            register().unwrap();
            let dir = std::env::temp_dir().join(format!("jobstore-vfs-{}", uuid::Uuid::new_v4()));
            std::fs::create_dir_all(&dir).unwrap();
            let options = SqliteConnectOptions::new()
                .filename(dir.join("t.db"))
                .create_if_missing(true)
                .journal_mode(SqliteJournalMode::Wal)
                .synchronous(SqliteSynchronous::Full);
            let mut writer = options
                .clone()
                .vfs(NAME)
                .pragma(pragma, value)
                .connect()
                .await
                .unwrap();
            let reader = options.clone().connect().await.unwrap();
            writer
                .execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v BLOB NOT NULL)")
                .await
                .unwrap();
            Db {
                dir,
                options,
                writer,
                reader,
            }
        }

        /// The path of the database's WAL file.
        fn wal(&self) -> String {
            format!("{}-wal", self.dir.join("t.db").display())
        }

        /// Closes both connections, then reads the file alone on the default VFS (the WAL
        /// recovered and checkpointed): `integrity_check` must say ok; the keys of `t` in
        /// order and the sum of the values' lengths. The folder is removed.
        async fn close_and_read(self) -> (Vec<i64>, i64) {
            self.writer.close().await.unwrap();
            self.reader.close().await.unwrap();
            let mut check = self.options.connect().await.unwrap();
            let verdict: String = sqlx::query_scalar("PRAGMA integrity_check")
                .fetch_one(&mut check)
                .await
                .unwrap();
            assert_eq!(verdict, "ok");
            let keys = rows(&mut check).await;
            let bytes: i64 = sqlx::query_scalar("SELECT coalesce(sum(length(v)), 0) FROM t")
                .fetch_one(&mut check)
                .await
                .unwrap();
            check.close().await.unwrap();
            std::fs::remove_dir_all(&self.dir).unwrap();
            (keys, bytes)
        }
    }

    /// The keys of `t`, in order.
    async fn rows(conn: &mut SqliteConnection) -> Vec<i64> {
        sqlx::query_scalar("SELECT k FROM t ORDER BY k")
            .fetch_all(conn)
            .await
            .unwrap()
    }

    /// A write that fails below the gathering (a full disk) fails its commit, and the
    /// commits before it stay whole: SQLite reports the failure at the commit's sync, where
    /// the gathered frames are written; the commit's rows are not visible, nor in the file
    /// afterwards; the gathered bytes of the failed commit are dropped, so that the commits
    /// once the disk has room again are whole too.
    #[tokio::test]
    async fn a_failed_write_fails_its_commit_and_the_committed_rows_stay() {
        // No checkpoints: the WAL only grows, to the limit.
        let mut db = Db::new("wal_autocheckpoint", "0").await;
        let wal = db.wal();
        // One transaction of 20 rows of 1 KB: Ok(()) once committed, Err(code) of the
        // statement that failed, with "insert" or "commit".
        async fn round(
            writer: &mut SqliteConnection, round: i64,
        ) -> Result<(), (&'static str, String)> {
            let code = |e: sqlx::Error| {
                e.as_database_error()
                    .and_then(|d| d.code())
                    .map(|c| c.into_owned())
                    .unwrap_or_else(|| e.to_string())
            };
            writer.execute("BEGIN IMMEDIATE").await.unwrap();
            for i in 0..20 {
                if let Err(e) = sqlx::query("INSERT INTO t (k, v) VALUES (?, randomblob(1000))")
                    .bind(round * 100 + i)
                    .execute(&mut *writer)
                    .await
                {
                    let _ = writer.execute("ROLLBACK").await;
                    return Err(("insert", code(e)));
                }
            }
            match writer.execute("COMMIT").await {
                Ok(_) => Ok(()),
                Err(e) => {
                    // Rolled back, if SQLite has not done so itself.
                    let _ = writer.execute("ROLLBACK").await;
                    Err(("commit", code(e)))
                }
            }
        }
        let keys = |rounds: &[i64]| -> Vec<i64> {
            rounds
                .iter()
                .flat_map(|r| (0..20).map(move |i| r * 100 + i))
                .collect()
        };

        // The disk holds 300 KB of WAL: about 12 commits of 20 pages.
        set_full_past(&wal, Some(300 * 1024));
        let mut committed = Vec::new();
        let mut failed = None;
        for r in 0..100 {
            match round(&mut db.writer, r).await {
                Ok(()) => committed.push(r),
                Err(e) => {
                    failed = Some((r, e));
                    break;
                }
            }
        }
        let (failed_round, (at, code)) = failed.expect("the WAL reached the limit");
        assert!(
            committed.len() >= 5,
            "{} commits before the limit",
            committed.len()
        );
        // SQLITE_FULL (13), reported by the commit: the rows' statements gathered their
        // spilled frames or none, the commit's sync wrote them.
        assert_eq!((at, code.as_str()), ("commit", "13"));
        assert_eq!(rows(&mut db.reader).await, keys(&committed));
        // Full still: the next commit fails as well, and changes nothing.
        assert!(round(&mut db.writer, failed_round + 1).await.is_err());
        assert_eq!(rows(&mut db.reader).await, keys(&committed));

        // Room again: the writer commits, and the failed commits' bytes never reach the
        // file.
        set_full_past(&wal, None);
        for r in failed_round + 2..failed_round + 7 {
            round(&mut db.writer, r).await.unwrap();
            committed.push(r);
        }
        assert_eq!(rows(&mut db.reader).await, keys(&committed));
        // The file alone afterwards: whole, and exactly the committed rows in it.
        assert_eq!(
            db.close_and_read().await,
            (keys(&committed), committed.len() as i64 * 20 * 1000)
        );
    }

    /// The gathering, on a real file: a WAL's frames of one commit reach the default VFS in
    /// one write, and another connection (on the default VFS) reads every committed row.
    #[tokio::test]
    async fn a_commits_frames_are_one_write_and_readers_see_them() {
        // A page cache of 10 pages: the large transactions spill frames to the WAL before
        // their commit and read them back (`xRead` after gathered writes).
        let mut db = Db::new("cache_size", "10").await;
        // Commits of 50 rows (about 13 pages), and every fifth of 400 rows (about 100 pages,
        // more than one call of the default VFS takes and more than the gathering holds);
        // round 7 rolls back.
        let mut total = 0i64;
        for round in 0..20i64 {
            let rows = if round % 5 == 4 || round == 7 {
                400
            } else {
                50
            };
            let (asked, made) = wal_writes();
            let mut tx = db.writer.begin().await.unwrap();
            for i in 0..rows {
                sqlx::query("INSERT INTO t (k, v) VALUES (?, randomblob(1000))")
                    .bind(round * 1000 + i)
                    .execute(&mut *tx)
                    .await
                    .unwrap();
            }
            if round == 7 {
                tx.rollback().await.unwrap();
                continue;
            }
            tx.commit().await.unwrap();
            let (asked2, made2) = wal_writes();
            // Other tests may write through the VFS at the same time: only bounds hold.
            assert!(
                asked2 - asked >= 2 * 12,
                "50 rows of 1 KB are at least 12 pages, 2 writes each"
            );
            let n: i64 = sqlx::query_scalar("SELECT count(*) FROM t")
                .fetch_one(&mut db.reader)
                .await
                .unwrap();
            total += rows;
            assert_eq!(n, total);
            assert!(made2 > made, "the commit wrote");
        }
        let (asked, made) = wal_writes();
        assert!(made * 4 <= asked, "{made} writes made for {asked} asked");
        let rolled_back: i64 = sqlx::query_scalar("SELECT count(*) FROM t WHERE k / 1000 = 7")
            .fetch_one(&mut db.reader)
            .await
            .unwrap();
        assert_eq!(rolled_back, 0);
        // The file alone afterwards: whole and every row in it.
        let (keys, bytes) = db.close_and_read().await;
        assert_eq!((keys.len() as i64, bytes), (total, total * 1000));
    }
}
