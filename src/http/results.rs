//! The job result store and the application result store: the same six requests, keyed by
//! `result.id` or `result.application-id`, under one route module per kind (`job` and
//! `application`, made by one macro) so that each route has its own OpenAPI operation.

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::answers::{Nullable, Time};
use super::error::{ApiError, ApiResult, ErrorBody};
use super::extract::{ClusterPath, JsonValue, PathParams, QueryParams};
use super::{AppState, parse_cluster};
use crate::ids::{ApplicationId, ClusterId, JobId};
use crate::result_file::schema::{
    ApplicationResult, ApplicationResultFile, JobResult, JobResultFile,
};
use crate::result_file::{ResultId, ResultKind, parse_envelope};
use crate::store::{Page, ResultEntry, ResultState, StateFilter, StoreError};

/// Default and largest page of a listing.
pub const DEFAULT_LIMIT: u32 = 1000;
pub const MAX_LIMIT: u32 = 10_000;

/// Both result stores' routes.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .merge(job::router())
        .merge(application::router())
}

/// Defines a result kind's answers: an entry (`{"cluster-id", "<kind>-id", "state",
/// "created-at", "cleaned-at", "result"}`, in that order, the result as it was sent) and a
/// page of a listing (`{"<kind>-results": [entries], "next": id or null}`).
macro_rules! result_answers {
    ($entry:ident, $list:ident, $id:ident: $id_type:ty, $list_field:tt, $result:ty) => {
        #[derive(Serialize, ToSchema)]
        #[serde(rename_all = "kebab-case")]
        pub struct $entry<'a> {
            pub cluster_id: &'a ClusterId,
            #[schema(value_type = $id_type)]
            pub $id: ResultId,
            pub state: ResultState,
            pub created_at: Time,
            pub cleaned_at: Nullable<Time>,
            #[schema(value_type = $result)]
            pub result: &'a Value,
        }

        #[derive(Serialize, ToSchema)]
        pub struct $list<'a> {
            #[serde(rename = $list_field)]
            pub entries: Vec<$entry<'a>>,
            /// the cursor of the next page (`after`); null on the last
            #[schema(value_type = Option<$id_type>, required)]
            pub next: Option<ResultId>,
        }
    };
}

result_answers!(JobResultEntry, JobResultList, job_id: JobId, "job-results", JobResult);
result_answers!(
    ApplicationResultEntry,
    ApplicationResultList,
    application_id: ApplicationId,
    "application-results",
    ApplicationResult
);

/// A result-store entry's path: the cluster and the entry's id (parsed by the route, with
/// the message naming the kind's id field).
#[derive(Deserialize)]
struct EntryPath {
    cluster: String,
    id: String,
}

impl EntryPath {
    fn key(&self, kind: ResultKind) -> ApiResult<(ClusterId, ResultId)> {
        Ok((
            parse_cluster(&self.cluster)?,
            parse_id(kind, kind.entry_id_field(), &self.id)?,
        ))
    }
}

/// `GET .../job-results` and `.../application-results`.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ListQuery {
    /// dirty, clean or all (default)
    #[param(inline, value_type = Option<StateParam>)]
    state: Option<String>,
    /// page size, 1-10000 (default 1000)
    #[param(value_type = Option<u32>, minimum = 1, maximum = 10000)]
    limit: Option<String>,
    /// the `next` cursor of the previous page
    #[param(value_type = Option<JobId>)]
    after: Option<String>,
}

// The values of a listing's `state`.
#[derive(ToSchema)]
#[schema(rename_all = "lowercase")]
#[allow(dead_code)] // a parameter's schema
enum StateParam {
    Dirty,
    Clean,
    All,
}

fn entry_path(cluster: &ClusterId, id: ResultId) -> String {
    match id.kind() {
        ResultKind::Job => format!("/v1/clusters/{cluster}/job-results/{id}"),
        ResultKind::Application => format!("/v1/clusters/{cluster}/application-results/{id}"),
    }
}

/// An id of the kind's entries, named `what` in the message.
fn parse_id(kind: ResultKind, what: &str, raw: &str) -> ApiResult<ResultId> {
    ResultId::parse(kind, raw).map_err(|e| super::bad_id(what, raw, e))
}

/// `createDirtyResult`: the entry created, and its path.
async fn create(
    kind: ResultKind, state: &AppState, cluster: &str, body: Value,
) -> ApiResult<(String, ResultEntry)> {
    let cluster = parse_cluster(cluster)?;
    let (id, result) = parse_envelope(kind, body).map_err(ApiError::BadRequest)?;
    let entry = state
        .store
        .create_result(&cluster, id, &result)
        .await
        .map_err(|e| match e {
            StoreError::Conflict => ApiError::ResultExists(id),
            e => e.into(),
        })?;
    Ok((entry_path(&cluster, id), entry))
}

async fn fetch(kind: ResultKind, state: &AppState, path: &EntryPath) -> ApiResult<ResultEntry> {
    let (cluster, id) = path.key(kind)?;
    match state.store.get_result(&cluster, id).await? {
        Some(entry) => Ok(entry),
        None => Err(ApiError::ResultNotFound(id)),
    }
}

/// `markResultAsClean`: the entry, clean; `None` when `--delete-on-commit` deleted it.
async fn clean(
    kind: ResultKind, state: &AppState, path: &EntryPath,
) -> ApiResult<Option<ResultEntry>> {
    let (cluster, id) = path.key(kind)?;
    if state.config.delete_on_commit {
        return match state.store.delete_result(&cluster, id).await? {
            true => Ok(None),
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
    Ok(Some(entry))
}

async fn remove(kind: ResultKind, state: &AppState, path: &EntryPath) -> ApiResult<StatusCode> {
    let (cluster, id) = path.key(kind)?;
    match state.store.delete_result(&cluster, id).await? {
        true => Ok(StatusCode::NO_CONTENT),
        false => Err(ApiError::ResultNotFound(id)),
    }
}

/// A page of entries and the id of the last one when another page follows.
async fn list(
    kind: ResultKind, state: &AppState, cluster: &str, q: ListQuery,
) -> ApiResult<(Vec<ResultEntry>, Option<ResultId>)> {
    let cluster = parse_cluster(cluster)?;
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
    Ok((entries, next))
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

/// Defines the routes of one result kind in module `$module`: the six requests with their
/// OpenAPI operations, answering `$entry`s and `$list`s of ids of `ResultId::$variant`.
macro_rules! result_routes {
    (
        mod $module:ident, $kind:ident, $base:literal, $noun:literal, $tag:literal,
        $file:ty, $entry:ident, $list:ident, $id:ident, $id_type:ty
    ) => {
        pub mod $module {
            use super::*;

            const KIND: ResultKind = ResultKind::$kind;

            pub(super) fn router() -> OpenApiRouter<AppState> {
                OpenApiRouter::new()
                    .routes(routes!(create_entry, list_entries))
                    .routes(routes!(get_entry, head_entry, delete_entry))
                    .routes(routes!(clean_entry))
            }

            /// The answer of an entry of this kind.
            pub fn answer(e: &ResultEntry) -> $entry<'_> {
                $entry {
                    cluster_id: &e.cluster_id,
                    $id: e.id,
                    state: e.state,
                    created_at: Time::of(e.created_at),
                    cleaned_at: e.cleaned_at.map(Time::of).into(),
                    result: &e.result,
                }
            }

            #[utoipa::path(post, path = $base, tag = $tag, summary = concat!("Register a dirty ", $noun, " result (createDirtyResult)"), params(ClusterPath), request_body(content = $file), responses((status = 201, description = "Created, state dirty", body = $entry), (status = 400, description = "Malformed id or body", body = ErrorBody), (status = 409, description = "An entry with this id exists (dirty or clean)", body = ErrorBody), (status = 413, description = "Body over the limit", body = ErrorBody), (status = 415, description = "Not a JSON body", body = ErrorBody), (status = 503, description = "The database is unavailable", body = ErrorBody)))]
            async fn create_entry(
                State(state): State<AppState>, PathParams(path): PathParams<ClusterPath>,
                JsonValue(body): JsonValue,
            ) -> ApiResult<Response> {
                let (location, entry) = create(KIND, &state, &path.cluster, body).await?;
                let answer = Json(answer(&entry));
                Ok((StatusCode::CREATED, [(header::LOCATION, location)], answer).into_response())
            }

            #[utoipa::path(get, path = $base, tag = $tag, summary = concat!("List ", $noun, " results of a cluster, ordered by id (getDirtyResults with state=dirty)"), params(ClusterPath, ListQuery), responses((status = 200, description = "A page of entries", body = $list), (status = 400, description = "Malformed query", body = ErrorBody), (status = 503, description = "The database is unavailable", body = ErrorBody)))]
            async fn list_entries(
                State(state): State<AppState>, PathParams(path): PathParams<ClusterPath>,
                QueryParams(q): QueryParams<ListQuery>,
            ) -> ApiResult<Response> {
                let (entries, next) = list(KIND, &state, &path.cluster, q).await?;
                let page = $list {
                    entries: entries.iter().map(answer).collect(),
                    next,
                };
                Ok(Json(page).into_response())
            }

            #[utoipa::path(get, path = concat!($base, "/{id}"), tag = $tag, summary = concat!("Read one ", $noun, " result"), params(ClusterPath, ("id" = $id_type, Path, description = concat!("the ", $noun, " id"))), responses((status = 200, description = "The entry", body = $entry), (status = 400, description = "Malformed id", body = ErrorBody), (status = 404, description = "No such entry", body = ErrorBody), (status = 503, description = "The database is unavailable", body = ErrorBody)))]
            async fn get_entry(
                State(state): State<AppState>, PathParams(path): PathParams<EntryPath>,
            ) -> ApiResult<Response> {
                let entry = fetch(KIND, &state, &path).await?;
                Ok(Json(answer(&entry)).into_response())
            }

            #[utoipa::path(head, path = concat!($base, "/{id}"), tag = $tag, summary = concat!("Whether a ", $noun, " result exists (hasJobResultEntry)"), params(ClusterPath, ("id" = $id_type, Path, description = concat!("the ", $noun, " id"))), responses((status = 200, description = "Present"), (status = 400, description = "Malformed id"), (status = 404, description = "Absent")))]
            async fn head_entry(
                state: State<AppState>, path: PathParams<EntryPath>,
            ) -> ApiResult<Response> {
                // The answer of GET, whose body the server leaves out.
                get_entry(state, path).await
            }

            #[utoipa::path(delete, path = concat!($base, "/{id}"), tag = $tag, summary = concat!("Remove a stale ", $noun, " result (an operator's tool)"), params(ClusterPath, ("id" = $id_type, Path, description = concat!("the ", $noun, " id"))), responses((status = 204, description = "Removed"), (status = 400, description = "Malformed id", body = ErrorBody), (status = 404, description = "No such entry", body = ErrorBody), (status = 503, description = "The database is unavailable", body = ErrorBody)))]
            async fn delete_entry(
                State(state): State<AppState>, PathParams(path): PathParams<EntryPath>,
            ) -> ApiResult<StatusCode> {
                remove(KIND, &state, &path).await
            }

            #[utoipa::path(post, path = concat!($base, "/{id}/clean"), tag = $tag, summary = concat!("Mark a ", $noun, " result clean (markResultAsClean)"), params(ClusterPath, ("id" = $id_type, Path, description = concat!("the ", $noun, " id"))), responses((status = 200, description = "Clean (also when it already was; cleaned-at unchanged)", body = $entry), (status = 204, description = "Deleted (with --delete-on-commit)"), (status = 400, description = "Malformed id", body = ErrorBody), (status = 404, description = "Not present in the store", body = ErrorBody), (status = 503, description = "The database is unavailable", body = ErrorBody)))]
            async fn clean_entry(
                State(state): State<AppState>, PathParams(path): PathParams<EntryPath>,
            ) -> ApiResult<Response> {
                Ok(match clean(KIND, &state, &path).await? {
                    Some(entry) => Json(answer(&entry)).into_response(),
                    None => StatusCode::NO_CONTENT.into_response(),
                })
            }
        }
    };
}

result_routes!(
    mod job, Job, "/v1/clusters/{cluster}/job-results", "job", "job results",
    JobResultFile, JobResultEntry, JobResultList, job_id, JobId
);
result_routes!(
    mod application, Application, "/v1/clusters/{cluster}/application-results", "application",
    "application results", ApplicationResultFile, ApplicationResultEntry, ApplicationResultList,
    application_id, ApplicationId
);

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
        let time = |t: chrono::DateTime<chrono::Utc>| {
            Value::String(t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true))
        };
        m.insert("created-at".into(), time(e.created_at));
        m.insert("cleaned-at".into(), e.cleaned_at.map_or(Value::Null, time));
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
                let got = match kind {
                    ResultKind::Job => serde_json::to_string(&job::answer(&entry)),
                    ResultKind::Application => serde_json::to_string(&application::answer(&entry)),
                }
                .unwrap();
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
                let got = match kind {
                    ResultKind::Job => serde_json::to_string(&JobResultList {
                        entries: entries.iter().map(job::answer).collect(),
                        next,
                    }),
                    ResultKind::Application => serde_json::to_string(&ApplicationResultList {
                        entries: entries.iter().map(application::answer).collect(),
                        next,
                    }),
                }
                .unwrap();
                assert_eq!(got, want);
            }
        }
    }
}
