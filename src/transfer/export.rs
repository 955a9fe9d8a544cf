//! `jobstore export`: a cluster's entries as Flink's result-store files (see the module
//! above).

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

use anyhow::Context as _;
use indicatif::ProgressBar;

use super::layout::{JSON_SUFFIX, file_content, file_name, folder};
use super::{ExportArgs, ExportKind, parse_cluster, progress, report};
use crate::ids::ClusterId;
use crate::result_file::{ResultId, ResultKind};
use crate::store::{self, Page, ResultEntry, ResultState, StateFilter, Store};

/// How many entries one listing query of `export` reads.
const EXPORT_PAGE: u32 = 1000;
/// How many files `export` writes at once.
const EXPORT_WRITERS: usize = 8;

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
    store: &dyn Store, cluster: &ClusterId, kind: ResultKind, dir: &Path, bar: &ProgressBar,
) -> anyhow::Result<ExportCounts> {
    check_export_folder(dir)?;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    check_export_folder(dir)?;
    let mut before = existing_json_files(dir)?;
    let mut counts = ExportCounts::default();
    let mut after: Option<ResultId> = None;
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
        after = page.last().map(|e| e.id);
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
        let dir = args.dir.join(folder(kind));
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
    store.close().await;
    print!("{summary}");
    let _ = std::io::stdout().flush();
    outcome
}
