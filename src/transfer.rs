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

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::io::{IsTerminal, Write as _};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::Value;

use crate::cli::DatabaseArgs;
use crate::ids::{ClusterId, HexId};
use crate::store::{self, Page, ResultEntry, ResultState, StateFilter, Store, StoreError};
use crate::wire::{self, ResultKind};

/// The folder of the job result store inside an export (and an import) directory.
pub const JOB_DIR: &str = "job-result-store";
/// The folder of the application result store inside an export (and an import) directory.
pub const APPLICATION_DIR: &str = "application-result-store";
/// How many entries one listing query of `export` reads.
const EXPORT_PAGE: u32 = 1000;
/// How many files `export` writes at once.
const EXPORT_WRITERS: usize = 8;
/// The default `--max-file-size` of import: 64 MiB, far above Flink's largest result file
/// (a job result with its failure-cause, tens of KB).
pub const DEFAULT_MAX_FILE_SIZE: u64 = 64 * 1024 * 1024;
/// Flink's suffix of a dirty entry's file.
const DIRTY_SUFFIX: &str = "_DIRTY.json";
const JSON_SUFFIX: &str = ".json";

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

fn parse_cluster(cluster: &str) -> anyhow::Result<ClusterId> {
    cluster
        .parse()
        .map_err(|e| anyhow::anyhow!("--cluster {cluster:?}: it {e}"))
}

/// A progress bar on a terminal, nothing elsewhere.
fn progress(len: Option<u64>) -> ProgressBar {
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
fn report(bar: &ProgressBar, line: String) {
    bar.suspend(|| {
        let mut err = std::io::stderr().lock();
        let _ = writeln!(err, "{line}");
    });
}

// ---------------------------------------------------------------------------------------
// Import

/// One file to import: its path and the name it is reported by (relative to DIR), or why
/// it cannot be (found while listing: not a regular file, a link to nothing, ...).
struct Candidate {
    path: PathBuf,
    display: String,
    problem: Option<String>,
}

/// The files of an import directory, sorted by their reported name, and how many entries
/// were ignored.
fn collect_files(dir: &Path) -> anyhow::Result<(Vec<Candidate>, usize)> {
    let mut files = Vec::new();
    let mut ignored = 0;
    scan_dir(dir, "", true, &mut files, &mut ignored)
        .with_context(|| format!("cannot list {}", dir.display()))?;
    files.sort_by(|a, b| a.display.cmp(&b.display));
    Ok((files, ignored))
}

/// What a directory entry is, with symbolic links followed (as Flink's file system does).
enum EntryType {
    Dir,
    File,
    /// Anything else (a FIFO, a socket, a device, a link to nothing, an unreadable entry):
    /// why, in words.
    Other(String),
}

fn entry_type(item: &std::fs::DirEntry) -> EntryType {
    // The listing's own type: no system call, and a FIFO is never opened to find out.
    let own = match item.file_type() {
        Ok(t) => t,
        Err(e) => return EntryType::Other(format!("cannot inspect it: {e}")),
    };
    let (ty, link) = if own.is_symlink() {
        match std::fs::metadata(item.path()) {
            Ok(meta) => (meta.file_type(), " a symbolic link to"),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return EntryType::Other("a symbolic link to nothing (dangling)".to_owned());
            }
            Err(e) => {
                return EntryType::Other(format!("a symbolic link that cannot be followed: {e}"));
            }
        }
    } else {
        (own, "")
    };
    if ty.is_dir() {
        EntryType::Dir
    } else if ty.is_file() {
        EntryType::File
    } else {
        EntryType::Other(format!("not a regular file but{link} {}", describe(ty)))
    }
}

fn describe(ty: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt as _;
    if ty.is_fifo() {
        "a FIFO"
    } else if ty.is_socket() {
        "a socket"
    } else if ty.is_char_device() {
        "a character device"
    } else if ty.is_block_device() {
        "a block device"
    } else {
        "something else"
    }
}

fn scan_dir(
    dir: &Path,
    prefix: &str,
    top: bool,
    files: &mut Vec<Candidate>,
    ignored: &mut usize,
) -> std::io::Result<()> {
    for item in std::fs::read_dir(dir)? {
        let item = item?;
        let name = item.file_name().to_string_lossy().into_owned();
        let path = item.path();
        let display = format!("{prefix}{name}");
        match entry_type(&item) {
            EntryType::Dir if top && (name == JOB_DIR || name == APPLICATION_DIR) => {
                // A subfolder that cannot be listed is reported; the rest still loads.
                if let Err(e) = scan_dir(&path, &format!("{display}/"), false, files, ignored) {
                    files.push(Candidate {
                        path,
                        display: format!("{display}/"),
                        problem: Some(format!("cannot list it: {e}")),
                    });
                }
            }
            EntryType::File if name.ends_with(JSON_SUFFIX) => files.push(Candidate {
                path,
                display,
                problem: None,
            }),
            // A `*.json` name that is no regular file is reported, never opened.
            EntryType::Other(why) if name.ends_with(JSON_SUFFIX) => files.push(Candidate {
                path,
                display,
                problem: Some(why),
            }),
            _ => *ignored += 1,
        }
    }
    Ok(())
}

/// Reads a regular file of at most `limit` bytes. The file is opened without blocking (a
/// FIFO swapped in after the listing does not hang the import), checked to be a regular
/// file through its open handle, and read through a reader bounded at `limit + 1` bytes,
/// so a file that grows while it is read cannot bring more than that into memory.
fn read_bounded(path: &Path, limit: u64) -> Result<Vec<u8>, String> {
    use std::io::Read as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| format!("cannot read it: {e}"))?;
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot read it: {e}"))?;
    if !meta.is_file() {
        return Err(format!(
            "not a regular file but {}",
            describe(meta.file_type())
        ));
    }
    let too_big =
        |size: String| format!("it is {size} bytes, more than --max-file-size {limit}: not read");
    if meta.len() > limit {
        return Err(too_big(meta.len().to_string()));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read it: {e}"))?;
    if bytes.len() as u64 > limit {
        return Err(too_big(format!("more than {limit} (it grew while read)")));
    }
    Ok(bytes)
}

/// The id and state a file name says: `<id>.json` or `<id>_DIRTY.json`.
fn parse_file_name(name: &str) -> Option<(HexId, ResultState)> {
    let (stem, state) = match name.strip_suffix(DIRTY_SUFFIX) {
        Some(stem) => (stem, ResultState::Dirty),
        None => (name.strip_suffix(JSON_SUFFIX)?, ResultState::Clean),
    };
    Some((stem.parse().ok()?, state))
}

/// A file read, parsed and validated.
struct Parsed {
    kind: ResultKind,
    id: HexId,
    state: ResultState,
    result: Value,
}

fn detect_kind(value: &Value) -> ResultKind {
    let result = value.get("result").and_then(Value::as_object);
    match result {
        Some(r) if r.contains_key("application-id") && !r.contains_key("id") => {
            ResultKind::Application
        }
        _ => ResultKind::Job,
    }
}

fn read_file(candidate: &Candidate, forced: ImportKind, limit: u64) -> Result<Parsed, String> {
    if let Some(problem) = &candidate.problem {
        return Err(problem.clone());
    }
    let file_name = candidate
        .path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let (name_id, state) = parse_file_name(&file_name).ok_or_else(|| {
        "the name is not <id>.json or <id>_DIRTY.json with a 32-hex-character id".to_owned()
    })?;
    let bytes = read_bounded(&candidate.path, limit)?;
    let value: Value =
        serde_json::from_slice(&bytes).map_err(|e| format!("it is not valid JSON: {e}"))?;
    let kind = match forced {
        ImportKind::Auto => detect_kind(&value),
        ImportKind::Job => ResultKind::Job,
        ImportKind::Application => ResultKind::Application,
    };
    let (id, result) = wire::parse_envelope(kind, value)
        .map_err(|e| format!("it is not a Flink {} result file: {e}", kind.noun()))?;
    if id != name_id {
        return Err(format!(
            "the name says {noun} {name_id} but the content is {noun} {id}",
            noun = kind.noun()
        ));
    }
    Ok(Parsed {
        kind,
        id,
        state,
        result,
    })
}

/// What happened to one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Imported {
    Dirty,
    Clean,
    MarkedClean,
    AlreadyPresent,
}

/// Something about an entry already present that the operator should hear.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Note {
    /// The stored `result` is not the file's (the stored one is kept).
    Differs,
    /// The entry is clean in the store and the file is dirty (it stays clean).
    KeptClean,
}

impl Note {
    fn text(self, kind: ResultKind, id: HexId) -> String {
        let noun = kind.noun();
        match self {
            Note::Differs => format!(
                "the stored result of {noun} {id} differs from the file's; the stored one is kept"
            ),
            Note::KeptClean => {
                format!("{noun} {id} is clean in the store and dirty in the file: left clean")
            }
        }
    }
}

/// The counts an import prints.
#[derive(Debug, Default)]
struct ImportCounts {
    imported_dirty: usize,
    imported_clean: usize,
    marked_clean: usize,
    already_present: usize,
    failed: Vec<String>,
    jobs: usize,
    applications: usize,
    /// Files whose stored result differs from theirs (the stored one was kept).
    differing: usize,
    /// Dirty files of entries that are clean in the store (left clean).
    kept_clean: usize,
}

/// Brings one parsed file into the store. `Err` is a database failure, which stops the
/// import; notes for the operator go to `notes`.
async fn import_one(
    store: &dyn Store,
    cluster: &ClusterId,
    file: &Parsed,
    notes: &mut Vec<Note>,
) -> Result<Imported, StoreError> {
    let (kind, id) = (file.kind, file.id);
    let mut existing = store.get_result(kind, cluster, id).await?;
    if existing.is_none() {
        // One statement in the file's state: a clean file is never seen dirty.
        match store
            .create_result_as(kind, cluster, id, &file.result, file.state)
            .await
        {
            Ok(_) if file.state == ResultState::Dirty => return Ok(Imported::Dirty),
            Ok(_) => return Ok(Imported::Clean),
            // Created by someone else meanwhile: treat it as present.
            Err(StoreError::Conflict) => {
                existing = store.get_result(kind, cluster, id).await?;
            }
            Err(e) => return Err(e),
        }
    }
    let Some(entry) = existing else {
        // Created and deleted by others between two statements: the caller reports it.
        return Err(StoreError::NotFound);
    };
    if entry.result != file.result {
        notes.push(Note::Differs);
    }
    match (entry.state, file.state) {
        (ResultState::Dirty, ResultState::Clean) => {
            store.mark_result_clean(kind, cluster, id).await?;
            Ok(Imported::MarkedClean)
        }
        (ResultState::Clean, ResultState::Dirty) => {
            notes.push(Note::KeptClean);
            Ok(Imported::AlreadyPresent)
        }
        _ => Ok(Imported::AlreadyPresent),
    }
}

/// "1 file", "2 files".
fn counted(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

fn import_summary(
    dir: &Path,
    cluster: &ClusterId,
    files: usize,
    ignored: usize,
    c: &ImportCounts,
) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "import of {} into cluster {cluster}: {} ({}, {}, {} failed)",
        dir.display(),
        counted(files, "file"),
        counted(c.jobs, "job result"),
        counted(c.applications, "application result"),
        c.failed.len()
    );
    let _ = writeln!(s, "  imported dirty:  {}", c.imported_dirty);
    let _ = writeln!(s, "  imported clean:  {}", c.imported_clean);
    let _ = writeln!(s, "  marked clean:    {}", c.marked_clean);
    let _ = writeln!(s, "  already present: {}", c.already_present);
    let _ = writeln!(s, "  failed:          {}", c.failed.len());
    if c.kept_clean > 0 {
        let _ = writeln!(
            s,
            "  ({} of entries already clean: left clean)",
            counted(c.kept_clean, "dirty file")
        );
    }
    if c.differing > 0 {
        let _ = writeln!(
            s,
            "  ({} from the stored result: the stored one was kept)",
            match c.differing {
                1 => "1 file differs".to_owned(),
                n => format!("{n} files differ"),
            }
        );
    }
    if ignored > 0 {
        let _ = writeln!(
            s,
            "  ignored:         {ignored} (not *.json files or other folders)"
        );
    }
    if !c.failed.is_empty() {
        let _ = writeln!(
            s,
            "FAILED: {} of {files} files could not be imported and were skipped: {}",
            c.failed.len(),
            c.failed.join(", ")
        );
    }
    s
}

/// `jobstore import`.
pub async fn import(args: ImportArgs) -> anyhow::Result<()> {
    let cluster = parse_cluster(&args.cluster)?;
    if !args.dir.is_dir() {
        anyhow::bail!("{} is not a directory", args.dir.display());
    }
    let (files, ignored) = collect_files(&args.dir)?;
    let store = store::open(&args.db.store_config(true)).await?;

    let bar = progress(Some(files.len() as u64));
    let mut counts = ImportCounts::default();
    let mut fatal = None;
    for (done, candidate) in files.iter().enumerate() {
        bar.set_message(candidate.display.clone());
        let parsed = match read_file(candidate, args.kind, args.max_file_size) {
            Ok(parsed) => parsed,
            Err(reason) => {
                report(&bar, format!("failed: {}: {reason}", candidate.display));
                counts.failed.push(candidate.display.clone());
                bar.inc(1);
                continue;
            }
        };
        let mut notes = Vec::new();
        match import_one(store.as_ref(), &cluster, &parsed, &mut notes).await {
            Ok(outcome) => {
                match parsed.kind {
                    ResultKind::Job => counts.jobs += 1,
                    ResultKind::Application => counts.applications += 1,
                }
                match outcome {
                    Imported::Dirty => counts.imported_dirty += 1,
                    Imported::Clean => counts.imported_clean += 1,
                    Imported::MarkedClean => counts.marked_clean += 1,
                    Imported::AlreadyPresent => counts.already_present += 1,
                }
                for note in notes {
                    match note {
                        Note::KeptClean => counts.kept_clean += 1,
                        Note::Differs => counts.differing += 1,
                    }
                    let text = note.text(parsed.kind, parsed.id);
                    report(&bar, format!("note: {}: {text}", candidate.display));
                }
            }
            Err(StoreError::NotFound) => {
                report(
                    &bar,
                    format!(
                        "failed: {}: the entry was deleted by someone else while it was imported",
                        candidate.display
                    ),
                );
                counts.failed.push(candidate.display.clone());
            }
            Err(e) => {
                fatal = Some(anyhow::Error::new(e).context(format!(
                    "database error while importing {} ({} of {} files done)",
                    candidate.display,
                    done,
                    files.len()
                )));
                break;
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();

    let summary = import_summary(&args.dir, &cluster, files.len(), ignored, &counts);
    print!("{summary}");
    let _ = std::io::stdout().flush();
    if let Some(e) = fatal {
        return Err(e);
    }
    if !counts.failed.is_empty() {
        anyhow::bail!(
            "{} of {} files could not be imported: {}",
            counts.failed.len(),
            files.len(),
            counts.failed.join(", ")
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Export

/// The file name of an entry in Flink's layout.
pub fn file_name(id: &str, state: ResultState) -> String {
    match state {
        ResultState::Dirty => format!("{id}{DIRTY_SUFFIX}"),
        ResultState::Clean => format!("{id}{JSON_SUFFIX}"),
    }
}

/// The content Flink's file stores write: `{"result": ..., "version": 1}`.
pub fn file_content(entry: &ResultEntry) -> Vec<u8> {
    let mut envelope = serde_json::Map::new();
    envelope.insert("result".to_owned(), entry.result.clone());
    envelope.insert("version".to_owned(), Value::from(1));
    // A map of JSON values always serializes.
    serde_json::to_vec(&Value::Object(envelope)).unwrap_or_default()
}

/// Writes `content` to `dir/name` through a temporary file in `dir` and a rename.
///
/// The temporary file is created exclusively (`O_CREAT|O_EXCL`, a random name), so a
/// symbolic link or a file planted at a predictable name is never followed nor overwritten;
/// the rename replaces a link at `dir/name` itself, not what it points to. Its mode is the
/// one `File::create` gives (0666 less the umask), so a Flink running as another user
/// reads the export as before.
fn write_atomically(dir: &Path, name: &str, content: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".tmp")
        .permissions(std::fs::Permissions::from_mode(0o666))
        .tempfile_in(dir)?;
    tmp.write_all(content)?;
    tmp.as_file().sync_all()?;
    // On failure the temporary file is removed when `tmp` (or the error holding it) drops.
    tmp.persist(dir.join(name)).map_err(|e| e.error)?;
    Ok(())
}

/// Refuses an export folder that is a symbolic link (or not a folder): export writes only
/// into the folder it was given, never into one a link planted there points at.
fn check_export_folder(dir: &Path) -> anyhow::Result<()> {
    match std::fs::symlink_metadata(dir) {
        Ok(meta) if meta.file_type().is_symlink() => anyhow::bail!(
            "{} is a symbolic link: export writes only into a real folder (remove the link, \
             or export to another DIR and move the files)",
            dir.display()
        ),
        Ok(meta) if !meta.is_dir() => anyhow::bail!("{} is not a folder", dir.display()),
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(anyhow::Error::new(e).context(format!("cannot inspect {}", dir.display()))),
    }
}

/// Removes `path` if it exists; true when it did.
fn remove_if_present(path: &Path) -> std::io::Result<bool> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

fn other_state(state: ResultState) -> ResultState {
    match state {
        ResultState::Dirty => ResultState::Clean,
        ResultState::Clean => ResultState::Dirty,
    }
}

/// Writes one entry's file and removes its other state's file; true when there was one.
fn write_entry(dir: &Path, entry: &ResultEntry) -> anyhow::Result<bool> {
    let name = file_name(&entry.id, entry.state);
    write_atomically(dir, &name, &file_content(entry))
        .with_context(|| format!("cannot write {}", dir.join(&name).display()))?;
    let other = dir.join(file_name(&entry.id, other_state(entry.state)));
    remove_if_present(&other).with_context(|| format!("cannot remove {}", other.display()))
}

/// Writes a page of entries, a few files at a time (each write waits for its flush to
/// disk, and those waits overlap). Answers, per entry, whether its other state's file was
/// removed.
fn write_page(dir: &Path, page: &[ResultEntry], bar: &ProgressBar) -> anyhow::Result<Vec<bool>> {
    let chunk = page.len().div_ceil(EXPORT_WRITERS).max(1);
    std::thread::scope(|scope| {
        let writers: Vec<_> = page
            .chunks(chunk)
            .map(|entries| {
                scope.spawn(move || {
                    entries
                        .iter()
                        .map(|entry| {
                            let removed = write_entry(dir, entry)?;
                            bar.inc(1);
                            Ok(removed)
                        })
                        .collect::<anyhow::Result<Vec<bool>>>()
                })
            })
            .collect();
        let mut removed = Vec::with_capacity(page.len());
        for writer in writers {
            let part = writer
                .join()
                .map_err(|_| anyhow::anyhow!("a file writer thread panicked"))??;
            removed.extend(part);
        }
        Ok(removed)
    })
}

/// What an export of one store did.
#[derive(Debug, Default)]
struct ExportCounts {
    dirty: usize,
    clean: usize,
    /// Files of the other state of an exported entry, removed.
    removed: usize,
    /// Result files already in the folder that are no entry of the cluster.
    others: Vec<String>,
}

fn existing_json_files(dir: &Path) -> anyhow::Result<BTreeSet<String>> {
    let mut names = BTreeSet::new();
    for item in std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))? {
        let item = item.with_context(|| format!("cannot list {}", dir.display()))?;
        let name = item.file_name().to_string_lossy().into_owned();
        if name.ends_with(JSON_SUFFIX) && !item.path().is_dir() {
            names.insert(name);
        }
    }
    Ok(names)
}

async fn export_kind(
    store: &dyn Store,
    cluster: &ClusterId,
    kind: ResultKind,
    dir: &Path,
    bar: &ProgressBar,
) -> anyhow::Result<ExportCounts> {
    check_export_folder(dir)?;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    check_export_folder(dir)?;
    let mut before = existing_json_files(dir)?;
    let mut counts = ExportCounts::default();
    let mut after: Option<HexId> = None;
    loop {
        let page = store
            .list_results(
                kind,
                cluster,
                StateFilter::All,
                Page {
                    after,
                    limit: EXPORT_PAGE,
                },
            )
            .await
            .with_context(|| {
                format!(
                    "cannot list the {} results of cluster {cluster}",
                    kind.noun()
                )
            })?;
        let removed = write_page(dir, &page, bar)?;
        for (entry, removed) in page.iter().zip(removed) {
            let name = file_name(&entry.id, entry.state);
            let other = file_name(&entry.id, other_state(entry.state));
            if removed {
                counts.removed += 1;
                report(
                    bar,
                    format!(
                        "removed {}: the entry is {} now",
                        dir.join(&other).display(),
                        entry.state.as_str()
                    ),
                );
            }
            before.remove(&name);
            before.remove(&other);
            match entry.state {
                ResultState::Dirty => counts.dirty += 1,
                ResultState::Clean => counts.clean += 1,
            }
        }
        if page.len() < EXPORT_PAGE as usize {
            break;
        }
        let last = page.last().map(|e| e.id.as_str()).unwrap_or_default();
        after =
            Some(last.parse().map_err(|e| {
                anyhow::anyhow!("the store answered a malformed id {last:?}: it {e}")
            })?);
    }
    // The directory entries (the renames) are durable once the folder is flushed.
    if let Ok(folder) = std::fs::File::open(dir) {
        let _ = folder.sync_all();
    }
    counts.others = before.into_iter().collect();
    Ok(counts)
}

/// `jobstore export`.
pub async fn export(args: ExportArgs) -> anyhow::Result<()> {
    let cluster = parse_cluster(&args.cluster)?;
    let kinds: &[ResultKind] = match args.kind {
        ExportKind::All => &[ResultKind::Job, ResultKind::Application],
        ExportKind::Job => &[ResultKind::Job],
        ExportKind::Application => &[ResultKind::Application],
    };
    let store = store::open(&args.db.store_config(true)).await?;
    let bar = progress(None);
    let mut summary = format!("export of cluster {cluster} to {}:\n", args.dir.display());
    let mut outcome = Ok(());
    for &kind in kinds {
        let folder = match kind {
            ResultKind::Job => JOB_DIR,
            ResultKind::Application => APPLICATION_DIR,
        };
        let dir = args.dir.join(folder);
        match export_kind(store.as_ref(), &cluster, kind, &dir, &bar).await {
            Ok(c) => {
                let _ = writeln!(
                    summary,
                    "  {} results: {} ({} dirty, {} clean) in {}",
                    kind.noun(),
                    c.dirty + c.clean,
                    c.dirty,
                    c.clean,
                    dir.display()
                );
                if c.removed > 0 {
                    let _ = writeln!(
                        summary,
                        "    removed {} files of entries whose state changed since",
                        c.removed
                    );
                }
                if !c.others.is_empty() {
                    let shown: Vec<&str> = c.others.iter().take(10).map(String::as_str).collect();
                    let more = if c.others.len() > shown.len() {
                        ", ..."
                    } else {
                        ""
                    };
                    let _ = writeln!(
                        summary,
                        "    left in place: {} other .json files that are no entry of cluster {cluster}: {}{more}",
                        c.others.len(),
                        shown.join(", ")
                    );
                }
            }
            Err(e) => {
                let _ = writeln!(summary, "  {} results: FAILED: {e:#}", kind.noun());
                outcome = Err(e);
                break;
            }
        }
    }
    bar.finish_and_clear();
    print!("{summary}");
    let _ = std::io::stdout().flush();
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn file_names() {
        let id = "38dcc0b26ce09271cefd5020d41b4b88";
        let hex: HexId = id.parse().unwrap();
        assert_eq!(
            parse_file_name(&format!("{id}.json")),
            Some((hex, ResultState::Clean))
        );
        assert_eq!(
            parse_file_name(&format!("{}_DIRTY.json", id.to_uppercase())),
            Some((hex, ResultState::Dirty))
        );
        for bad in [
            "x.json",
            "_DIRTY.json",
            &format!("{id}_dirty.json"),
            &format!("{id}.JSON"),
        ] {
            assert_eq!(parse_file_name(bad), None, "{bad}");
        }
        assert_eq!(
            file_name(id, ResultState::Dirty),
            format!("{id}_DIRTY.json")
        );
        assert_eq!(file_name(id, ResultState::Clean), format!("{id}.json"));
    }

    #[test]
    fn kinds_by_content() {
        let id = "38dcc0b26ce09271cefd5020d41b4b88";
        assert_eq!(
            detect_kind(&json!({"result": {"id": id, "application-id": id}})),
            ResultKind::Job
        );
        assert_eq!(
            detect_kind(&json!({"result": {"application-id": id}})),
            ResultKind::Application
        );
        assert_eq!(detect_kind(&json!({"result": {}})), ResultKind::Job);
        assert_eq!(detect_kind(&json!([])), ResultKind::Job);
    }

    #[test]
    fn content_is_flinks_envelope() {
        let entry = ResultEntry {
            cluster_id: "c".into(),
            id: "38dcc0b26ce09271cefd5020d41b4b88".into(),
            state: ResultState::Dirty,
            created_at: chrono::Utc::now(),
            cleaned_at: None,
            result: json!({"id": "38dcc0b26ce09271cefd5020d41b4b88", "net-runtime": 1}),
        };
        assert_eq!(
            String::from_utf8(file_content(&entry)).unwrap(),
            r#"{"result":{"id":"38dcc0b26ce09271cefd5020d41b4b88","net-runtime":1},"version":1}"#
        );
    }
}
