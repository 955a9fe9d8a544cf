//! `jobstore import` and `jobstore export`, run as the real binary against a SQLite file and
//! a fresh PostgreSQL database, on the files Flink 2.3.0 wrote (`tests/data/flink-2.3.0`),
//! and the exported folders read back by Flink 2.3.0's own `FileSystemJobResultStore` and
//! `FileSystemApplicationResultStore` (`scripts/flink-check/run.sh`).
//!
//! PostgreSQL comes from `DATABASE_URL`, or `postgres://postgres@127.0.0.1:5432/postgres`
//! when it is unset; each test creates a fresh database there (`tests/integration/common`) and drops it
//! at the end. Without a reachable server the PostgreSQL tests fail (they never pass without having
//! run). The Flink checks need Java 17 and Python 3 with pip (Flink is installed from PyPI
//! into `.flink/` on first use); without them they fail too, saying so.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use jobstore::result_file::ResultKind;
use jobstore::store::{ResultEntry, ResultState};
use serde_json::{Value, json};

use crate::common;
use common::{Backend, Run, TestDb, run_jobstore};

/// The five job results Flink 2.3.0 wrote, and the application result.
const JOB_IDS: [&str; 5] = [
    "38dcc0b26ce09271cefd5020d41b4b88",
    "6e84621ee1bef3c42ab882c8a5c87683",
    "71f237b760187c71224a5ef9c5c240d3",
    "8ef7ae7aab3e3c84d4981cf75516a3ea",
    "91c0ad3c99e6611c32417a7c5d5146d2",
];
/// The job made dirty for the import (its name is `probe-dirty`).
const DIRTY_JOB: &str = "38dcc0b26ce09271cefd5020d41b4b88";
const APPLICATION_ID: &str = "38dcc0b26ce09271cefd5020d41b4b88";
/// A file that is not JSON, and a file whose name's id is not its content's.
const CORRUPT_FILE: &str = "00000000000000000000000000000001_DIRTY.json";
const WRONG_ID_FILE: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.json";

// ---------------------------------------------------------------------------------------
// The binary

/// The summary `import` and `export` print.
trait Summary {
    /// The number on the summary line `  <label>: N`.
    fn count(&self, label: &str) -> usize;
    /// Asserts the counts of an import, in the order of [`IMPORT_COUNTS`].
    fn assert_counts(&self, expected: [usize; 5]);
}

/// The labels of an import's counts.
const IMPORT_COUNTS: [&str; 5] = [
    "imported dirty",
    "imported clean",
    "marked clean",
    "already present",
    "failed",
];

impl Summary for Run {
    fn count(&self, label: &str) -> usize {
        let prefix = format!("{label}:");
        self.stdout
            .lines()
            .map(str::trim)
            .find_map(|l| l.strip_prefix(&prefix))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no `{label}` count in the summary:\n{}", self.all()))
    }

    fn assert_counts(&self, expected: [usize; 5]) {
        for (label, n) in IMPORT_COUNTS.into_iter().zip(expected) {
            assert_eq!(self.count(label), n, "{label}\n{}", self.all());
        }
    }
}

/// Whether a line of `run`'s stderr names `file` and says `what`.
fn reports(run: &Run, file: &str, what: &str) -> bool {
    run.stderr
        .lines()
        .any(|l| l.contains(file) && l.contains(what))
}

/// `jobstore SUBCOMMAND --database-url URL REST...`, killed (by its own handle) and failed
/// when it has not exited after `limit`: a FIFO must not hang the suite.
fn jobstore_bounded(db: &TestDb, args: &[&str], limit: Duration) -> Run {
    let (sub, rest) = args.split_first().expect("a subcommand");
    let args: Vec<&str> = [*sub, "--database-url", &db.url]
        .into_iter()
        .chain(rest.iter().copied())
        .collect();
    run_jobstore(&args, &[("JOBSTORE_LOG", "warn")], limit)
}

/// [`jobstore_bounded`] within five minutes.
fn jobstore(db: &TestDb, args: &[&str]) -> Run {
    jobstore_bounded(db, args, Duration::from_secs(300))
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 temporary path")
}

// ---------------------------------------------------------------------------------------
// Files

fn reference(kind: &str, id: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/flink-2.3.0")
        .join(kind)
        .join(format!("{id}.json"))
}

/// Copies Flink's file of `id` in the store folder `kind` to `to`.
fn copy_reference(kind: &str, id: &str, to: impl AsRef<Path>) {
    std::fs::copy(reference(kind, id), to).unwrap();
}

fn read_json(path: &Path) -> Value {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("parse {}: {e}", path.display()))
}

fn job_file(id: &str) -> Value {
    read_json(&reference("job-result-store", id))
}

fn application_file() -> Value {
    read_json(&reference("application-result-store", APPLICATION_ID))
}

fn write(path: &Path, content: &[u8]) {
    std::fs::write(path, content).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

/// The flat import folder of the tests: the five job files (one `_DIRTY`), the
/// application file, a file that is not JSON, one whose name has another id, and a README.
fn flat_import_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for id in JOB_IDS {
        let name = if id == DIRTY_JOB {
            format!("{id}_DIRTY.json")
        } else {
            format!("{id}.json")
        };
        copy_reference("job-result-store", id, dir.path().join(name));
    }
    // The job and its application share the id: the job file is dirty, the application
    // file clean, so both names fit in one folder, and the content says which is which.
    copy_reference(
        "application-result-store",
        APPLICATION_ID,
        dir.path().join(format!("{APPLICATION_ID}.json")),
    );
    write(&dir.path().join(CORRUPT_FILE), b"this is { not JSON");
    copy_reference(
        "job-result-store",
        JOB_IDS[1],
        dir.path().join(WRONG_ID_FILE),
    );
    write(&dir.path().join("README.txt"), b"not a result file");
    dir
}

/// The names in a folder.
fn file_names(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("list {}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

fn state_of(entries: &BTreeMap<String, ResultEntry>, id: &str) -> ResultState {
    entries
        .get(id)
        .unwrap_or_else(|| panic!("no entry {id} in {:?}", entries.keys()))
        .state
}

/// What the tests compare before and after an idempotent run: everything but the pools.
fn snapshot(entries: &BTreeMap<String, ResultEntry>) -> Vec<(String, ResultState, Value, String)> {
    entries
        .values()
        .map(|e| {
            (
                e.id.to_string(),
                e.state,
                e.result.clone(),
                format!("{:?} {:?}", e.created_at, e.cleaned_at),
            )
        })
        .collect()
}

// ---------------------------------------------------------------------------------------
// Import, idempotence, state changes, export, re-import

async fn import_and_export(backend: Backend) {
    let db = TestDb::new(backend).await;
    let input = flat_import_dir();
    let dir = path_str(input.path()).to_owned();

    // First import: the two bad files are named and skipped, the rest load.
    let run = jobstore(&db, &["import", "--cluster", "c1", &dir]);
    assert_eq!(
        run.code,
        Some(1),
        "failed files make the exit status 1\n{}",
        run.all()
    );
    run.assert_counts([1, 5, 0, 0, 2]);
    for bad in [CORRUPT_FILE, WRONG_ID_FILE] {
        assert!(
            run.stderr
                .lines()
                .any(|l| l.starts_with("failed: ") && l.contains(bad)),
            "{bad} is reported by name\n{}",
            run.all()
        );
        assert!(
            run.stdout.contains(bad),
            "the summary names {bad}\n{}",
            run.all()
        );
    }
    assert!(run.stdout.contains("FAILED"), "{}", run.all());
    assert!(
        run.stderr.contains("not valid JSON") && run.stderr.contains(JOB_IDS[1]),
        "the reasons are given\n{}",
        run.all()
    );

    let jobs = db.entries(ResultKind::Job, "c1").await;
    let apps = db.entries(ResultKind::Application, "c1").await;
    assert_eq!(
        jobs.keys().map(String::as_str).collect::<Vec<_>>(),
        JOB_IDS.to_vec(),
        "exactly the five job results (not the corrupt or wrong-id file)"
    );
    for id in JOB_IDS {
        let expected = if id == DIRTY_JOB {
            ResultState::Dirty
        } else {
            ResultState::Clean
        };
        assert_eq!(state_of(&jobs, id), expected, "{id}");
        assert_eq!(
            jobs[id].result,
            job_file(id)["result"],
            "{id}: result as in the file"
        );
    }
    assert_eq!(apps.keys().collect::<Vec<_>>(), vec![APPLICATION_ID]);
    assert_eq!(state_of(&apps, APPLICATION_ID), ResultState::Clean);
    assert_eq!(apps[APPLICATION_ID].result, application_file()["result"]);
    assert!(
        db.entries(ResultKind::Job, "default").await.is_empty(),
        "nothing lands in another cluster"
    );

    // Second import: nothing changes, everything is already present.
    let before = (snapshot(&jobs), snapshot(&apps));
    let run = jobstore(&db, &["import", "--cluster", "c1", &dir]);
    assert_eq!(run.code, Some(1), "{}", run.all());
    run.assert_counts([0, 0, 0, 6, 2]);
    let after = (
        snapshot(&db.entries(ResultKind::Job, "c1").await),
        snapshot(&db.entries(ResultKind::Application, "c1").await),
    );
    assert_eq!(before, after, "a second import changes nothing");

    // Without the bad files: exit status 0, no failure in the summary.
    std::fs::remove_file(input.path().join(CORRUPT_FILE)).unwrap();
    std::fs::remove_file(input.path().join(WRONG_ID_FILE)).unwrap();
    let run = jobstore(&db, &["import", "--cluster", "c1", &dir]);
    assert_eq!(run.code, Some(0), "{}", run.all());
    assert_eq!(run.count("failed"), 0);
    assert!(!run.stdout.contains("FAILED"), "{}", run.all());

    // Export: Flink's file names and content, equal to the files Flink wrote.
    let out = tempfile::tempdir().unwrap();
    let out_dir = path_str(out.path()).to_owned();
    let run = jobstore(&db, &["export", "--cluster", "c1", &out_dir]);
    assert_eq!(run.code, Some(0), "{}", run.all());
    assert!(
        run.stdout.contains("job results: 5 (1 dirty, 4 clean)")
            && run
                .stdout
                .contains("application results: 1 (0 dirty, 1 clean)"),
        "{}",
        run.all()
    );
    let job_dir = out.path().join("job-result-store");
    let app_dir = out.path().join("application-result-store");
    let expected: BTreeSet<String> = JOB_IDS
        .iter()
        .map(|id| {
            if *id == DIRTY_JOB {
                format!("{id}_DIRTY.json")
            } else {
                format!("{id}.json")
            }
        })
        .collect();
    assert_eq!(file_names(&job_dir), expected, "no other (temporary) files");
    assert_eq!(
        file_names(&app_dir),
        BTreeSet::from([format!("{APPLICATION_ID}.json")])
    );
    for id in JOB_IDS {
        let name = if id == DIRTY_JOB {
            format!("{id}_DIRTY.json")
        } else {
            format!("{id}.json")
        };
        let exported = read_json(&job_dir.join(&name));
        assert_eq!(exported, job_file(id), "{name}: the file Flink wrote");
        let keys: Vec<&String> = exported.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["result", "version"], "{name}: Flink's envelope");
    }
    assert_eq!(
        read_json(&app_dir.join(format!("{APPLICATION_ID}.json"))),
        application_file()
    );

    // The files change state: a dirty entry whose file is now clean is marked clean; a
    // clean entry whose file is now dirty stays clean and is reported. (The application
    // file moves to the application-result-store/ subfolder first, to make room.)
    let app_sub = input.path().join("application-result-store");
    std::fs::create_dir(&app_sub).unwrap();
    std::fs::rename(
        input.path().join(format!("{APPLICATION_ID}.json")),
        app_sub.join(format!("{APPLICATION_ID}.json")),
    )
    .unwrap();
    std::fs::rename(
        input.path().join(format!("{DIRTY_JOB}_DIRTY.json")),
        input.path().join(format!("{DIRTY_JOB}.json")),
    )
    .unwrap();
    let reverted = JOB_IDS[2];
    std::fs::rename(
        input.path().join(format!("{reverted}.json")),
        input.path().join(format!("{reverted}_DIRTY.json")),
    )
    .unwrap();
    // And a file whose content differs from the stored result: the stored one is kept.
    let changed = JOB_IDS[3];
    let mut edited = job_file(changed);
    edited["result"]["name"] = json!("renamed in the file");
    write(
        &input.path().join(format!("{changed}.json")),
        &serde_json::to_vec(&edited).unwrap(),
    );
    let cleaned_before = db.entries(ResultKind::Job, "c1").await[reverted].cleaned_at;
    let run = jobstore(&db, &["import", "--cluster", "c1", &dir]);
    assert_eq!(run.code, Some(0), "{}", run.all());
    run.assert_counts([0, 0, 1, 5, 0]);
    assert!(
        reports(&run, &format!("{reverted}_DIRTY.json"), "left clean"),
        "the dirty file of a clean entry is reported\n{}",
        run.all()
    );
    assert!(
        reports(&run, &format!("{changed}.json"), "differs"),
        "a file that differs from the stored result is reported\n{}",
        run.all()
    );
    let jobs = db.entries(ResultKind::Job, "c1").await;
    assert_eq!(
        jobs[changed].result,
        job_file(changed)["result"],
        "the stored one is kept"
    );
    assert_eq!(state_of(&jobs, DIRTY_JOB), ResultState::Clean);
    assert_eq!(state_of(&jobs, reverted), ResultState::Clean);
    assert_eq!(jobs[reverted].cleaned_at, cleaned_before, "left as it was");

    // Exporting again over the first export: the stale dirty file goes.
    let run = jobstore(&db, &["export", "--cluster", "c1", &out_dir]);
    assert_eq!(run.code, Some(0), "{}", run.all());
    assert!(
        run.stdout.contains("job results: 5 (0 dirty, 5 clean)"),
        "{}",
        run.all()
    );
    assert_eq!(
        file_names(&job_dir),
        JOB_IDS.iter().map(|id| format!("{id}.json")).collect(),
        "{DIRTY_JOB}_DIRTY.json is replaced by {DIRTY_JOB}.json\n{}",
        run.all()
    );

    // The export imports back as it is (into another cluster).
    let run = jobstore(&db, &["import", "--cluster", "c2", &out_dir]);
    assert_eq!(run.code, Some(0), "{}", run.all());
    run.assert_counts([0, 6, 0, 0, 0]);
    for kind in [ResultKind::Job, ResultKind::Application] {
        let c1 = db.entries(kind, "c1").await;
        let c2 = db.entries(kind, "c2").await;
        let strip = |m: &BTreeMap<String, ResultEntry>| {
            m.values()
                .map(|e| (e.id, e.state, e.result.clone()))
                .collect::<Vec<_>>()
        };
        assert_eq!(strip(&c1), strip(&c2), "{kind:?}");
    }
}

per_backend!(
    #[tokio::test]
    import_and_export =>
        import_and_export_postgres,
        import_and_export_sqlite
);

// ---------------------------------------------------------------------------------------
// Flags and bad input

#[tokio::test]
async fn kind_flags_and_bad_arguments() {
    let db = TestDb::new(Backend::Sqlite).await;
    let input = tempfile::tempdir().unwrap();
    copy_reference(
        "job-result-store",
        JOB_IDS[0],
        input.path().join(format!("{}_DIRTY.json", JOB_IDS[0])),
    );
    let apps = input.path().join("application-result-store");
    std::fs::create_dir(&apps).unwrap();
    copy_reference(
        "application-result-store",
        APPLICATION_ID,
        apps.join(format!("{APPLICATION_ID}_DIRTY.json")),
    );
    std::fs::create_dir(input.path().join("some-other-folder")).unwrap();
    let dir = path_str(input.path()).to_owned();

    // Forced to job: the application file is not a job result.
    let run = jobstore(&db, &["import", "--cluster", "k", "--kind", "job", &dir]);
    assert_eq!(run.code, Some(1), "{}", run.all());
    run.assert_counts([1, 0, 0, 0, 1]);
    assert!(
        run.stderr.contains(&format!(
            "application-result-store/{APPLICATION_ID}_DIRTY.json"
        )) && run.stderr.contains("result.id"),
        "{}",
        run.all()
    );
    assert_eq!(run.count("ignored"), 1, "the other folder\n{}", run.all());

    // Automatic: the subfolder's application file loads as an application result.
    let run = jobstore(&db, &["import", "--cluster", "k", &dir]);
    assert_eq!(run.code, Some(0), "{}", run.all());
    assert_eq!(run.count("imported dirty"), 1, "{}", run.all());
    assert_eq!(run.count("already present"), 1, "{}", run.all());
    let apps_stored = db.entries(ResultKind::Application, "k").await;
    assert_eq!(state_of(&apps_stored, APPLICATION_ID), ResultState::Dirty);

    // Export of one store only.
    let out = tempfile::tempdir().unwrap();
    let export = [
        "export",
        "--cluster",
        "k",
        "--kind",
        "application",
        path_str(out.path()),
    ];
    let run = jobstore(&db, &export);
    assert_eq!(run.code, Some(0), "{}", run.all());
    assert_eq!(
        file_names(out.path()),
        BTreeSet::from(["application-result-store".to_owned()])
    );
    assert_eq!(
        file_names(&out.path().join("application-result-store")),
        BTreeSet::from([format!("{APPLICATION_ID}_DIRTY.json")])
    );

    // A foreign file in the export folder is left and reported.
    write(
        &out.path()
            .join("application-result-store/ffffffffffffffffffffffffffffffff.json"),
        b"{}",
    );
    let run = jobstore(&db, &export);
    assert_eq!(run.code, Some(0), "{}", run.all());
    assert!(
        run.stdout.contains("left in place: 1")
            && run.stdout.contains("ffffffffffffffffffffffffffffffff.json"),
        "{}",
        run.all()
    );

    // Bad arguments: a clear error, exit status 1, nothing written.
    let run = jobstore(&db, &["import", "--cluster", "bad cluster!", &dir]);
    assert_eq!(run.code, Some(1), "{}", run.all());
    assert!(run.stderr.contains("--cluster"), "{}", run.all());
    let missing = input.path().join("missing");
    let run = jobstore(&db, &["import", "--cluster", "k", path_str(&missing)]);
    assert_eq!(run.code, Some(1), "{}", run.all());
    assert!(run.stderr.contains("not a directory"), "{}", run.all());
}

// ---------------------------------------------------------------------------------------
// The progress bar

/// On a terminal (a pseudo-terminal from util-linux `script`), import draws a progress bar
/// on stderr; through a pipe it draws nothing.
#[tokio::test]
async fn progress_bar_on_a_terminal_only() {
    let db = TestDb::new(Backend::Sqlite).await;
    let input = tempfile::tempdir().unwrap();
    let mut template = job_file(JOB_IDS[2]);
    for _ in 0..200 {
        let id = uuid::Uuid::new_v4().simple().to_string();
        template["result"]["id"] = json!(id);
        write(
            &input.path().join(format!("{id}.json")),
            &serde_json::to_vec(&template).unwrap(),
        );
    }
    let dir = path_str(input.path()).to_owned();

    let piped = jobstore(&db, &["import", "--cluster", "p", &dir]);
    assert_eq!(piped.code, Some(0), "{}", piped.all());
    assert!(
        !piped.stderr.contains('\x1b') && !piped.stderr.contains("/200 files"),
        "no progress bar without a terminal\n{}",
        piped.all()
    );

    let command = format!(
        "{} import --database-url {} --cluster q {dir}",
        env!("CARGO_BIN_EXE_jobstore"),
        db.url
    );
    let output = Command::new("script")
        .args(["-qfec", &command, "/dev/null"])
        .env("JOBSTORE_LOG", "warn")
        .env("TERM", "xterm")
        .output()
        .expect("run util-linux `script` (package bsdutils) to give the import a terminal");
    let screen = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{screen}");
    assert!(
        screen.contains("/200 files"),
        "a progress bar on a terminal\n{screen}"
    );
    assert!(screen.contains("imported clean:  200"), "{screen}");
}

// ---------------------------------------------------------------------------------------
// Flink reads the export

/// Runs `scripts/flink-check/run.sh` on an export and returns its JSON lines.
fn flink_reads(export: &Path) -> Vec<Value> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/flink-check/run.sh");
    let output = Command::new("bash")
        .arg(&script)
        .arg(export)
        .output()
        .unwrap_or_else(|e| panic!("cannot run bash {}: {e}", script.display()));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "Flink's own FileSystemJobResultStore could not read the export ({}).\n\
         This test needs Java 17 (java and javac on PATH, e.g. apt-get install openjdk-17-jdk-headless) \
         and Python 3 with pip: scripts/flink/install.sh installs Flink 2.3.0 from PyPI into .flink/ \
         (or JOBSTORE_FLINK_CACHE) on first use.\n--- stdout\n{stdout}--- stderr\n{stderr}",
        output.status
    );
    stdout
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}\n{stderr}"))
        })
        .collect()
}

/// Flink's line of each stored entry of one store (`job` or `application`), asserting that
/// Flink sees exactly the stored entries and that its `hasDirtyEntry` and `hasCleanEntry`
/// follow their states: (id, line, entry, dirty), by id.
fn seen_by_flink<'a>(
    lines: &'a [Value], store: &str, id_field: &str, stored: &'a BTreeMap<String, ResultEntry>,
) -> Vec<(&'a String, &'a Value, &'a ResultEntry, bool)> {
    let read: BTreeMap<String, &Value> = lines
        .iter()
        .filter(|l| l["store"] == store)
        .map(|l| (l[id_field].as_str().unwrap().to_owned(), l))
        .collect();
    assert_eq!(
        read.keys().collect::<Vec<_>>(),
        stored.keys().collect::<Vec<_>>(),
        "Flink sees exactly the stored {store} results\n{lines:#?}"
    );
    let mut seen = Vec::new();
    for (id, entry) in stored {
        let line = read[id];
        let dirty = entry.state == ResultState::Dirty;
        assert_eq!(line["has-dirty"], json!(dirty), "{id}: {line}");
        assert_eq!(line["has-clean"], json!(!dirty), "{id}: {line}");
        seen.push((id, line, entry, dirty));
    }
    seen
}

/// Flink's JobStatus for a JobResult's application-status.
fn job_status(application_status: &str) -> &'static str {
    match application_status {
        "SUCCEEDED" => "FINISHED",
        "FAILED" => "FAILED",
        "CANCELED" => "CANCELED",
        other => panic!("no job status for {other}"),
    }
}

async fn flink_reads_the_export(backend: Backend) {
    let db = TestDb::new(backend).await;
    // Import: two dirty jobs (one FAILED with its 36 KB failure-cause), three clean; the
    // real application result dirty and a second one (the same shape, another id) clean.
    let input = tempfile::tempdir().unwrap();
    let (jobs_in, apps_in) = (
        input.path().join("job-result-store"),
        input.path().join("application-result-store"),
    );
    std::fs::create_dir(&jobs_in).unwrap();
    std::fs::create_dir(&apps_in).unwrap();
    let dirty_jobs = [DIRTY_JOB, JOB_IDS[4]];
    for id in JOB_IDS {
        let suffix = if dirty_jobs.contains(&id) {
            "_DIRTY"
        } else {
            ""
        };
        copy_reference(
            "job-result-store",
            id,
            jobs_in.join(format!("{id}{suffix}.json")),
        );
    }
    copy_reference(
        "application-result-store",
        APPLICATION_ID,
        apps_in.join(format!("{APPLICATION_ID}_DIRTY.json")),
    );
    let other_app = JOB_IDS[3];
    let mut second = application_file();
    second["result"]["application-id"] = json!(other_app);
    second["result"]["application-state"] = json!("CANCELED");
    second["result"]["application-name"] = json!("SingleJobApplication(probe-restored)");
    write(
        &apps_in.join(format!("{other_app}.json")),
        &serde_json::to_vec(&second).unwrap(),
    );
    let run = jobstore(
        &db,
        &["import", "--cluster", "flink", path_str(input.path())],
    );
    assert_eq!(run.code, Some(0), "{}", run.all());
    run.assert_counts([3, 4, 0, 0, 0]);

    let out = tempfile::tempdir().unwrap();
    let run = jobstore(&db, &["export", "--cluster", "flink", path_str(out.path())]);
    assert_eq!(run.code, Some(0), "{}", run.all());

    let lines = flink_reads(out.path());
    let stored_jobs = db.entries(ResultKind::Job, "flink").await;
    let stored_apps = db.entries(ResultKind::Application, "flink").await;

    let read_jobs = seen_by_flink(&lines, "job", "job-id", &stored_jobs);
    for &(id, line, entry, dirty) in &read_jobs {
        let r = &entry.result;
        assert_eq!(line["has-entry"], json!(true), "{id}: {line}");
        assert_eq!(
            line["in-dirty-results"],
            json!(dirty),
            "{id}: getDirtyResults() returns the dirty ones only: {line}"
        );
        assert_eq!(
            line["job-status"],
            json!(job_status(r["application-status"].as_str().unwrap())),
            "{id}: {line}"
        );
        for field in [
            "net-runtime",
            "name",
            "application-id",
            "start-time",
            "end-time",
        ] {
            assert_eq!(line[field], r[field], "{id}: {field}: {line}");
        }
        assert_eq!(
            line["failure-class"],
            r.get("failure-cause")
                .map(|c| c["class"].clone())
                .unwrap_or(Value::Null),
            "{id}: {line}"
        );
    }
    let flink_dirty: BTreeSet<&str> = read_jobs
        .iter()
        .filter(|(_, l, _, _)| l["in-dirty-results"] == json!(true))
        .map(|(id, _, _, _)| id.as_str())
        .collect();
    assert_eq!(flink_dirty, BTreeSet::from(dirty_jobs));

    for (id, line, entry, dirty) in
        seen_by_flink(&lines, "application", "application-id", &stored_apps)
    {
        assert_eq!(line["in-dirty-results"], json!(dirty), "{id}: {line}");
        for field in [
            "application-state",
            "application-name",
            "start-time",
            "end-time",
        ] {
            assert_eq!(line[field], entry.result[field], "{id}: {field}: {line}");
        }
    }
    assert_eq!(state_of(&stored_apps, APPLICATION_ID), ResultState::Dirty);
    assert_eq!(state_of(&stored_apps, other_app), ResultState::Clean);
    assert!(
        lines
            .iter()
            .all(|l| l.get("unlisted-dirty-result").is_none()),
        "{lines:#?}"
    );
}

per_backend!(
    #[tokio::test]
    flink_reads_the_export =>
        flink_reads_the_export_postgres,
        flink_reads_the_export_sqlite
);

// ---------------------------------------------------------------------------------------
// Hostile folders

/// `import --cluster CLUSTER --max-file-size LIMIT DIR`, within a minute.
fn import_at_most(db: &TestDb, cluster: &str, limit: &str, dir: &Path) -> Run {
    let args = [
        "import",
        "--cluster",
        cluster,
        "--max-file-size",
        limit,
        path_str(dir),
    ];
    jobstore_bounded(db, &args, Duration::from_secs(60))
}

fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("run mkfifo (coreutils)");
    assert!(status.success(), "mkfifo {}", path.display());
}

/// The `failed: NAME: reason` line of `name`, which must exist.
fn failure_line<'a>(run: &'a Run, name: &str) -> &'a str {
    run.stderr
        .lines()
        .find(|l| l.starts_with(&format!("failed: {name}: ")))
        .unwrap_or_else(|| panic!("{name} is not reported as failed\n{}", run.all()))
}

/// A dangling symbolic link, a FIFO named like a dirty result, a link to a FIFO, a sparse
/// file one byte over the default size limit, and an unlistable-looking mix of valid
/// files (one of them reached through a symbolic link): every valid file loads, every bad
/// one is reported by name and skipped, and the import finishes.
async fn import_skips_what_is_no_regular_file(backend: Backend) {
    use std::os::unix::fs::symlink;
    let db = TestDb::new(backend).await;
    let input = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let d = input.path();
    // Valid: three job files in DIR, one reached through a link, one in the subfolder.
    copy_reference(
        "job-result-store",
        JOB_IDS[0],
        d.join(format!("{}_DIRTY.json", JOB_IDS[0])),
    );
    copy_reference(
        "job-result-store",
        JOB_IDS[1],
        d.join(format!("{}.json", JOB_IDS[1])),
    );
    let linked = elsewhere.path().join("linked.json");
    copy_reference("job-result-store", JOB_IDS[2], &linked);
    symlink(&linked, d.join(format!("{}.json", JOB_IDS[2]))).unwrap();
    let sub = d.join("job-result-store");
    std::fs::create_dir(&sub).unwrap();
    copy_reference(
        "job-result-store",
        JOB_IDS[3],
        sub.join(format!("{}.json", JOB_IDS[3])),
    );
    // Bad ones.
    let dangling = format!("{}.json", JOB_IDS[4]);
    symlink(elsewhere.path().join("gone.json"), d.join(&dangling)).unwrap();
    symlink(elsewhere.path().join("gone"), d.join("not-a-result-link")).unwrap();
    let fifo = "00000000000000000000000000000002_DIRTY.json";
    mkfifo(&d.join(fifo));
    let fifo_target = elsewhere.path().join("fifo");
    mkfifo(&fifo_target);
    let fifo_link = "job-result-store/00000000000000000000000000000003.json";
    symlink(&fifo_target, d.join(fifo_link)).unwrap();
    let huge = "00000000000000000000000000000004.json";
    let file = std::fs::File::create(d.join(huge)).unwrap();
    // Sparse: no disk is used.
    file.set_len(64 * 1024 * 1024 + 1).unwrap();
    drop(file);

    let dir = path_str(d).to_owned();
    let run = jobstore_bounded(
        &db,
        &["import", "--cluster", "h", &dir],
        Duration::from_secs(60),
    );
    assert_eq!(
        run.code,
        Some(1),
        "failed files: exit status 1\n{}",
        run.all()
    );
    run.assert_counts([1, 3, 0, 0, 4]);
    assert!(
        failure_line(&run, &dangling).contains("dangling"),
        "{}",
        run.all()
    );
    assert!(failure_line(&run, fifo).contains("FIFO"), "{}", run.all());
    assert!(
        failure_line(&run, fifo_link).contains("symbolic link to a FIFO"),
        "{}",
        run.all()
    );
    assert!(
        failure_line(&run, huge).contains("67108865 bytes, more than --max-file-size 67108864"),
        "{}",
        run.all()
    );
    for bad in [dangling.as_str(), fifo, fifo_link, huge] {
        assert!(
            run.stdout.contains(bad),
            "the summary names {bad}\n{}",
            run.all()
        );
    }
    assert_eq!(
        run.count("ignored"),
        1,
        "the link without .json\n{}",
        run.all()
    );
    let jobs = db.entries(ResultKind::Job, "h").await;
    assert_eq!(
        jobs.keys().map(String::as_str).collect::<Vec<_>>(),
        JOB_IDS[..4].to_vec(),
        "every valid file loads, the linked one too"
    );
    assert_eq!(state_of(&jobs, JOB_IDS[0]), ResultState::Dirty);
    for id in &JOB_IDS[1..4] {
        assert_eq!(state_of(&jobs, id), ResultState::Clean, "{id}");
        assert_eq!(jobs[*id].result, job_file(id)["result"], "{id}");
    }

    // --max-file-size: a valid file over the limit is skipped, unread.
    let size = std::fs::metadata(reference("job-result-store", JOB_IDS[0]))
        .unwrap()
        .len();
    let small = tempfile::tempdir().unwrap();
    copy_reference(
        "job-result-store",
        JOB_IDS[0],
        small.path().join(format!("{}.json", JOB_IDS[0])),
    );
    let limit = (size - 1).to_string();
    let run = import_at_most(&db, "small", &limit, small.path());
    assert_eq!(run.code, Some(1), "{}", run.all());
    assert!(
        failure_line(&run, &format!("{}.json", JOB_IDS[0]))
            .contains(&format!("{size} bytes, more than --max-file-size {limit}")),
        "{}",
        run.all()
    );
    assert!(db.entries(ResultKind::Job, "small").await.is_empty());
    let at_limit = size.to_string();
    let run = import_at_most(&db, "small", &at_limit, small.path());
    assert_eq!(
        run.code,
        Some(0),
        "a file of exactly the limit loads\n{}",
        run.all()
    );

    // A file whose size says 0 but that reads longer (a file that grows while it is read
    // behaves the same): the bounded reader stops at the limit.
    let growing = tempfile::tempdir().unwrap();
    let name = format!("{}.json", JOB_IDS[4]);
    symlink("/proc/self/environ", growing.path().join(&name)).unwrap();
    let run = import_at_most(&db, "grow", "10", growing.path());
    assert_eq!(run.code, Some(1), "{}", run.all());
    assert!(
        failure_line(&run, &name).contains("more than 10 (it grew while read)"),
        "{}",
        run.all()
    );
}

per_backend!(
    #[tokio::test]
    import_skips_what_is_no_regular_file =>
        import_skips_what_is_no_regular_file_postgres,
        import_skips_what_is_no_regular_file_sqlite
);

/// A symbolic link planted at the name the old export used for its temporary file
/// (`.<name>.<pid>.tmp`, the pid known in advance: the shell `exec`s the export under its
/// own pid) points to a victim file: the victim is unchanged and the export correct.
/// A symbolic link planted as the export's subfolder is refused.
async fn export_follows_no_planted_link(backend: Backend) {
    use std::os::unix::fs::symlink;
    let db = TestDb::new(backend).await;
    let input = tempfile::tempdir().unwrap();
    copy_reference(
        "job-result-store",
        DIRTY_JOB,
        input.path().join(format!("{DIRTY_JOB}_DIRTY.json")),
    );
    let run = jobstore(&db, &["import", "--cluster", "x", path_str(input.path())]);
    assert_eq!(run.code, Some(0), "{}", run.all());

    let out = tempfile::tempdir().unwrap();
    let victims = tempfile::tempdir().unwrap();
    let victim = victims.path().join("victim");
    write(&victim, b"precious");
    let job_dir = out.path().join("job-result-store");
    std::fs::create_dir(&job_dir).unwrap();
    let name = format!("{DIRTY_JOB}_DIRTY.json");
    let script = r#"ln -s "$1" "$2/.$3.$$.tmp" && exec "$4" export --database-url "$5" --cluster x --kind job "$6""#;
    let output = Command::new("sh")
        .args(["-c", script, "sh"])
        .arg(&victim)
        .arg(&job_dir)
        .arg(&name)
        .arg(env!("CARGO_BIN_EXE_jobstore"))
        .arg(&db.url)
        .arg(out.path())
        .env("JOBSTORE_LOG", "warn")
        .output()
        .expect("run sh");
    let all = format!(
        "{}\n--- stdout\n{}--- stderr\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "{all}");
    assert_eq!(
        std::fs::read(&victim).unwrap(),
        b"precious",
        "the victim of the planted link is untouched\n{all}"
    );
    let exported = job_dir.join(&name);
    assert!(
        std::fs::symlink_metadata(&exported).unwrap().is_file(),
        "{name} is a regular file, not the planted link\n{all}"
    );
    assert_eq!(read_json(&exported), job_file(DIRTY_JOB), "{all}");
    // The mode a plain File::create gives (0666 less the umask), as before: a Flink running
    // as another user still reads the export.
    use std::os::unix::fs::PermissionsExt as _;
    let plain = victims.path().join("plain");
    std::fs::File::create(&plain).unwrap();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&exported), mode(&plain), "{all}");

    // A link planted as a subfolder: refused, nothing written where it points.
    let out = tempfile::tempdir().unwrap();
    let target = tempfile::tempdir().unwrap();
    symlink(target.path(), out.path().join("job-result-store")).unwrap();
    let run = jobstore(
        &db,
        &[
            "export",
            "--cluster",
            "x",
            "--kind",
            "job",
            path_str(out.path()),
        ],
    );
    assert_eq!(run.code, Some(1), "{}", run.all());
    assert!(run.stderr.contains("symbolic link"), "{}", run.all());
    assert!(
        file_names(target.path()).is_empty(),
        "nothing written through the link\n{}",
        run.all()
    );
}

per_backend!(
    #[tokio::test]
    export_follows_no_planted_link =>
        export_follows_no_planted_link_postgres,
        export_follows_no_planted_link_sqlite
);
