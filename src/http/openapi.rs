//! The OpenAPI document, generated: every route registers its handler and its operation
//! together (`#[utoipa::path]` on the handler, `utoipa_axum::routes!` in its module's
//! router), and every body, answer and parameter is a Rust type that derives its schema.
//! This module adds what is the document's own: its header and security, Flink's routes
//! under each of their prefixes ([`flink_routes`]), and the operation ids. Served at
//! `/openapi.json`; a snapshot test (`tests/integration/openapi.rs`) keeps every change of
//! the API visible in review and checks that every documented operation is routed.

use std::sync::LazyLock;

use serde_json::Value;
use utoipa::openapi::RefOr;
use utoipa::openapi::path::{Operation, Parameter, ParameterIn, PathItem, Paths};
use utoipa::openapi::schema::{Schema, SchemaType, Type};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{IntoParams, OpenApi};
use utoipa_axum::router::{OpenApiRouter, UtoipaMethodRouter};

use super::AppState;
use super::extract::{ClusterPath, JobScopePath};

/// The document's header, security and the schemas no route names directly.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "jobstore",
        description = "A shared, SQL-inspectable store for Apache Flink's job results, application results and savepoint operations. Errors are {\"errors\": [\"<message>\"]}."
    ),
    servers((url = "/")),
    security((), ("bearerAuth" = [])),
    modifiers(&BearerAuth)
)]
struct Header;

/// The `bearerAuth` scheme (`--token`; see README "Auth").
struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, api: &mut utoipa::openapi::OpenApi) {
        let components = api.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearerAuth",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// A path prefix under which routes are registered again: its parameters, and what it is
/// called in the routes' summaries (written in place of `{scope}`).
pub struct Scope {
    prefix: &'static str,
    name: &'static str,
    params: fn() -> Vec<Parameter>,
}

fn no_params() -> Vec<Parameter> {
    Vec::new()
}

fn cluster_params() -> Vec<Parameter> {
    ClusterPath::into_params(|| Some(ParameterIn::Path))
}

fn job_params() -> Vec<Parameter> {
    JobScopePath::into_params(|| Some(ParameterIn::Path))
}

/// Where Flink's own routes are answered (`super::FLINK_PREFIXES`): as Flink serves them, as
/// Flink's REST client sends them (both on the default cluster), and per cluster.
pub const FLINK_SCOPES: [Scope; 3] = [
    Scope {
        prefix: "",
        name: " (default cluster)",
        params: no_params,
    },
    Scope {
        prefix: "/v1",
        name: " (default cluster; the path Flink's REST client sends)",
        params: no_params,
    },
    Scope {
        prefix: "/v1/clusters/{cluster}",
        name: "",
        params: cluster_params,
    },
];

/// Where a savepoint schedule or retention policy is set: a cluster's, and a job's override.
pub const SETTING_SCOPES: [Scope; 2] = [
    Scope {
        prefix: "/v1/clusters/{cluster}",
        name: "the cluster's",
        params: cluster_params,
    },
    Scope {
        prefix: "/v1/clusters/{cluster}/jobs/{jobid}",
        name: "a job's override of the cluster's",
        params: job_params,
    },
];

/// Registers routes (whose `#[utoipa::path]` names the path below the scopes' prefixes and
/// whose summary says `{scope}`) under each scope, with the scope's parameters first.
pub fn scoped_routes(
    mut router: OpenApiRouter<AppState>,
    (schemas, paths, method_router): UtoipaMethodRouter<AppState>, scopes: &[Scope],
) -> OpenApiRouter<AppState> {
    for scope in scopes {
        let mut prefixed = Paths::new();
        for (path, item) in &paths.paths {
            let mut item = item.clone();
            for op in operations(&mut item) {
                if let Some(summary) = &mut op.summary {
                    *summary = summary.replace("{scope}", scope.name);
                }
                let mut params: Vec<_> = (scope.params)().into_iter().map(RefOr::T).collect();
                params.extend(op.parameters.take().unwrap_or_default());
                op.parameters = (!params.is_empty()).then_some(params);
            }
            prefixed
                .paths
                .insert(format!("{}{path}", scope.prefix), item);
        }
        router = router.routes((schemas.clone(), prefixed, method_router.clone()));
    }
    router
}

/// [`scoped_routes`] under Flink's prefixes.
pub fn flink_routes(
    router: OpenApiRouter<AppState>, routes: UtoipaMethodRouter<AppState>,
) -> OpenApiRouter<AppState> {
    scoped_routes(router, routes, &FLINK_SCOPES)
}

/// The operations of a path item, with their methods.
fn operations(item: &mut PathItem) -> impl Iterator<Item = &mut Operation> {
    methods(item).into_iter().filter_map(|(_, op)| op.as_mut())
}

fn methods(item: &mut PathItem) -> [(&'static str, &mut Option<Operation>); 5] {
    [
        ("get", &mut item.get),
        ("put", &mut item.put),
        ("post", &mut item.post),
        ("delete", &mut item.delete),
        ("head", &mut item.head),
    ]
}

/// The routes' operations, finished: each operation's id is its method and path (so that
/// the id stays unique and stable when a handler serves several paths); the probes
/// (`/healthz`, `/readyz`, `/metrics`) need no token; and what may be left out (an optional
/// parameter or body, an `Option` in Rust) is not required, but never `null` (no route takes
/// a `null` for it).
fn finish(mut api: utoipa::openapi::OpenApi) -> utoipa::openapi::OpenApi {
    for (path, item) in api.paths.paths.iter_mut() {
        for (method, op) in methods(item) {
            let Some(op) = op else { continue };
            for param in op.parameters.iter_mut().flatten() {
                if let RefOr::T(param) = param
                    && let Some(schema) = &mut param.schema
                {
                    not_null(schema);
                }
            }
            if let Some(RefOr::T(body)) = &mut op.request_body {
                for content in body.content.values_mut() {
                    if let RefOr::T(content) = content
                        && let Some(schema) = &mut content.schema
                    {
                        not_null(schema);
                    }
                }
            }
            op.operation_id = Some(format!(
                "{method}{}",
                path.replace(['/', '{', '}', '-', '.'], "_")
            ));
            if matches!(path.as_str(), "/healthz" | "/readyz" | "/metrics") {
                op.security = Some(Vec::new());
            }
        }
    }
    api
}

/// The schema without its `null` alternative (`Option<T>` is `oneOf: [T, null]`, or a
/// type list with `null`).
fn not_null(schema: &mut RefOr<Schema>) {
    let RefOr::T(s) = schema else { return };
    match s {
        Schema::OneOf(one_of) => {
            let null = |item: &RefOr<Schema>| matches!(item, RefOr::T(Schema::Object(o)) if o.schema_type == SchemaType::Type(Type::Null));
            one_of.items.retain(|item| !null(item));
            if one_of.items.len() == 1 {
                *schema = one_of.items.remove(0);
            }
        }
        Schema::Object(o) => {
            if let SchemaType::Array(types) = &o.schema_type {
                let types: Vec<Type> = types
                    .iter()
                    .filter(|t| **t != Type::Null)
                    .cloned()
                    .collect();
                o.schema_type = match types.as_slice() {
                    [one] => SchemaType::Type(one.clone()),
                    _ => SchemaType::Array(types),
                };
            }
        }
        _ => {}
    }
}

/// The whole document (built once).
pub fn document() -> &'static Value {
    static DOCUMENT: LazyLock<Value> = LazyLock::new(|| {
        let routes = OpenApiRouter::with_openapi(Header::openapi()).merge(super::routes());
        serde_json::to_value(finish(routes.into_openapi())).expect("the document serializes")
    });
    &DOCUMENT
}
