//! The OpenAPI 3 document of every route, built here from one table of operations and
//! served at `/openapi.json`. A snapshot test (`tests/openapi.rs`) keeps every change of
//! the API visible in review, and checks that every documented operation is routed.

use serde_json::{Map, Value, json};

use crate::result_file::{APPLICATION_STATUSES, ResultKind};

/// One documented operation: method, path, tag, summary, parameters, body and answers.
pub struct Operation {
    pub method: &'static str,
    pub path: String,
    tag: &'static str,
    summary: String,
    params: Vec<Value>,
    body: Option<Value>,
    responses: Vec<(u16, &'static str, Option<Value>)>,
}

fn schema_ref(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

fn path_param(name: &str, description: &str, schema: Value) -> Value {
    json!({"name": name, "in": "path", "required": true, "description": description, "schema": schema})
}

fn query_param(name: &str, description: &str, schema: Value) -> Value {
    json!({"name": name, "in": "query", "required": false, "description": description, "schema": schema})
}

fn hex_id() -> Value {
    schema_ref("HexId")
}

fn cluster_param() -> Value {
    path_param(
        "cluster",
        "Flink's high-availability.cluster-id",
        schema_ref("ClusterId"),
    )
}

fn json_body(schema: Value, required: bool) -> Value {
    json!({"required": required, "content": {"application/json": {"schema": schema}}})
}

fn err(code: u16, description: &'static str) -> (u16, &'static str, Option<Value>) {
    (code, description, Some(schema_ref("Error")))
}

fn ok(code: u16, description: &'static str, schema: &str) -> (u16, &'static str, Option<Value>) {
    (code, description, Some(schema_ref(schema)))
}

fn result_operations(kind: ResultKind) -> Vec<Operation> {
    let (base, entry, list, file, tag, noun) = match kind {
        ResultKind::Job => (
            "/v1/clusters/{cluster}/job-results",
            "JobResultEntry",
            "JobResultList",
            "JobResultFile",
            "job results",
            "job",
        ),
        ResultKind::Application => (
            "/v1/clusters/{cluster}/application-results",
            "ApplicationResultEntry",
            "ApplicationResultList",
            "ApplicationResultFile",
            "application results",
            "application",
        ),
    };
    let one = format!("{base}/{{id}}");
    let id = || path_param("id", &format!("the {noun} id"), hex_id());
    let unavailable = || err(503, "The database is unavailable");
    vec![
        Operation {
            method: "post",
            path: base.into(),
            tag,
            summary: format!("Register a dirty {noun} result (createDirtyResult)"),
            params: vec![cluster_param()],
            body: Some(json_body(schema_ref(file), true)),
            responses: vec![
                ok(201, "Created, state dirty", entry),
                err(400, "Malformed id or body"),
                err(409, "An entry with this id exists (dirty or clean)"),
                err(413, "Body over the limit"),
                err(415, "Not a JSON body"),
                unavailable(),
            ],
        },
        Operation {
            method: "get",
            path: base.into(),
            tag,
            summary: format!(
                "List {noun} results of a cluster, ordered by id (getDirtyResults with state=dirty)"
            ),
            params: vec![
                cluster_param(),
                query_param(
                    "state",
                    "dirty, clean or all (default)",
                    json!({"type": "string", "enum": ["dirty", "clean", "all"]}),
                ),
                query_param(
                    "limit",
                    "page size, 1-10000 (default 1000)",
                    json!({"type": "integer", "minimum": 1, "maximum": 10000}),
                ),
                query_param("after", "the `next` cursor of the previous page", hex_id()),
            ],
            body: None,
            responses: vec![
                ok(200, "A page of entries", list),
                err(400, "Malformed query"),
                unavailable(),
            ],
        },
        Operation {
            method: "get",
            path: one.clone(),
            tag,
            summary: format!("Read one {noun} result"),
            params: vec![cluster_param(), id()],
            body: None,
            responses: vec![
                ok(200, "The entry", entry),
                err(400, "Malformed id"),
                err(404, "No such entry"),
                unavailable(),
            ],
        },
        Operation {
            method: "head",
            path: one.clone(),
            tag,
            summary: format!("Whether a {noun} result exists (hasJobResultEntry)"),
            params: vec![cluster_param(), id()],
            body: None,
            responses: vec![
                (200, "Present", None),
                (400, "Malformed id", None),
                (404, "Absent", None),
            ],
        },
        Operation {
            method: "delete",
            path: one.clone(),
            tag,
            summary: format!("Remove a stale {noun} result (an operator's tool)"),
            params: vec![cluster_param(), id()],
            body: None,
            responses: vec![
                (204, "Removed", None),
                err(400, "Malformed id"),
                err(404, "No such entry"),
                unavailable(),
            ],
        },
        Operation {
            method: "post",
            path: format!("{one}/clean"),
            tag,
            summary: format!("Mark a {noun} result clean (markResultAsClean)"),
            params: vec![cluster_param(), id()],
            body: None,
            responses: vec![
                ok(
                    200,
                    "Clean (also when it already was; cleaned-at unchanged)",
                    entry,
                ),
                (204, "Deleted (with --delete-on-commit)", None),
                err(400, "Malformed id"),
                err(404, "Not present in the store"),
                unavailable(),
            ],
        },
    ]
}

/// Where Flink's own routes are answered (`http::FLINK_PREFIXES`), and what each names.
fn flink_prefixes() -> [(&'static str, &'static str); 3] {
    [
        ("", " (default cluster)"),
        (
            "/v1",
            " (default cluster; the path Flink's REST client sends)",
        ),
        ("/v1/clusters/{cluster}", ""),
    ]
}

fn savepoint_operations() -> Vec<Operation> {
    let mut ops = Vec::new();
    let job = || path_param("jobid", "Flink job id", hex_id());
    for (prefix, scope) in flink_prefixes() {
        let params = |extra: Vec<Value>| {
            let mut p = if prefix.is_empty() {
                vec![]
            } else {
                vec![cluster_param()]
            };
            p.extend(extra);
            p
        };
        ops.push(Operation {
            method: "post",
            path: format!("{prefix}/jobs/{{jobid}}/savepoints"),
            tag: "savepoints",
            summary: format!("Trigger a savepoint{scope}, as Flink's POST /jobs/:jobid/savepoints"),
            params: params(vec![job()]),
            body: Some(json_body(schema_ref("SavepointTriggerRequestBody"), false)),
            responses: vec![
                ok(
                    202,
                    "Accepted; the same triggerId answers the same request-id",
                    "TriggerResponse",
                ),
                err(400, "Malformed id or body, or no target directory"),
            ],
        });
        ops.push(Operation {
            method: "post",
            path: format!("{prefix}/jobs/{{jobid}}/stop"),
            tag: "savepoints",
            summary: format!(
                "Stop a job with a savepoint{scope}, as Flink's POST /jobs/:jobid/stop"
            ),
            params: params(vec![job()]),
            body: Some(json_body(schema_ref("StopWithSavepointRequestBody"), false)),
            responses: vec![
                ok(202, "Accepted", "TriggerResponse"),
                err(400, "Malformed id or body, or no target directory"),
            ],
        });
        ops.push(Operation {
            method: "get",
            path: format!("{prefix}/jobs/{{jobid}}/savepoints/{{triggerid}}"),
            tag: "savepoints",
            summary: format!("Status of a savepoint operation{scope}, as Flink's"),
            params: params(vec![
                job(),
                path_param("triggerid", "the request-id", hex_id()),
            ]),
            body: None,
            responses: vec![
                ok(200, "IN_PROGRESS or COMPLETED", "SavepointStatus"),
                err(400, "Malformed id"),
                err(404, "No such operation"),
            ],
        });
    }
    ops.push(Operation {
        method: "post",
        path: "/v1/clusters/{cluster}/jobs/{jobid}/savepoints/{triggerid}/complete".into(),
        tag: "savepoint operations",
        summary: "Complete an operation (for an executor outside this service)".into(),
        params: vec![
            cluster_param(),
            job(),
            path_param("triggerid", "the request-id", hex_id()),
        ],
        body: Some(json_body(schema_ref("CompleteBody"), true)),
        responses: vec![
            ok(
                200,
                "Completed (also when completed before with the same result)",
                "SavepointOperation",
            ),
            err(
                400,
                "Malformed id or body: exactly one of location and failure-cause",
            ),
            err(404, "No such operation"),
            err(409, "Completed before with a different result"),
            err(415, "Not a JSON body"),
        ],
    });
    ops.push(Operation {
        method: "get",
        path: "/v1/clusters/{cluster}/savepoint-operations".into(),
        tag: "savepoint operations",
        summary: "List a cluster's savepoint operations, ordered by job id and request id".into(),
        params: vec![
            cluster_param(),
            query_param("job-id", "only this job's", hex_id()),
            query_param(
                "status",
                "only these",
                json!({"type": "string", "enum": ["IN_PROGRESS", "COMPLETED"]}),
            ),
            query_param(
                "kind",
                "only these",
                json!({"type": "string", "enum": OPERATION_KINDS}),
            ),
            query_param(
                "limit",
                "page size, 1-10000 (default 1000)",
                json!({"type": "integer", "minimum": 1, "maximum": 10000}),
            ),
            query_param(
                "after",
                "the `next` cursor of the previous page",
                json!({"type": "string", "pattern": "^[0-9a-fA-F]{64}$"}),
            ),
        ],
        body: None,
        responses: vec![
            ok(200, "A page of operations", "SavepointOperationList"),
            err(400, "Malformed query"),
        ],
    });
    ops.push(Operation {
        method: "get",
        path: "/v1/clusters/{cluster}".into(),
        tag: "clusters",
        summary: "A cluster's savepoint configuration".into(),
        params: vec![cluster_param()],
        body: None,
        responses: vec![
            ok(200, "The cluster", "Cluster"),
            err(400, "Malformed cluster id"),
            err(404, "Not configured"),
        ],
    });
    ops.push(Operation {
        method: "put",
        path: "/v1/clusters/{cluster}".into(),
        tag: "clusters",
        summary: "Set a cluster's Flink REST URL and default savepoint directory".into(),
        params: vec![cluster_param()],
        body: Some(json_body(schema_ref("ClusterUpdate"), true)),
        responses: vec![
            ok(200, "The cluster", "Cluster"),
            err(400, "Malformed body"),
            err(415, "Not a JSON body"),
        ],
    });
    ops.push(Operation {
        method: "get",
        path: "/v1/clusters".into(),
        tag: "clusters",
        summary: "Every configured cluster, and the default one".into(),
        params: vec![],
        body: None,
        responses: vec![ok(200, "The clusters", "ClusterList")],
    });
    ops
}

const OPERATION_KINDS: [&str; 6] = [
    "SAVEPOINT",
    "CANCEL_WITH_SAVEPOINT",
    "STOP_WITH_SAVEPOINT",
    "TERMINATE_WITH_SAVEPOINT",
    "CHECKPOINT",
    "DISPOSAL",
];

/// Checkpoints and disposals (Flink's routes), schedules, retention, the latest savepoint
///.
fn lifecycle_operations() -> Vec<Operation> {
    let mut ops = Vec::new();
    let job = || path_param("jobid", "Flink job id", hex_id());
    let trigger = || path_param("triggerid", "the request-id", hex_id());
    let op = |method: &'static str,
              path: String,
              tag: &'static str,
              summary: String,
              params: Vec<Value>,
              body: Option<(&str, bool)>,
              responses: Vec<(u16, &'static str, Option<Value>)>| Operation {
        method,
        path,
        tag,
        summary,
        params,
        body: body.map(|(schema, required)| json_body(schema_ref(schema), required)),
        responses,
    };
    for (prefix, scope) in flink_prefixes() {
        let params = |extra: Vec<Value>| {
            let mut p = if prefix.starts_with("/v1/clusters") {
                vec![cluster_param()]
            } else {
                vec![]
            };
            p.extend(extra);
            p
        };
        ops.push(op(
            "post",
            format!("{prefix}/jobs/{{jobid}}/checkpoints"),
            "checkpoints",
            format!("Trigger a checkpoint{scope}, as Flink's POST /jobs/:jobid/checkpoints"),
            params(vec![job()]),
            Some(("CheckpointTriggerRequestBody", false)),
            vec![
                ok(
                    202,
                    "Accepted; the same triggerId answers the same request-id",
                    "TriggerResponse",
                ),
                err(400, "Malformed id or body, or checkpointType INCREMENTAL"),
            ],
        ));
        ops.push(op(
            "get",
            format!("{prefix}/jobs/{{jobid}}/checkpoints/{{triggerid}}"),
            "checkpoints",
            format!("Status of a checkpoint operation{scope}, as Flink's"),
            params(vec![job(), trigger()]),
            None,
            vec![
                ok(200, "IN_PROGRESS or COMPLETED", "CheckpointStatus"),
                err(400, "Malformed id"),
                err(404, "No such operation"),
            ],
        ));
        ops.push(op(
            "post",
            format!("{prefix}/savepoint-disposal"),
            "disposal",
            format!("Dispose of a savepoint{scope}, as Flink's POST /savepoint-disposal"),
            params(vec![]),
            Some(("SavepointDisposalRequest", true)),
            vec![
                ok(200, "Accepted (Flink answers 200 here)", "TriggerResponse"),
                err(400, "No savepoint-path"),
            ],
        ));
        ops.push(op(
            "get",
            format!("{prefix}/savepoint-disposal/{{triggerid}}"),
            "disposal",
            format!("Status of a disposal{scope}, as Flink's"),
            params(vec![trigger()]),
            None,
            vec![
                ok(200, "IN_PROGRESS or COMPLETED", "SavepointStatus"),
                err(400, "Malformed id"),
                err(404, "No such operation"),
            ],
        ));
    }
    let scopes = [
        (
            "/v1/clusters/{cluster}",
            "the cluster's",
            vec![cluster_param()],
        ),
        (
            "/v1/clusters/{cluster}/jobs/{jobid}",
            "a job's override of the cluster's",
            vec![cluster_param(), job()],
        ),
    ];
    for (base, whose, params) in scopes {
        for (name, what, update, schema) in [
            (
                "savepoint-schedule",
                "savepoint schedule",
                "ScheduleUpdate",
                "Schedule",
            ),
            (
                "savepoint-retention",
                "savepoint retention",
                "RetentionUpdate",
                "Retention",
            ),
        ] {
            let path = format!("{base}/{name}");
            ops.push(op(
                "put",
                path.clone(),
                "lifecycle",
                format!("Set {whose} {what}"),
                params.clone(),
                Some((update, true)),
                vec![
                    ok(200, "Set", schema),
                    err(400, "Malformed body"),
                    err(415, "Not a JSON body"),
                ],
            ));
            ops.push(op(
                "get",
                path.clone(),
                "lifecycle",
                format!("{whose} {what}"),
                params.clone(),
                None,
                vec![
                    ok(200, "Set", schema),
                    err(400, "Malformed id"),
                    err(404, "None"),
                ],
            ));
            ops.push(op(
                "delete",
                path,
                "lifecycle",
                format!("Remove {whose} {what}"),
                params.clone(),
                None,
                vec![
                    (204, "Removed", None),
                    err(400, "Malformed id"),
                    err(404, "None"),
                ],
            ));
        }
    }
    for (name, what, schema) in [
        ("savepoint-schedules", "savepoint schedule", "ScheduleList"),
        (
            "savepoint-retentions",
            "savepoint retention policy",
            "RetentionList",
        ),
    ] {
        ops.push(op(
            "get",
            format!("/v1/clusters/{{cluster}}/{name}"),
            "lifecycle",
            format!("The cluster's {what} (job-id null) and its jobs' overrides"),
            vec![cluster_param()],
            None,
            vec![
                ok(200, "The list (empty if none)", schema),
                err(400, "Malformed id"),
            ],
        ));
    }
    ops.push(op(
        "get",
        "/v1/clusters/{cluster}/jobs/{jobid}/latest-savepoint".into(),
        "lifecycle",
        "The newest completed savepoint of a job, not disposed of (what a redeploy restores from)"
            .into(),
        vec![cluster_param(), job()],
        None,
        vec![
            ok(200, "The operation", "SavepointOperation"),
            err(400, "Malformed id"),
            err(404, "None"),
        ],
    ));
    ops.push(op(
        "get",
        "/v1/clusters/{cluster}/latest-savepoint".into(),
        "lifecycle",
        "The newest completed savepoint of any job of a name (a redeployed job gets a new id)"
            .into(),
        vec![
            cluster_param(),
            json!({"name": "job-name", "in": "query", "required": true, "description": "the job's name (Flink's job overview, the job results)", "schema": {"type": "string", "minLength": 1, "maxLength": 4096}}),
        ],
        None,
        vec![
            ok(200, "The operation", "SavepointOperation"),
            err(400, "No job-name"),
            err(404, "None"),
        ],
    ));
    ops
}

fn service_operations() -> Vec<Operation> {
    let plain = |path: &str, summary: &str, responses| Operation {
        method: "get",
        path: path.into(),
        tag: "service",
        summary: summary.into(),
        params: vec![],
        body: None,
        responses,
    };
    vec![
        plain(
            "/healthz",
            "The process is alive",
            vec![(200, "Alive", None)],
        ),
        plain(
            "/readyz",
            "The database is reachable and migrated; what the executor does and what the database promises",
            vec![ok(200, "Ready", "Ready"), err(503, "Not ready")],
        ),
        plain(
            "/metrics",
            "Prometheus metrics (text format)",
            vec![(200, "Metrics", None)],
        ),
        plain(
            "/openapi.json",
            "This document",
            vec![(200, "The OpenAPI document", None)],
        ),
    ]
}

/// The HA-services routes.
fn ha_operations() -> Vec<Operation> {
    let base = "/v1/clusters/{cluster}/ha";
    let component = || {
        path_param(
            "component",
            "resourcemanager, dispatcher, restserver or a job id",
            json!({"type": "string", "minLength": 1, "maxLength": 256}),
        )
    };
    let kind = || {
        path_param(
            "kind",
            "the state-handle store",
            json!({"type": "string", "enum": ["execution-plan", "application", "checkpoint"]}),
        )
    };
    let name = || {
        path_param(
            "name",
            "Flink's key within the store (job id, application id, checkpoint id)",
            json!({"type": "string", "minLength": 1, "maxLength": 256}),
        )
    };
    let job_query = || {
        query_param(
            "job",
            "the checkpoint's job; absent for entries of no job",
            hex_id(),
        )
    };
    let jobid = || path_param("jobid", "the job id", hex_id());
    let fenced = || {
        err(
            409,
            "Fenced: the epoch and lease id do not name the cluster's live lease",
        )
    };
    let bad = || err(400, "Malformed id or body");
    let op = |method: &'static str,
              path: &str,
              summary: &str,
              params: Vec<Value>,
              body: Option<&str>,
              mut responses: Vec<_>| {
        // A route with a JSON body answers 415 to any other body, like every other.
        if body.is_some() {
            responses.push(err(415, "Not a JSON body"));
        }
        Operation {
            method,
            path: format!("{base}{path}"),
            tag: "ha",
            summary: summary.into(),
            params,
            body: body.map(|b| json_body(schema_ref(b), true)),
            responses,
        }
    };
    vec![
        op(
            "post",
            "/lease/acquire",
            "Take the cluster's leader lease (a new epoch and lease id), or renew it when the caller holds it",
            vec![cluster_param()],
            Some("AcquireRequest"),
            vec![
                ok(200, "The lease", "Lease"),
                bad(),
                err(
                    409,
                    "Another holder has a live lease (header Jobstore-Lease-Expires-In-Ms: how long it has left)",
                ),
            ],
        ),
        op(
            "get",
            "/lease",
            "The cluster's lease (never its lease id), with its ETag; a long poll with If-None-Match and wait-ms that ends at a change of holder, epoch or liveness",
            vec![
                cluster_param(),
                query_param(
                    "wait-ms",
                    "with If-None-Match naming the current ETag: how long to wait for an acquisition, a release, a cleanup or the lease's expiry (at most 60000, and 2 s less than the request timeout)",
                    json!({"type": "integer", "minimum": 0, "maximum": 60000}),
                ),
                json!({"name": "If-None-Match", "in": "header", "required": false, "description": "the ETag of the lease the caller saw (a 404's tag: never leased)", "schema": {"type": "string"}}),
            ],
            None,
            vec![
                ok(200, "The lease (header ETag: its tag)", "LeaseState"),
                (304, "Unchanged within wait-ms (header ETag)", None),
                bad(),
                err(404, "Never leased (header ETag)"),
            ],
        ),
        op(
            "post",
            "/lease/renew",
            "Extend the lease of this holder, epoch and lease id",
            vec![cluster_param()],
            Some("RenewRequest"),
            vec![ok(200, "Renewed", "Renewed"), bad(), fenced()],
        ),
        op(
            "post",
            "/lease/release",
            "End the lease now (its lease id is never handed out again)",
            vec![cluster_param()],
            Some("ReleaseRequest"),
            vec![ok(200, "Whether it was released", "Released"), bad()],
        ),
        op(
            "delete",
            "",
            "Remove every HA entry of the cluster (Flink's cleanupAllData), fenced; the lease row stays",
            vec![cluster_param()],
            Some("FenceBody"),
            vec![(204, "Gone", None), bad(), fenced()],
        ),
        op(
            "get",
            "/leader-info",
            "The leader information of every component, with its ETag; a long poll with If-None-Match and wait-ms",
            vec![
                cluster_param(),
                query_param(
                    "wait-ms",
                    "with If-None-Match naming the current ETag: how long to wait for a change (at most 60000, and 2 s less than the request timeout)",
                    json!({"type": "integer", "minimum": 0, "maximum": 60000}),
                ),
                json!({"name": "If-None-Match", "in": "header", "required": false, "description": "the ETag of the listing the caller has", "schema": {"type": "string"}}),
            ],
            None,
            vec![
                ok(200, "The list (header ETag: its tag)", "LeaderInfoList"),
                (304, "Unchanged within wait-ms (header ETag)", None),
                bad(),
            ],
        ),
        op(
            "get",
            "/leader-info/{component}",
            "A component's leader information",
            vec![cluster_param(), component()],
            None,
            vec![
                ok(200, "The leader information", "LeaderInfo"),
                bad(),
                err(404, "None published"),
            ],
        ),
        op(
            "put",
            "/leader-info/{component}",
            "Publish a component's leader information, fenced by the lease",
            vec![cluster_param(), component()],
            Some("LeaderInfoUpdate"),
            vec![ok(200, "Published", "LeaderInfo"), bad(), fenced()],
        ),
        op(
            "delete",
            "/leader-info/{component}",
            "Remove a component's leader information, fenced by the lease",
            vec![cluster_param(), component()],
            Some("HandleFence"),
            vec![(204, "Gone", None), bad(), fenced()],
        ),
        op(
            "get",
            "/state-handles/{kind}",
            "A page of the handles of a store (and job), ordered by name",
            vec![
                cluster_param(),
                kind(),
                job_query(),
                query_param(
                    "limit",
                    "page size, 1-10000 (default 1000); a page also ends after 4 MiB of handles",
                    json!({"type": "integer", "minimum": 1, "maximum": 10000}),
                ),
                query_param(
                    "after",
                    "the `next` of the previous page (a name)",
                    json!({"type": "string", "minLength": 1, "maxLength": 256}),
                ),
            ],
            None,
            vec![ok(200, "The handles", "StateHandleList"), bad()],
        ),
        op(
            "get",
            "/state-handles/{kind}/{name}",
            "One handle",
            vec![cluster_param(), kind(), name(), job_query()],
            None,
            vec![
                ok(200, "The handle", "StateHandle"),
                bad(),
                err(404, "No such handle"),
            ],
        ),
        op(
            "post",
            "/state-handles/{kind}/{name}",
            "Add a handle at version 1, fenced",
            vec![cluster_param(), kind(), name()],
            Some("StateHandleAdd"),
            vec![
                ok(201, "Added", "Version"),
                bad(),
                err(409, "Fenced, or the handle exists"),
            ],
        ),
        op(
            "put",
            "/state-handles/{kind}/{name}",
            "Replace a handle if its version is expected-version (compare-and-set), fenced",
            vec![cluster_param(), kind(), name()],
            Some("StateHandleReplace"),
            vec![
                ok(200, "The new version", "Version"),
                bad(),
                err(404, "No such handle"),
                err(409, "Fenced, or another version"),
            ],
        ),
        op(
            "delete",
            "/state-handles/{kind}/{name}",
            "Remove a handle, fenced; idempotent",
            vec![cluster_param(), kind(), name()],
            Some("HandleFence"),
            vec![
                ok(
                    200,
                    "Gone; removed tells whether this call removed it",
                    "Removed",
                ),
                bad(),
                fenced(),
            ],
        ),
        op(
            "post",
            "/state-handles/{kind}/{name}/mark-for-deletion",
            "Mark a handle for deletion (readers take it for absent; it is no longer replaced), fenced",
            vec![cluster_param(), kind(), name()],
            Some("HandleFence"),
            vec![
                ok(200, "Marked; its version", "Version"),
                bad(),
                err(404, "No such handle"),
                fenced(),
            ],
        ),
        op(
            "delete",
            "/counters/{jobid}",
            "Remove a job's counter, fenced; idempotent",
            vec![cluster_param(), jobid()],
            Some("FenceBody"),
            vec![(204, "Gone", None), bad(), fenced()],
        ),
        op(
            "delete",
            "/jobs/{jobid}",
            "Remove a job's HA data (its leader information, checkpoints, execution plan and counter) in one transaction, fenced",
            vec![cluster_param(), jobid()],
            Some("FenceBody"),
            vec![(204, "Gone", None), bad(), fenced()],
        ),
        op(
            "get",
            "/counters/{jobid}",
            "The next checkpoint id of a job",
            vec![cluster_param(), jobid()],
            None,
            vec![
                ok(200, "The value", "Counter"),
                bad(),
                err(404, "No counter"),
            ],
        ),
        op(
            "put",
            "/counters/{jobid}",
            "Set the next checkpoint id, fenced",
            vec![cluster_param(), jobid()],
            Some("CounterSet"),
            vec![ok(200, "Set", "Counter"), bad(), fenced()],
        ),
        op(
            "post",
            "/counters/{jobid}/get-and-increment",
            "Hand out the next checkpoint id atomically (1 first), fenced",
            vec![cluster_param(), jobid()],
            Some("FenceBody"),
            vec![ok(200, "The id handed out", "Counter"), bad(), fenced()],
        ),
    ]
}

/// Every documented operation.
pub fn operations() -> Vec<Operation> {
    let mut ops = result_operations(ResultKind::Job);
    ops.extend(result_operations(ResultKind::Application));
    ops.extend(savepoint_operations());
    ops.extend(lifecycle_operations());
    ops.extend(ha_operations());
    ops.extend(service_operations());
    ops
}

fn schemas() -> Value {
    let nullable_time = json!({"type": "string", "format": "date-time", "nullable": true});
    let time = json!({"type": "string", "format": "date-time"});
    // Any object is accepted and kept as sent (the contract checks only that it is an
    // object), so the fields Flink writes are described, not constrained.
    let failure_cause = json!({
        "type": "object",
        "description": "Flink's SerializedThrowable JSON; any object is accepted and kept as sent",
        "properties": {
            "class": {"description": "the exception class (Flink writes a string)"},
            "stack-trace": {"description": "the stack trace (Flink writes a string)"},
            "serialized-throwable": {"description": "the serialized exception, base64 (Flink writes a string)"}
        },
        "additionalProperties": true
    });
    let entry = |id_field: &str, result: &str| {
        json!({
            "type": "object",
            "required": ["cluster-id", id_field, "state", "created-at", "cleaned-at", "result"],
            "properties": {
                "cluster-id": schema_ref("ClusterId"),
                id_field: schema_ref("HexId"),
                "state": {"type": "string", "enum": ["dirty", "clean"]},
                "created-at": time,
                "cleaned-at": nullable_time,
                "result": schema_ref(result)
            }
        })
    };
    let list = |key: &str, item: &str| {
        json!({
            "type": "object",
            "required": [key, "next"],
            "properties": {
                key: {"type": "array", "items": schema_ref(item)},
                "next": {"type": "string", "nullable": true}
            }
        })
    };
    let file = |result: &str| {
        json!({
            "type": "object",
            "required": ["result"],
            "properties": {
                "result": schema_ref(result),
                "version": {"type": "integer", "enum": [1]}
            }
        })
    };
    let format_type = json!({"type": "string", "enum": ["CANONICAL", "NATIVE"], "nullable": true});
    let mut all = json!({
        "Error": {
            "type": "object",
            "required": ["errors"],
            "properties": {"errors": {"type": "array", "items": {"type": "string"}, "minItems": 1}}
        },
        "HexId": {"type": "string", "pattern": "^[0-9a-fA-F]{32}$", "description": "16 bytes as 32 hex characters, as Flink prints them"},
        "ClusterId": {"type": "string", "pattern": "^[A-Za-z0-9._-]{1,128}$"},
        "JobResult": {
            "type": "object",
            "description": "Flink's JobResult JSON; unknown fields are kept",
            "required": ["id"],
            "additionalProperties": true,
            "properties": {
                "id": schema_ref("HexId"),
                "name": {"type": "string"},
                "application-status": {"type": "string", "enum": APPLICATION_STATUSES},
                "accumulator-results": {"type": "object", "additionalProperties": {"type": "string"}},
                "net-runtime": {"type": "integer", "format": "int64", "minimum": 0, "maximum": i64::MAX},
                "failure-cause": failure_cause,
                "application-id": schema_ref("HexId"),
                "start-time": {"type": "integer", "format": "int64"},
                "end-time": {"type": "integer", "format": "int64"}
            }
        },
        "ApplicationResult": {
            "type": "object",
            "description": "Flink 2.3's application result JSON; unknown fields are kept",
            "required": ["application-id"],
            "additionalProperties": true,
            "properties": {
                "application-id": schema_ref("HexId"),
                "application-state": {"type": "string"},
                "application-name": {"type": "string"},
                "start-time": {"type": "integer", "format": "int64"},
                "end-time": {"type": "integer", "format": "int64"}
            }
        },
        "JobResultFile": file("JobResult"),
        "ApplicationResultFile": file("ApplicationResult"),
        "JobResultEntry": entry("job-id", "JobResult"),
        "ApplicationResultEntry": entry("application-id", "ApplicationResult"),
        "JobResultList": list("job-results", "JobResultEntry"),
        "ApplicationResultList": list("application-results", "ApplicationResultEntry"),
        "SavepointTriggerRequestBody": {
            "type": "object",
            "properties": {
                "target-directory": {"type": "string", "nullable": true},
                "cancel-job": {"type": "boolean", "nullable": true},
                "triggerId": {"type": "string", "pattern": "^[0-9a-fA-F]{32}$", "nullable": true},
                "formatType": format_type
            }
        },
        "StopWithSavepointRequestBody": {
            "type": "object",
            "properties": {
                "targetDirectory": {"type": "string", "nullable": true},
                "drain": {"type": "boolean", "nullable": true},
                "triggerId": {"type": "string", "pattern": "^[0-9a-fA-F]{32}$", "nullable": true},
                "formatType": format_type
            }
        },
        "TriggerResponse": {
            "type": "object",
            "required": ["request-id"],
            "properties": {"request-id": schema_ref("HexId")}
        },
        "SavepointStatus": {
            "type": "object",
            "required": ["status", "operation"],
            "properties": {
                "status": {
                    "type": "object",
                    "required": ["id"],
                    "properties": {"id": {"type": "string", "enum": ["IN_PROGRESS", "COMPLETED"]}}
                },
                "operation": {
                    "type": "object",
                    "nullable": true,
                    "properties": {"location": {"type": "string"}, "failure-cause": failure_cause}
                }
            }
        },
        "CompleteBody": {
            "type": "object",
            "description": "exactly one of location and failure-cause",
            "properties": {"location": {"type": "string", "minLength": 1}, "failure-cause": failure_cause}
        },
        "SavepointOperation": {
            "type": "object",
            "required": ["cluster-id", "job-id", "request-id", "kind", "status", "target-directory",
                         "format-type", "location", "failure-cause", "created-at", "completed-at",
                         "trigger", "disposed-at"],
            "properties": {
                "cluster-id": schema_ref("ClusterId"),
                "job-id": {"type": "string", "nullable": true, "description": "null for a disposal asked through POST /savepoint-disposal"},
                "request-id": schema_ref("HexId"),
                "kind": {"type": "string", "enum": OPERATION_KINDS},
                "trigger": {"type": "string", "enum": ["api", "schedule", "retention"]},
                "disposed-at": nullable_time,
                "checkpoint-type": {"type": "string", "enum": ["CONFIGURED", "FULL"], "description": "checkpoints only"},
                "checkpoint-id": {"type": "integer", "nullable": true, "description": "checkpoints only"},
                "savepoint-path": {"type": "string", "description": "disposals only"},
                "due-at": {"type": "string", "format": "date-time", "description": "scheduled operations only"},
                "retry": {"type": "integer", "minimum": 0, "description": "operations of a schedule or a retention policy only: which try of its due time or savepoint (0 the first)"},
                "status": {"type": "string", "enum": ["IN_PROGRESS", "COMPLETED"]},
                "target-directory": {"type": "string", "nullable": true},
                "format-type": {"type": "string", "enum": ["CANONICAL", "NATIVE"]},
                "location": {"type": "string", "nullable": true},
                "failure-cause": {"type": "object", "nullable": true, "additionalProperties": true},
                "created-at": time,
                "completed-at": nullable_time
            }
        },
        "SavepointOperationList": list("savepoint-operations", "SavepointOperation"),
        "Cluster": {
            "type": "object",
            "required": ["cluster-id", "flink-rest-url", "savepoint-directory"],
            "properties": {
                "cluster-id": schema_ref("ClusterId"),
                "flink-rest-url": {"type": "string", "nullable": true},
                "savepoint-directory": {"type": "string", "nullable": true}
            }
        },
        "ClusterUpdate": {
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "flink-rest-url": {"type": "string", "nullable": true, "pattern": "^https?://.+"},
                "savepoint-directory": {"type": "string", "nullable": true, "minLength": 1}
            }
        },
        "ClusterList": {
            "type": "object",
            "required": ["clusters"],
            "properties": {"clusters": {"type": "array", "items": schema_ref("Cluster")}}
        }
    });
    if let (Some(all), Value::Object(ha)) = (all.as_object_mut(), ha_schemas(&time)) {
        all.extend(ha);
    }
    if let (Some(all), Value::Object(more)) = (
        all.as_object_mut(),
        lifecycle_schemas(&nullable_time, &failure_cause),
    ) {
        all.extend(more);
    }
    all
}

/// The schemas of checkpoints, disposals, schedules and retention.
fn lifecycle_schemas(nullable_time: &Value, failure_cause: &Value) -> Value {
    json!({
        "CheckpointTriggerRequestBody": {
            "type": "object",
            "properties": {
                "checkpointType": {"type": "string", "enum": ["CONFIGURED", "FULL"], "nullable": true},
                "triggerId": {"type": "string", "pattern": "^[0-9a-fA-F]{32}$", "nullable": true}
            }
        },
        "CheckpointStatus": {
            "type": "object",
            "required": ["status", "operation"],
            "properties": {
                "status": {
                    "type": "object",
                    "required": ["id"],
                    "properties": {"id": {"type": "string", "enum": ["IN_PROGRESS", "COMPLETED"]}}
                },
                "operation": {
                    "type": "object",
                    "nullable": true,
                    "properties": {"checkpointId": {"type": "integer", "format": "int64"}, "failureCause": failure_cause}
                }
            }
        },
        "SavepointDisposalRequest": {
            "type": "object",
            "required": ["savepoint-path"],
            "properties": {"savepoint-path": {"type": "string", "minLength": 1}}
        },
        "ScheduleUpdate": {
            "type": "object",
            "additionalProperties": false,
            "required": ["interval"],
            "properties": {
                "interval": {"type": "string", "nullable": true, "description": "a duration of at least 1s (\"30s\", \"6h\"); null on a job: no schedule for that job"},
                "kind": {"type": "string", "enum": ["SAVEPOINT", "CHECKPOINT"]},
                "target-directory": {"type": "string", "minLength": 1, "nullable": true},
                "format-type": {"type": "string", "enum": ["CANONICAL", "NATIVE"]}
            }
        },
        "Schedule": {
            "type": "object",
            "required": ["cluster-id", "job-id", "interval", "kind", "target-directory", "format-type", "next-due-at", "last-triggered-at"],
            "properties": {
                "cluster-id": schema_ref("ClusterId"),
                "job-id": {"type": "string", "nullable": true},
                "interval": {"type": "string", "nullable": true},
                "kind": {"type": "string", "enum": ["SAVEPOINT", "CHECKPOINT"]},
                "target-directory": {"type": "string", "nullable": true},
                "format-type": {"type": "string", "enum": ["CANONICAL", "NATIVE"]},
                "next-due-at": nullable_time,
                "last-triggered-at": nullable_time
            }
        },
        "RetentionUpdate": {
            "type": "object",
            "additionalProperties": false,
            "description": "at least one of max-count and max-age",
            "properties": {
                "max-count": {"type": "integer", "minimum": 1, "maximum": 2147483647, "nullable": true},
                "max-age": {"type": "string", "nullable": true, "description": "a duration of at least 1s (\"7d\")"}
            }
        },
        "ScheduleList": {
            "type": "object",
            "required": ["savepoint-schedules"],
            "properties": {"savepoint-schedules": {"type": "array", "items": schema_ref("Schedule")}}
        },
        "RetentionList": {
            "type": "object",
            "required": ["savepoint-retentions"],
            "properties": {"savepoint-retentions": {"type": "array", "items": schema_ref("Retention")}}
        },
        "Retention": {
            "type": "object",
            "required": ["cluster-id", "job-id", "max-count", "max-age"],
            "properties": {
                "cluster-id": schema_ref("ClusterId"),
                "job-id": {"type": "string", "nullable": true},
                "max-count": {"type": "integer", "nullable": true},
                "max-age": {"type": "string", "nullable": true}
            }
        }
    })
}

/// The schemas of the HA-services routes.
fn ha_schemas(time: &Value) -> Value {
    json!({
        "Ready": {
            "type": "object",
            "required": ["status", "executor", "database"],
            "properties": {
                "status": {"type": "string", "enum": ["ready"]},
                "executor": {"type": "string", "enum": ["off", "running", "restarting", "stopped"]},
                "database": {
                    "type": "object",
                    "required": ["replication", "standbys", "synchronous-standbys", "checked-at"],
                    "properties": {
                        "replication": {"type": "string", "enum": ["synchronous", "asynchronous", "none", "unknown"]},
                        "standbys": {"type": "integer"},
                        "synchronous-standbys": {"type": "integer"},
                        "synchronous-commit": {"type": "string"},
                        "detail": {"type": "string"},
                        "checked-at": time
                    }
                }
            }
        },
        "AcquireRequest": {
            "type": "object",
            "additionalProperties": false,
            "required": ["holder", "duration-ms"],
            "properties": {
                "holder": {"type": "string", "minLength": 1, "maxLength": 256},
                "duration-ms": {"type": "integer", "minimum": 1, "maximum": 86400000}
            }
        },
        "RenewRequest": {
            "type": "object",
            "additionalProperties": false,
            "required": ["holder", "epoch", "lease-id", "duration-ms"],
            "properties": {
                "holder": {"type": "string", "minLength": 1, "maxLength": 256},
                "epoch": {"type": "integer", "format": "int64"},
                "lease-id": {"type": "string", "format": "uuid", "pattern": "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$", "description": "the lease id the acquisition answered"},
                "duration-ms": {"type": "integer", "minimum": 1, "maximum": 86400000}
            }
        },
        "ReleaseRequest": {
            "type": "object",
            "additionalProperties": false,
            "required": ["holder", "epoch", "lease-id"],
            "properties": {
                "holder": {"type": "string", "minLength": 1, "maxLength": 256},
                "epoch": {"type": "integer", "format": "int64"},
                "lease-id": {"type": "string", "format": "uuid", "pattern": "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$", "description": "the lease id the acquisition answered"}
            }
        },
        "Lease": {
            "type": "object",
            "required": ["epoch", "lease-id", "expires-at"],
            "properties": {"epoch": {"type": "integer", "format": "int64"}, "lease-id": {"type": "string", "format": "uuid"}, "expires-at": time}
        },
        "LeaseState": {
            "type": "object",
            "required": ["holder", "epoch", "expires-at", "expires-in-ms", "live"],
            "properties": {
                "holder": {"type": "string"},
                "epoch": {"type": "integer", "format": "int64"},
                "expires-at": time,
                "expires-in-ms": {"type": "integer", "format": "int64", "minimum": 0, "description": "how long the lease has left, on the database's clock; 0 once expired"},
                "live": {"type": "boolean"}
            }
        },
        "Renewed": {
            "type": "object",
            "required": ["epoch"],
            "properties": {"epoch": {"type": "integer", "format": "int64"}}
        },
        "Released": {
            "type": "object",
            "required": ["released"],
            "properties": {"released": {"type": "boolean"}}
        },
        "LeaderInfoUpdate": {
            "type": "object",
            "additionalProperties": false,
            "required": ["epoch", "lease-id", "address", "session-id"],
            "properties": {
                "epoch": {"type": "integer", "format": "int64"},
                "lease-id": {"type": "string", "format": "uuid", "pattern": "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$", "description": "the lease id the acquisition answered"},
                "address": {"type": "string", "minLength": 1, "maxLength": 4096},
                "session-id": {"type": "string", "minLength": 1, "maxLength": 256}
            }
        },
        "LeaderInfo": {
            "type": "object",
            "required": ["component", "epoch", "address", "session-id", "updated-at"],
            "properties": {
                "component": {"type": "string"},
                "epoch": {"type": "integer", "format": "int64"},
                "address": {"type": "string"},
                "session-id": {"type": "string"},
                "updated-at": time
            }
        },
        "LeaderInfoList": {
            "type": "object",
            "required": ["leader-info"],
            "properties": {"leader-info": {"type": "array", "items": schema_ref("LeaderInfo")}}
        },
        "HandleFence": {
            "type": "object",
            "additionalProperties": false,
            "required": ["epoch", "lease-id"],
            "properties": {"epoch": {"type": "integer", "format": "int64"}, "lease-id": {"type": "string", "format": "uuid", "pattern": "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$", "description": "the lease id the acquisition answered"}, "job": schema_ref("HexId")}
        },
        "FenceBody": {
            "type": "object",
            "additionalProperties": false,
            "required": ["epoch", "lease-id"],
            "properties": {"epoch": {"type": "integer", "format": "int64"}, "lease-id": {"type": "string", "format": "uuid", "pattern": "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$", "description": "the lease id the acquisition answered"}}
        },
        "StateHandleAdd": {
            "type": "object",
            "additionalProperties": false,
            "required": ["epoch", "lease-id", "handle"],
            "properties": {
                "epoch": {"type": "integer", "format": "int64"},
                "lease-id": {"type": "string", "format": "uuid", "pattern": "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$", "description": "the lease id the acquisition answered"},
                "job": schema_ref("HexId"),
                "handle": {"type": "string", "pattern": "^([0-9a-fA-F]{2}){1,65536}$", "description": "the serialized pointer's bytes as hex"}
            }
        },
        "StateHandleReplace": {
            "type": "object",
            "additionalProperties": false,
            "required": ["epoch", "lease-id", "expected-version", "handle"],
            "properties": {
                "epoch": {"type": "integer", "format": "int64"},
                "lease-id": {"type": "string", "format": "uuid", "pattern": "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$", "description": "the lease id the acquisition answered"},
                "job": schema_ref("HexId"),
                "expected-version": {"type": "integer", "format": "int64", "minimum": 1},
                "handle": {"type": "string", "pattern": "^([0-9a-fA-F]{2}){1,65536}$", "description": "the serialized pointer's bytes as hex"}
            }
        },
        "Version": {
            "type": "object",
            "required": ["version"],
            "properties": {"version": {"type": "integer", "format": "int64"}}
        },
        "Removed": {
            "type": "object",
            "required": ["removed"],
            "properties": {"removed": {"type": "boolean"}}
        },
        "StateHandle": {
            "type": "object",
            "required": ["kind", "job", "name", "version", "handle", "marked-for-deletion", "updated-at"],
            "properties": {
                "kind": {"type": "string", "enum": ["execution-plan", "application", "checkpoint"]},
                "job": {"type": "string", "nullable": true},
                "name": {"type": "string"},
                "version": {"type": "integer", "format": "int64"},
                "handle": {"type": "string"},
                "marked-for-deletion": {"type": "boolean"},
                "updated-at": time
            }
        },
        "StateHandleList": {
            "type": "object",
            "required": ["state-handles", "next"],
            "properties": {
                "state-handles": {"type": "array", "items": schema_ref("StateHandle")},
                "next": {"type": "string", "nullable": true, "description": "the name to continue after, null on the last page"}
            }
        },
        "CounterSet": {
            "type": "object",
            "additionalProperties": false,
            "required": ["epoch", "lease-id", "value"],
            "properties": {"epoch": {"type": "integer", "format": "int64"}, "lease-id": {"type": "string", "format": "uuid", "pattern": "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$", "description": "the lease id the acquisition answered"}, "value": {"type": "integer", "format": "int64", "minimum": 1}}
        },
        "Counter": {
            "type": "object",
            "required": ["value"],
            "properties": {"value": {"type": "integer", "format": "int64"}}
        }
    })
}

/// The headers of answers: method, path, status, header name and its description and schema.
fn response_headers() -> Vec<(&'static str, String, u16, &'static str, Value)> {
    let lease = "/v1/clusters/{cluster}/ha/lease";
    let etag = || {
        json!({
            "description": "the tag of the lease: its holder, epoch and whether it is live",
            "schema": {"type": "string"}
        })
    };
    vec![
        (
            "post",
            format!("{lease}/acquire"),
            409,
            "Jobstore-Lease-Expires-In-Ms",
            json!({
                "description": "milliseconds the other holder's lease has left, on the database's clock (at least 1)",
                "schema": {"type": "integer", "format": "int64", "minimum": 1}
            }),
        ),
        ("get", lease.to_owned(), 200, "ETag", etag()),
        ("get", lease.to_owned(), 304, "ETag", etag()),
        ("get", lease.to_owned(), 404, "ETag", etag()),
    ]
}

/// The whole document.
pub fn document() -> Value {
    let mut paths = Map::new();
    for op in operations() {
        let mut responses = Map::new();
        for (code, description, schema) in &op.responses {
            let mut r = json!({"description": description});
            if let Some(schema) = schema {
                r["content"] = json!({"application/json": {"schema": schema}});
            }
            for (method, path, status, name, header) in response_headers() {
                if (method, path.as_str(), status) == (op.method, op.path.as_str(), *code) {
                    r["headers"][name] = header;
                }
            }
            responses.insert(code.to_string(), r);
        }
        let mut o = json!({
            "tags": [op.tag],
            "summary": op.summary,
            "operationId": format!("{}{}", op.method, op.path.replace(['/', '{', '}', '-', '.'], "_")),
            "responses": responses,
        });
        if !op.params.is_empty() {
            o["parameters"] = Value::Array(op.params.clone());
        }
        if let Some(body) = &op.body {
            o["requestBody"] = body.clone();
        }
        if matches!(op.path.as_str(), "/healthz" | "/readyz" | "/metrics") {
            o["security"] = json!([]);
        }
        let entry = paths
            .entry(op.path.clone())
            .or_insert_with(|| Value::Object(Map::new()));
        entry[op.method] = o;
    }
    json!({
        "openapi": "3.0.3",
        "info": {
            "title": "jobstore",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "A shared, SQL-inspectable store for Apache Flink's job results, application results and savepoint operations. Errors are {\"errors\": [\"<message>\"]}."
        },
        "servers": [{"url": "/"}],
        "security": [{}, {"bearerAuth": []}],
        "paths": paths,
        "components": {
            "schemas": schemas(),
            "securitySchemes": {"bearerAuth": {"type": "http", "scheme": "bearer"}}
        }
    })
}
