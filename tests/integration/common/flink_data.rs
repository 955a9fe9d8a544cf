//! The copies of Flink 2.3.0's result files kept with the tests (`tests/data/flink-2.3.0`)
//! and the shared originals beside the repository.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::Kind;

/// Folder of the copies of Flink 2.3.0's files kept with the tests.
pub fn flink_data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/flink-2.3.0")
}

/// Folder of the shared originals (`../shared/flink-reference` beside the repository).
pub fn shared_reference_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/flink-reference")
}

/// The `*.json` files of `dir`, sorted by name, as (file name, parsed JSON, raw bytes).
pub fn json_files(dir: &Path) -> Vec<(String, Value, Vec<u8>)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let raw = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            let json = serde_json::from_slice(&raw)
                .unwrap_or_else(|e| panic!("{} is not JSON: {e}", p.display()));
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, json, raw)
        })
        .collect()
}

/// Flink 2.3.0's files of one store, from `tests/data` (five job results, one application
/// result).
pub fn flink_files(kind: Kind) -> Vec<(String, Value)> {
    let dir = flink_data_dir().join(match kind {
        Kind::Job => "job-result-store",
        Kind::Application => "application-result-store",
    });
    json_files(&dir)
        .into_iter()
        .map(|(name, json, _)| (name, json))
        .collect()
}
