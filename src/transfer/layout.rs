//! Flink's file layout of a result store: one folder per store, one file per entry,
//! `<id>_DIRTY.json` while dirty and `<id>.json` once clean, with the content
//! `{"result": {...}, "version": 1}`.

use serde_json::Value;

use crate::result_file::{ResultId, ResultKind};
use crate::store::{ResultEntry, ResultState};

/// The folder of the job result store inside an export (and an import) directory.
pub const JOB_DIR: &str = "job-result-store";
/// The folder of the application result store inside an export (and an import) directory.
pub const APPLICATION_DIR: &str = "application-result-store";
/// Flink's suffix of a dirty entry's file.
pub(crate) const DIRTY_SUFFIX: &str = "_DIRTY.json";
pub(crate) const JSON_SUFFIX: &str = ".json";

/// The folder of a kind's store.
pub fn folder(kind: ResultKind) -> &'static str {
    match kind {
        ResultKind::Job => JOB_DIR,
        ResultKind::Application => APPLICATION_DIR,
    }
}

/// The id (of `kind`) and state a file name says: `<id>.json` or `<id>_DIRTY.json`.
pub fn parse_file_name(kind: ResultKind, name: &str) -> Option<(ResultId, ResultState)> {
    let (stem, state) = match name.strip_suffix(DIRTY_SUFFIX) {
        Some(stem) => (stem, ResultState::Dirty),
        None => (name.strip_suffix(JSON_SUFFIX)?, ResultState::Clean),
    };
    Some((ResultId::parse(kind, stem).ok()?, state))
}

/// The file name of an entry in Flink's layout.
pub fn file_name(id: &ResultId, state: ResultState) -> String {
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

/// Which store a file's content belongs to: a `result` with `application-id` and no `id`
/// is an application result, anything else a job result.
pub fn detect_kind(value: &Value) -> ResultKind {
    let result = value.get("result").and_then(Value::as_object);
    match result {
        Some(r) if r.contains_key("application-id") && !r.contains_key("id") => {
            ResultKind::Application
        }
        _ => ResultKind::Job,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn file_names() {
        let id = "38dcc0b26ce09271cefd5020d41b4b88";
        let hex = ResultId::parse(ResultKind::Job, id).unwrap();
        assert_eq!(
            parse_file_name(ResultKind::Job, &format!("{id}.json")),
            Some((hex, ResultState::Clean))
        );
        assert_eq!(
            parse_file_name(
                ResultKind::Job,
                &format!("{}_DIRTY.json", id.to_uppercase())
            ),
            Some((hex, ResultState::Dirty))
        );
        for bad in [
            "x.json",
            "_DIRTY.json",
            &format!("{id}_dirty.json"),
            &format!("{id}.JSON"),
        ] {
            assert_eq!(parse_file_name(ResultKind::Job, bad), None, "{bad}");
        }
        assert_eq!(
            file_name(&hex, ResultState::Dirty),
            format!("{id}_DIRTY.json")
        );
        assert_eq!(file_name(&hex, ResultState::Clean), format!("{id}.json"));
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
        let id = "38dcc0b26ce09271cefd5020d41b4b88";
        let entry = ResultEntry {
            cluster_id: "c".parse().unwrap(),
            id: ResultId::parse(ResultKind::Job, id).unwrap(),
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
