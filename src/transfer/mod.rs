//! `jobstore import` / `jobstore export`: Flink's `FileSystemJobResultStore` and
//! `FileSystemApplicationResultStore` directories in and out.
//!
//! # The files
//!
//! Flink 2.3 keeps one directory per store (`job-result-store.storage-path`,
//! `application-result-store.storage-path`). An entry is one file: `<id>_DIRTY.json` while
//! dirty, `<id>.json` once clean, with the content `{"result": {...}, "version": 1}`. The
//! job store is keyed by `result.id`, the application store by `result.application-id`.
//!
//! # Import
//!
//! `jobstore import --cluster C DIR` reads every `*.json` file of `DIR`, and of
//! `DIR/job-result-store/` and `DIR/application-result-store/` when those exist (the layout
//! `export` writes, so an export imports back as it is). Other files and folders are
//! ignored (counted in the summary), as Flink ignores them.
//!
//! Symbolic links are followed, as Flink's file system follows them: a link to a regular
//! file is read like that file, a link to a folder named as a store is listed. A `*.json`
//! entry that is not a regular file (a FIFO, a socket, a device, a link to nothing or to
//! one of those) is reported by name and skipped, never opened; a file larger than
//! `--max-file-size` (64 MiB by default) is reported and skipped unread. Files are opened
//! without blocking, checked again through the open handle, and read through a reader
//! bounded at the limit, so a file swapped or grown after the listing cannot hang the
//! import nor fill its memory.
//!
//! Which store a file belongs to is decided by its content, so one folder may hold both
//! (`--kind auto`, the default): a `result` with `application-id` and no `id` is an
//! application result, anything else a job result (a Flink 2.3 job result carries both `id`
//! and `application-id`). `--kind job` or `--kind application` forces one store; a file of
//! the other shape then fails validation.
//!
//! Per file (name state = dirty for `_DIRTY.json`, clean otherwise):
//! - absent from the store: created dirty, then marked clean for a clean file;
//! - present in the same state: nothing changes ("already present");
//! - present dirty, the file clean: marked clean ("marked clean");
//! - present clean, the file dirty: left clean (counted as already present and reported,
//!   since a clean entry never goes back to dirty);
//! - present with a `result` that differs from the file's: the stored one is kept and the
//!   file is reported.
//!
//! So running an import twice changes nothing the second time. A file that cannot be read,
//! is not JSON, fails the validation of the HTTP API, or whose name's id is not the id of
//! its content, is reported by name and skipped; the others load, the summary says how many
//! failed and the exit status is 1. A database error stops the import (exit status 1) after
//! the summary of what was done. Imported entries get the import's time as `created-at`
//! (and `cleaned-at`): Flink's files carry no such times.
//!
//! # Export
//!
//! `jobstore export --cluster C DIR` writes the cluster's entries as Flink files, one folder
//! per store: `DIR/job-result-store/` and `DIR/application-result-store/` (created when
//! missing; `--kind job|application` writes only one of them). Point Flink at them with
//! `job-result-store.storage-path: DIR/job-result-store` and
//! `application-result-store.storage-path: DIR/application-result-store` (the two stores
//! belong together: a Flink 2.3 JobManager that recovers a dirty job whose application is
//! not in its application store fails at start).
//!
//! Each file is written to a temporary file in the same folder, flushed, and renamed over
//! its name, so a reader never sees half a file. The temporary file is created exclusively
//! under a random name (`.<name>.XXXXXX.tmp`), so nothing planted in the folder is
//! followed or overwritten; a store folder that is a symbolic link is refused. Writing `<id>.json` removes an
//! `<id>_DIRTY.json` left by an earlier export (and the other way round): Flink would
//! otherwise see the entry in both states. Other files already in the folders are left in
//! place and reported. Entries are read page by page, ordered by id.

use std::io::{IsTerminal, Write as _};
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::config::DatabaseArgs;
use crate::ids::ClusterId;

mod export;
mod import;
pub mod layout;

pub use export::export;
pub use import::import;
pub use layout::{APPLICATION_DIR, JOB_DIR, file_content, file_name};

/// The default `--max-file-size` of import: 64 MiB, far above Flink's largest result file
/// (a job result with its failure-cause, tens of KB).
pub const DEFAULT_MAX_FILE_SIZE: u64 = 64 * 1024 * 1024;

const IMPORT_HELP: &str = "\
Reads every *.json file of DIR, and of DIR/job-result-store/ and DIR/application-result-store/
when they exist (the layout `jobstore export` writes). <id>_DIRTY.json is a dirty entry,
<id>.json a clean one. With --kind auto (the default) the content decides the store: a result
with `application-id` and no `id` is an application result, anything else a job result.

Idempotent: entries already present are left as they are (a dirty entry whose file is clean is
marked clean; a clean entry whose file is dirty stays clean). A file that cannot be read or
parsed, whose name's id is not its content's id, that is not a regular file (a FIFO, a device,
a symbolic link to nothing) or is larger than --max-file-size, is reported by name and skipped;
the rest load. Symbolic links to regular files and folders are followed. Prints counts (imported dirty, imported clean, marked clean, already present, failed);
the exit status is 1 when any file failed.";

const EXPORT_HELP: &str = "\
Writes DIR/job-result-store/ and DIR/application-result-store/ (or only one of them with
--kind), one file per entry as Flink's FileSystemJobResultStore / FileSystemApplicationResultStore
write them: <id>_DIRTY.json for a dirty entry, <id>.json for a clean one, content
{\"result\": <stored result>, \"version\": 1}. Configure Flink with
job-result-store.storage-path: DIR/job-result-store and
application-result-store.storage-path: DIR/application-result-store.

Files are written atomically (a temporary file created exclusively under a random name, then
a rename), so nothing planted in the folders is followed or overwritten; a store folder that is
a symbolic link is refused. Writing one state's file removes the other state's file of the same
entry; other files already there are left and reported.";

/// Which store the files of an import belong to.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImportKind {
    /// Decide per file: a result with `application-id` and no `id` is an application
    /// result, anything else a job result.
    Auto,
    /// Every file is a job result.
    Job,
    /// Every file is an application result.
    Application,
}

/// Which stores an export writes.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportKind {
    /// DIR/job-result-store/ and DIR/application-result-store/.
    All,
    /// Only DIR/job-result-store/.
    Job,
    /// Only DIR/application-result-store/.
    Application,
}

#[derive(Args, Debug, Clone)]
#[command(after_help = IMPORT_HELP)]
pub struct ImportArgs {
    #[command(flatten)]
    pub db: DatabaseArgs,
    /// The cluster id (Flink's high-availability.cluster-id) the entries belong to.
    #[arg(long)]
    pub cluster: String,
    /// Which store the files belong to (auto: decided by each file's content).
    #[arg(long, value_enum, default_value_t = ImportKind::Auto)]
    pub kind: ImportKind,
    /// Largest file read, in bytes; a larger one is reported and skipped, unread.
    #[arg(long, env = "JOBSTORE_MAX_FILE_SIZE", default_value_t = DEFAULT_MAX_FILE_SIZE)]
    pub max_file_size: u64,
    /// A directory of Flink result-store files.
    pub dir: PathBuf,
}

#[derive(Args, Debug, Clone)]
#[command(after_help = EXPORT_HELP)]
pub struct ExportArgs {
    #[command(flatten)]
    pub db: DatabaseArgs,
    /// The cluster whose entries to write.
    #[arg(long)]
    pub cluster: String,
    /// Which stores to write.
    #[arg(long, value_enum, default_value_t = ExportKind::All)]
    pub kind: ExportKind,
    /// The directory to write Flink result-store files into (created when missing).
    pub dir: PathBuf,
}

pub(crate) fn parse_cluster(cluster: &str) -> anyhow::Result<ClusterId> {
    cluster
        .parse()
        .map_err(|e| anyhow::anyhow!("--cluster {cluster:?}: it {e}"))
}

/// A progress bar on a terminal, nothing elsewhere.
pub(crate) fn progress(len: Option<u64>) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = match len {
        Some(n) => ProgressBar::with_draw_target(Some(n), ProgressDrawTarget::stderr()),
        None => ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr()),
    };
    let style = match len {
        Some(_) => ProgressStyle::with_template("{bar:40} {pos}/{len} files {wide_msg}"),
        None => ProgressStyle::with_template("{spinner} {pos} entries {wide_msg}"),
    };
    if let Ok(style) = style {
        bar.set_style(style);
    }
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

/// Prints a line on stderr without tearing the progress bar.
pub(crate) fn report(bar: &ProgressBar, line: String) {
    bar.suspend(|| {
        let mut err = std::io::stderr().lock();
        let _ = writeln!(err, "{line}");
    });
}
