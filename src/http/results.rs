//! The job result store and the application result store: the same six requests, keyed by
//! `result.id` or `result.application-id`.

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use chrono::SecondsFormat;
use serde::ser::{Serialize, SerializeMap, Serializer};

use super::error::{ApiError, ApiResult};
use super::extract::{JsonValue, PathParams, QueryParams};
use super::{AppState, parse_cluster};
use crate::ids::ClusterId;
use crate::result_file::{ResultId, ResultKind, parse_envelope};
use crate::store::{Page, ResultEntry, ResultState, StateFilter, StoreError};

/// Default and largest page of a listing.
pub const DEFAULT_LIMIT: u32 = 1000;
pub const MAX_LIMIT: u32 = 10_000;

pub fn router(kind: ResultKind) -> Router<AppState> {
    let base = match kind {
        ResultKind::Job => "/v1/clusters/{cluster}/job-results",
        ResultKind::Application => "/v1/clusters/{cluster}/application-results",
    };
    Router::new()
        .route(
            base,
            get(move |s, p, q| list(kind, s, p, q)).post(move |s, p, b| create(kind, s, p, b)),
        )
        .route(
            &format!("{base}/{{id}}"),
            get(move |s, p| fetch(kind, s, p)).delete(move |s, p| remove(kind, s, p)),
        )
        .route(
            &format!("{base}/{{id}}/clean"),
            post(move |s, p| clean(kind, s, p)),
        )
}

/// An RFC 3339 UTC time as the API prints it.
pub fn time(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

/// An entry as the API shows it: `{"cluster-id", "<kind>-id", "state", "created-at",
/// "cleaned-at", "result"}`, in that order. Serialized straight from the store's entry,
/// without building a JSON tree around the result first (building and dropping that tree
/// was half of the instructions of a listing's answer; BENCHMARKS.md).
pub struct EntryBody {
    pub kind: ResultKind,
    pub entry: ResultEntry,
}

impl Serialize for EntryBody {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        EntryRef(self.kind, &self.entry).serialize(s)
    }
}

/// [`EntryBody`] borrowing its entry (the entries of a listing).
struct EntryRef<'a>(ResultKind, &'a ResultEntry);

impl Serialize for EntryRef<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let EntryRef(kind, e) = *self;
        let mut m = s.serialize_map(Some(6))?;
        m.serialize_entry("cluster-id", &e.cluster_id)?;
        m.serialize_entry(kind.entry_id_field(), &e.id)?;
        m.serialize_entry("state", e.state.as_str())?;
        m.serialize_entry("created-at", &time(e.created_at))?;
        m.serialize_entry("cleaned-at", &e.cleaned_at.map(time))?;
        m.serialize_entry("result", &e.result)?;
        m.end()
    }
}

/// A page of a listing: `{"<kind>-results": [entries], "next": id or null}`.
struct ListBody {
    kind: ResultKind,
    entries: Vec<ResultEntry>,
    next: Option<ResultId>,
}

impl Serialize for ListBody {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct Entries<'a>(ResultKind, &'a [ResultEntry]);
        impl Serialize for Entries<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_seq(self.1.iter().map(|e| EntryRef(self.0, e)))
            }
        }
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry(self.kind.list_field(), &Entries(self.kind, &self.entries))?;
        m.serialize_entry("next", &self.next)?;
        m.end()
    }
}

fn entry_path(cluster: &ClusterId, id: ResultId) -> String {
    match id.kind() {
        ResultKind::Job => format!("/v1/clusters/{cluster}/job-results/{id}"),
        ResultKind::Application => format!("/v1/clusters/{cluster}/application-results/{id}"),
    }
}

fn parse_key(
    kind: ResultKind, (cluster, id): (String, String),
) -> ApiResult<(ClusterId, ResultId)> {
    Ok((
        parse_cluster(&cluster)?,
        parse_id(kind, kind.entry_id_field(), &id)?,
    ))
}

/// An id of the kind's entries, named `what` in the message.
fn parse_id(kind: ResultKind, what: &str, raw: &str) -> ApiResult<ResultId> {
    ResultId::parse(kind, raw).map_err(|e| super::bad_id(what, raw, e))
}

async fn create(
    kind: ResultKind, State(state): State<AppState>, PathParams(cluster): PathParams<String>,
    JsonValue(body): JsonValue,
) -> ApiResult<Response> {
    let cluster = parse_cluster(&cluster)?;
    let (id, result) = parse_envelope(kind, body).map_err(ApiError::BadRequest)?;
    let entry = state
        .store
        .create_result(&cluster, id, &result)
        .await
        .map_err(|e| match e {
            StoreError::Conflict => ApiError::ResultExists(id),
            e => e.into(),
        })?;
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, entry_path(&cluster, id))],
        Json(EntryBody { kind, entry }),
    )
        .into_response())
}

async fn fetch(
    kind: ResultKind, State(state): State<AppState>, PathParams(key): PathParams<(String, String)>,
) -> ApiResult<Json<EntryBody>> {
    let (cluster, id) = parse_key(kind, key)?;
    match state.store.get_result(&cluster, id).await? {
        Some(entry) => Ok(Json(EntryBody { kind, entry })),
        None => Err(ApiError::ResultNotFound(id)),
    }
}

async fn clean(
    kind: ResultKind, State(state): State<AppState>, PathParams(key): PathParams<(String, String)>,
) -> ApiResult<Response> {
    let (cluster, id) = parse_key(kind, key)?;
    if state.config.delete_on_commit {
        return match state.store.delete_result(&cluster, id).await? {
            true => Ok(StatusCode::NO_CONTENT.into_response()),
            false => Err(ApiError::ResultNotPresent(id)),
        };
    }
    let entry = state
        .store
        .mark_result_clean(&cluster, id)
        .await
        .map_err(|e| match e {
            StoreError::NotFound => ApiError::ResultNotPresent(id),
            e => e.into(),
        })?;
    Ok(Json(EntryBody { kind, entry }).into_response())
}

async fn remove(
    kind: ResultKind, State(state): State<AppState>, PathParams(key): PathParams<(String, String)>,
) -> ApiResult<StatusCode> {
    let (cluster, id) = parse_key(kind, key)?;
    match state.store.delete_result(&cluster, id).await? {
        true => Ok(StatusCode::NO_CONTENT),
        false => Err(ApiError::ResultNotFound(id)),
    }
}

#[derive(serde::Deserialize)]
struct ListQuery {
    state: Option<String>,
    limit: Option<String>,
    after: Option<String>,
}

async fn list(
    kind: ResultKind, State(state): State<AppState>, PathParams(cluster): PathParams<String>,
    QueryParams(q): QueryParams<ListQuery>,
) -> ApiResult<Json<ListBody>> {
    let cluster = parse_cluster(&cluster)?;
    let filter = match q.state.as_deref() {
        None | Some("all") => StateFilter::All,
        Some("dirty") => StateFilter::Only(ResultState::Dirty),
        Some("clean") => StateFilter::Only(ResultState::Clean),
        Some(other) => {
            return Err(ApiError::BadRequest(format!(
                "query parameter `state` must be dirty, clean or all, got {other:?}"
            )));
        }
    };
    let limit = parse_limit(q.limit.as_deref())?;
    let after = q
        .after
        .as_deref()
        .map(|a| parse_id(kind, "after", a))
        .transpose()?;
    // One more than asked tells whether another page follows.
    let mut entries = state
        .store
        .list_results(
            kind,
            &cluster,
            filter,
            Page {
                after,
                limit: limit + 1,
            },
        )
        .await?;
    let next = if entries.len() > limit as usize {
        entries.truncate(limit as usize);
        entries.last().map(|e| e.id)
    } else {
        None
    };
    Ok(Json(ListBody {
        kind,
        entries,
        next,
    }))
}

/// `limit`: 1 to [`MAX_LIMIT`], [`DEFAULT_LIMIT`] when absent.
pub fn parse_limit(raw: Option<&str>) -> ApiResult<u32> {
    match raw {
        None => Ok(DEFAULT_LIMIT),
        Some(s) => s
            .parse::<u32>()
            .ok()
            .filter(|n| (1..=MAX_LIMIT).contains(n))
            .ok_or_else(|| {
                ApiError::BadRequest(format!(
                    "query parameter `limit` must be an integer from 1 to {MAX_LIMIT}, got {s:?}"
                ))
            }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Map, Value, json};

    /// The entry as a JSON tree, built the way the answers were built before they were
    /// serialized straight from the entry: the bytes must not change.
    fn as_tree(kind: ResultKind, e: &ResultEntry) -> Value {
        let mut m = Map::new();
        m.insert("cluster-id".into(), Value::String(e.cluster_id.to_string()));
        m.insert(
            kind.entry_id_field().into(),
            Value::String(e.id.to_string()),
        );
        m.insert("state".into(), Value::String(e.state.as_str().into()));
        m.insert("created-at".into(), Value::String(time(e.created_at)));
        m.insert(
            "cleaned-at".into(),
            e.cleaned_at.map(time).map_or(Value::Null, Value::String),
        );
        m.insert("result".into(), e.result.clone());
        Value::Object(m)
    }

    fn entries(kind: ResultKind) -> Vec<ResultEntry> {
        let id = |hex: &str| ResultId::parse(kind, hex).unwrap();
        let t = chrono::DateTime::parse_from_rfc3339("2026-11-30T09:33:41.123456Z")
            .unwrap()
            .to_utc();
        vec![
            ResultEntry {
                cluster_id: "prod-eu.1_a".parse().unwrap(),
                id: id("0123456789abcdef0123456789abcdef"),
                state: ResultState::Dirty,
                created_at: t,
                cleaned_at: None,
                result: json!({"zeta": 1, "alpha": [1.5, null, "ü\n"], "id": "x"}),
            },
            ResultEntry {
                cluster_id: "prod".parse().unwrap(),
                id: id("fedcba9876543210fedcba9876543210"),
                state: ResultState::Clean,
                created_at: t,
                cleaned_at: Some(t + chrono::Duration::seconds(3)),
                result: json!({"application-status": "SUCCEEDED", "b": {}, "a": u64::MAX}),
            },
        ]
    }

    #[test]
    fn an_entry_serializes_to_the_same_bytes_as_its_tree() {
        for kind in [ResultKind::Job, ResultKind::Application] {
            for entry in entries(kind) {
                let want = serde_json::to_string(&as_tree(kind, &entry)).unwrap();
                let got = serde_json::to_string(&EntryBody { kind, entry }).unwrap();
                assert_eq!(got, want);
            }
        }
    }

    #[test]
    fn a_page_serializes_to_the_same_bytes_as_its_tree() {
        for kind in [ResultKind::Job, ResultKind::Application] {
            for (entries, next) in [
                (
                    entries(kind),
                    Some(ResultId::parse(kind, "fedcba9876543210fedcba9876543210").unwrap()),
                ),
                (entries(kind), None),
                (Vec::new(), None),
            ] {
                let list: Vec<Value> = entries.iter().map(|e| as_tree(kind, e)).collect();
                let want = serde_json::to_string(&json!({ kind.list_field(): list, "next": next }))
                    .unwrap();
                let page = ListBody {
                    kind,
                    entries,
                    next,
                };
                assert_eq!(serde_json::to_string(&page).unwrap(), want);
            }
        }
    }
}
