//! Extractors whose rejections are the contract's error answers.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use utoipa::IntoParams;

use super::error::{ApiError, ApiResult};
use crate::ids::ClusterId;

/// A 400 answer: `what`, then the extractor's own text.
fn bad(what: &str, text: String) -> ApiError {
    ApiError::BadRequest(format!("{what}: {text}"))
}

/// Path parameters as strings; each handler parses its ids with its own messages.
pub struct PathParams<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for PathParams<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let path = axum::extract::Path::<T>::from_request_parts(parts, state).await;
        path.map(|p| PathParams(p.0)).map_err(|e| {
            bad(
                "Bad request, could not parse path parameters",
                e.body_text(),
            )
        })
    }
}

/// A route under `/v1/clusters/{cluster}`: the cluster as the request spelt it.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct ClusterPath {
    /// Flink's high-availability.cluster-id
    #[param(value_type = ClusterId)]
    pub cluster: String,
}

impl ClusterPath {
    pub fn cluster(&self) -> ApiResult<ClusterId> {
        super::parse_cluster(&self.cluster)
    }
}

/// The cluster of a route under `/v1/clusters/{cluster}`, checked (its parameter is
/// documented by [`ClusterPath`]).
pub struct Cluster(pub ClusterId);

impl<S: Send + Sync> FromRequestParts<S> for Cluster {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let PathParams(path) = PathParams::<ClusterPath>::from_request_parts(parts, state).await?;
        path.cluster().map(Cluster)
    }
}

/// A route under `/v1/clusters/{cluster}` or `/v1/clusters/{cluster}/jobs/{jobid}`: the
/// cluster and the job, as the request spelt them.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct JobScopePath {
    /// Flink's high-availability.cluster-id
    #[param(value_type = ClusterId)]
    pub cluster: String,
    /// Flink job id
    #[param(value_type = crate::ids::JobId)]
    pub jobid: Option<String>,
}

impl JobScopePath {
    /// The cluster and, under `/jobs/{jobid}/`, the job.
    pub fn scope(&self) -> ApiResult<(ClusterId, Option<crate::ids::JobId>)> {
        let cluster = super::parse_cluster(&self.cluster)?;
        let job = self
            .jobid
            .as_deref()
            .map(|j| super::parse_hex("job id", j))
            .transpose()?;
        Ok((cluster, job))
    }
}

/// The query string, deserialised with a 400 answer when it does not fit.
pub struct QueryParams<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for QueryParams<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let query = axum::extract::Query::<T>::from_request_parts(parts, state).await;
        query
            .map(|q| QueryParams(q.0))
            .map_err(|e| bad("malformed query string", e.body_text()))
    }
}

/// The body read whole (within the body limit), with a 413 answer beyond it.
pub struct RawBody(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for RawBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        Bytes::from_request(req, state)
            .await
            .map(RawBody)
            .map_err(|e| {
                if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                    ApiError::PayloadTooLarge
                } else {
                    ApiError::BadRequest(format!(
                        "could not read the request body: {}",
                        e.body_text()
                    ))
                }
            })
    }
}

/// The items of every `name` header of a request, split at `separator` and trimmed (the
/// tags of `If-None-Match`, the pairs of `Cookie`).
pub fn header_items(
    headers: &axum::http::HeaderMap, name: axum::http::HeaderName, separator: char,
) -> impl Iterator<Item = &str> {
    headers
        .get_all(name)
        .into_iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(move |v| v.split(separator))
        .map(str::trim)
}

/// Whether the request says its body is JSON (`application/json` or `application/*+json`).
pub fn is_json(parts_headers: &axum::http::HeaderMap) -> bool {
    let Some(ct) = parts_headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let mime = ct
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    mime == "application/json" || (mime.starts_with("application/") && mime.ends_with("+json"))
}

/// A JSON body that must be there: 415 without a JSON content type, 400 when it does not
/// parse, 413 over the limit.
pub struct JsonValue(pub serde_json::Value);

impl<S: Send + Sync> FromRequest<S> for JsonValue {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        if !is_json(req.headers()) {
            return Err(ApiError::UnsupportedMediaType);
        }
        let RawBody(bytes) = RawBody::from_request(req, state).await?;
        serde_json::from_slice(&bytes)
            .map(JsonValue)
            .map_err(|e| ApiError::BadRequest(format!("the body is not valid JSON: {e}")))
    }
}
