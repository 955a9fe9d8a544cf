//! `jobstore import`: Flink's result-store files into the store (see the module above).

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde_json::Value;

use super::layout::{APPLICATION_DIR, JOB_DIR, JSON_SUFFIX, detect_kind, parse_file_name};
use super::{ImportArgs, ImportKind, parse_cluster, progress, report};
use crate::ids::ClusterId;
use crate::result_file::{self, ResultId, ResultKind};
use crate::store::{self, ResultState, Store, StoreError};

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
    dir: &Path, prefix: &str, top: bool, files: &mut Vec<Candidate>, ignored: &mut usize,
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

/// A file read, parsed and validated.
struct Parsed {
    kind: ResultKind,
    id: ResultId,
    state: ResultState,
    result: Value,
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
    // The name's shape first (an id of either kind has the same shape), its kind once the
    // content says it.
    parse_file_name(ResultKind::Job, &file_name).ok_or_else(|| {
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
    let (id, result) = result_file::parse_envelope(kind, value)
        .map_err(|e| format!("it is not a Flink {} result file: {e}", kind.noun()))?;
    let (name_id, state) =
        parse_file_name(kind, &file_name).expect("a name of this shape names an id of every kind");
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
    fn text(self, id: ResultId) -> String {
        let noun = id.kind().noun();
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
    store: &dyn Store, cluster: &ClusterId, file: &Parsed, notes: &mut Vec<Note>,
) -> Result<Imported, StoreError> {
    let id = file.id;
    let mut existing = store.get_result(cluster, id).await?;
    if existing.is_none() {
        // One statement in the file's state: a clean file is never seen dirty.
        match store
            .create_result_as(cluster, id, &file.result, file.state)
            .await
        {
            Ok(_) if file.state == ResultState::Dirty => return Ok(Imported::Dirty),
            Ok(_) => return Ok(Imported::Clean),
            // Created by someone else meanwhile: treat it as present.
            Err(StoreError::Conflict) => {
                existing = store.get_result(cluster, id).await?;
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
            store.mark_result_clean(cluster, id).await?;
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
    dir: &Path, cluster: &ClusterId, files: usize, ignored: usize, c: &ImportCounts,
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
                    let text = note.text(parsed.id);
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
    // SQLite: the write-ahead log back into the database file.
    store.close().await;

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
