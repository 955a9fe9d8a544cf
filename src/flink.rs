//! A small client for the savepoint part of Flink's REST API, and the rules for the Flink
//! REST URLs it may be pointed at (a base URL of a listed host, see [`AllowedHosts`]).
//!
//! The client is hardened against a target that is not Flink: it follows no
//! redirect, reads at most `max_answer` bytes of an answer, and quotes only the HTTP status
//! and the `errors` entries of Flink's error body (each cut to [`MAX_QUOTED`] characters),
//! never other body text.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::ids::{FlinkRestUrl, JobId, TriggerId};
use crate::store::{FlinkJob, Operation, OperationKind, Outcome};

/// Default of `--flink-max-answer`: far above Flink's largest answer (a failure-cause with
/// its stack trace, 36 KB in tests/data).
pub const DEFAULT_MAX_ANSWER: usize = 4 * 1024 * 1024;

/// Longest quote of one of Flink's error messages, in characters.
pub const MAX_QUOTED: usize = 500;

/// How many entries of Flink's `errors` array are quoted.
const MAX_QUOTED_ERRORS: usize = 3;

/// What Flink answered to a trigger or a status request.
#[derive(Debug, Clone, PartialEq)]
pub enum FlinkAnswer {
    /// The trigger was accepted (2xx), with the trigger id Flink answered when it chose one
    /// (a disposal).
    Accepted(Option<TriggerId>),
    /// The status: still running.
    InProgress,
    /// The status: done, with its outcome (a location, a checkpoint id, a disposal, or a
    /// failure-cause).
    Completed(Outcome),
    /// Flink does not know the operation or the job (404).
    NotFound(String),
    /// Flink refused the request (another 4xx); its message.
    Rejected(u16, String),
    /// The request was refused before it was sent (the URL or its host is not allowed), or
    /// the answer cannot be accepted (a redirect, too large): jobstore's failure-cause.
    Failed(Value),
}

/// Flink could not be asked: connection refused, timeout, a 5xx, an unreadable answer.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct Unreachable(pub String);

/// `--flink-allowed-hosts`: the hosts the executor may send requests to. Host names match
/// the URL's host exactly (case-insensitively), whatever they resolve to; IP addresses and
/// CIDR networks match an IP host, or every address a host name resolves to. Empty: any.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowedHosts {
    names: Vec<String>,
    nets: Vec<(IpAddr, u8)>,
}

impl AllowedHosts {
    /// Parses `jobmanager,10.0.0.0/8,127.0.0.1,::1,[fd00::]/8`.
    pub fn parse(list: &str) -> Result<AllowedHosts, String> {
        let mut allowed = AllowedHosts::default();
        for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let (addr, prefix) = match entry.split_once('/') {
                Some((a, p)) => (a, Some(p)),
                None => (entry, None),
            };
            let unbracketed = addr
                .strip_prefix('[')
                .and_then(|a| a.strip_suffix(']'))
                .unwrap_or(addr);
            match (unbracketed.parse::<IpAddr>(), prefix) {
                (Ok(ip), prefix) => {
                    let ip = ip.to_canonical();
                    let max = if ip.is_ipv4() { 32 } else { 128 };
                    let bits = match prefix {
                        None => max,
                        Some(p) => match p.parse::<u8>() {
                            Ok(b) if b <= max => b,
                            _ => {
                                return Err(format!(
                                    "{entry:?}: the prefix length must be 0 to {max}"
                                ));
                            }
                        },
                    };
                    allowed.nets.push((ip, bits));
                }
                (Err(_), None) => {
                    let ok = entry.len() <= 253
                        && entry.split('.').all(|label| {
                            !label.is_empty()
                                && label.len() <= 63
                                && label
                                    .bytes()
                                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
                        });
                    if !ok {
                        return Err(format!(
                            "{entry:?} is neither a host name, an IP address nor a CIDR network"
                        ));
                    }
                    allowed.names.push(entry.to_ascii_lowercase());
                }
                (Err(_), Some(_)) => {
                    return Err(format!("{entry:?}: a CIDR network needs an IP address"));
                }
            }
        }
        Ok(allowed)
    }

    /// No restriction.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty() && self.nets.is_empty()
    }

    fn allows_name(&self, name: &str) -> bool {
        self.names.iter().any(|n| n.eq_ignore_ascii_case(name))
    }

    fn allows_ip(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.nets.iter().any(|&(net, bits)| in_net(ip, net, bits))
    }

    /// Checks the host of a (normalised) Flink URL; resolves a host name that is not
    /// listed by name and checks every address it resolves to. The error names the host.
    pub async fn check_url(&self, url: &str) -> Result<(), String> {
        if self.is_empty() {
            return Ok(());
        }
        let parsed = reqwest::Url::parse(url).map_err(|e| format!("{url:?}: {e}"))?;
        let port = parsed.port_or_known_default().unwrap_or(80);
        let host = parsed.host_str().unwrap_or_default();
        let literal = host.strip_prefix('[').and_then(|h| h.strip_suffix(']'));
        match literal.unwrap_or(host).parse::<IpAddr>() {
            Ok(ip) => self.check_ip(host, ip),
            Err(_) if host.is_empty() => Err(format!("{url:?} has no host")),
            Err(_) if self.allows_name(host) => Ok(()),
            Err(_) => self.resolve(host, port).await.map(|_| ()),
        }
    }

    fn check_ip(&self, host: &str, ip: IpAddr) -> Result<(), String> {
        if self.allows_ip(ip) {
            Ok(())
        } else {
            Err(format!("host {host} is not in --flink-allowed-hosts"))
        }
    }

    /// The addresses of `name`, all of them allowed (or `name` is listed by name).
    async fn resolve(&self, name: &str, port: u16) -> Result<Vec<SocketAddr>, String> {
        let addrs: Vec<SocketAddr> = tokio::net::lookup_host((name, port))
            .await
            .map_err(|e| format!("host {name} cannot be resolved: {e}"))?
            .collect();
        if self.is_empty() || self.allows_name(name) {
            return Ok(addrs);
        }
        if addrs.is_empty() {
            return Err(format!("host {name} resolves to no address"));
        }
        if let Some(bad) = addrs.iter().find(|a| !self.allows_ip(a.ip())) {
            return Err(format!(
                "host {name} resolves to {}, which is not in --flink-allowed-hosts",
                bad.ip()
            ));
        }
        Ok(addrs)
    }
}

fn in_net(ip: IpAddr, net: IpAddr, bits: u8) -> bool {
    match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(bits)).unwrap_or(0);
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(bits)).unwrap_or(0);
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

/// The client's resolver: the connection goes only to addresses the allow-list accepts,
/// whatever the name resolves to by the time of the connection (no DNS rebinding between
/// the check and the connection).
struct CheckedResolver(Arc<AllowedHosts>);

impl reqwest::dns::Resolve for CheckedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let allowed = self.0.clone();
        let name = name.as_str().to_owned();
        Box::pin(async move {
            let addrs = allowed.resolve(&name, 0).await?;
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

#[derive(Clone)]
pub struct FlinkClient {
    http: reqwest::Client,
    allowed: Arc<AllowedHosts>,
    max_answer: usize,
}

impl FlinkClient {
    /// A client for any host, reading answers up to [`DEFAULT_MAX_ANSWER`].
    pub fn new(timeout: Duration) -> Self {
        Self::with_limits(timeout, AllowedHosts::default(), DEFAULT_MAX_ANSWER)
    }

    pub fn with_limits(timeout: Duration, allowed: AllowedHosts, max_answer: usize) -> Self {
        let allowed = Arc::new(allowed);
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .dns_resolver(Arc::new(CheckedResolver(allowed.clone())))
            .build()
            .expect("an HTTP client without TLS settings always builds");
        FlinkClient {
            http,
            allowed,
            max_answer,
        }
    }

    /// The base URL as stored, normalised and checked against the allow-list; the
    /// failure-cause of an operation that cannot be sent there.
    async fn checked_base(&self, base: &FlinkRestUrl) -> Result<FlinkRestUrl, Value> {
        let base: FlinkRestUrl = base.as_str().parse().map_err(|e| {
            failure_cause(
                "FlinkAddressRefusedException",
                &format!("flink-rest-url {e}"),
            )
        })?;
        self.allowed.check_url(base.as_str()).await.map_err(|e| {
            failure_cause(
                "FlinkAddressRefusedException",
                &format!("jobstore does not send requests to {base}: {e}"),
            )
        })?;
        Ok(base)
    }

    /// Triggers the operation on Flink. Savepoints, stops and checkpoints carry the
    /// operation's request id as Flink's `triggerId`, so that a repeated trigger (after a
    /// crash or a take-over) never starts a second one; a disposal gets its trigger id from
    /// Flink (`Accepted(Some(id))`), and repeating it finds the savepoint gone.
    pub async fn trigger(
        &self, base: &FlinkRestUrl, op: &Operation,
    ) -> Result<FlinkAnswer, Unreachable> {
        // Flink's savepoint and stop bodies differ in two field names.
        let savepoint = |route: &str, dir: &str, flag: &str, on: OperationKind| {
            let mut body = serde_json::Map::new();
            body.insert(dir.to_owned(), json!(op.target_directory));
            body.insert(flag.to_owned(), json!(op.kind == on));
            body.insert("triggerId".to_owned(), json!(op.request_id));
            body.insert("formatType".to_owned(), json!(op.format_type));
            (format!("/jobs/{}/{route}", op.job_id), Value::Object(body))
        };
        let (path, body) = match op.kind {
            OperationKind::Savepoint | OperationKind::CancelWithSavepoint => savepoint(
                "savepoints",
                "target-directory",
                "cancel-job",
                OperationKind::CancelWithSavepoint,
            ),
            OperationKind::StopWithSavepoint | OperationKind::TerminateWithSavepoint => savepoint(
                "stop",
                "targetDirectory",
                "drain",
                OperationKind::TerminateWithSavepoint,
            ),
            OperationKind::Checkpoint => (
                format!("/jobs/{}/checkpoints", op.job_id),
                json!({
                    "checkpointType": op.checkpoint_type.map(|t| t.as_str()),
                    "triggerId": op.request_id,
                }),
            ),
            OperationKind::Disposal => (
                "/savepoint-disposal".to_owned(),
                json!({"savepoint-path": op.savepoint_path}),
            ),
        };
        let (code, body) = match self
            .exchange(base, reqwest::Method::POST, &path, Some(&body))
            .await?
        {
            Ok(answer) => answer,
            Err(cause) => return Ok(FlinkAnswer::Failed(cause)),
        };
        Ok(match code {
            200..=299 => FlinkAnswer::Accepted(
                body.get("request-id")
                    .and_then(Value::as_str)
                    .and_then(|id| id.parse().ok()),
            ),
            404 => FlinkAnswer::NotFound(flink_message(&body)),
            code => FlinkAnswer::Rejected(code, flink_message(&body)),
        })
    }

    /// Asks Flink for the status of an operation (a disposal by the trigger id Flink gave
    /// it, `flink_trigger`).
    pub async fn status(
        &self, base: &FlinkRestUrl, op: &Operation, flink_trigger: Option<TriggerId>,
    ) -> Result<FlinkAnswer, Unreachable> {
        let path = match op.kind {
            OperationKind::Checkpoint => {
                format!("/jobs/{}/checkpoints/{}", op.job_id, op.request_id)
            }
            OperationKind::Disposal => format!(
                "/savepoint-disposal/{}",
                flink_trigger.unwrap_or(op.request_id)
            ),
            _ => format!("/jobs/{}/savepoints/{}", op.job_id, op.request_id),
        };
        let (code, body) = match self
            .exchange(base, reqwest::Method::GET, &path, None)
            .await?
        {
            Ok(answer) => answer,
            Err(cause) => return Ok(FlinkAnswer::Failed(cause)),
        };
        match code {
            200..=299 => parse_status(op.kind, &body).ok_or_else(|| {
                Unreachable(format!(
                    "GET {path}: Flink answered {code} with a body that is not an operation status"
                ))
            }),
            404 => Ok(FlinkAnswer::NotFound(flink_message(&body))),
            code => Ok(FlinkAnswer::Rejected(code, flink_message(&body))),
        }
    }

    /// The jobs of a Flink cluster (`GET /jobs/overview`): id, name and state.
    pub async fn jobs(&self, base: &FlinkRestUrl) -> Result<Vec<FlinkJob>, Unreachable> {
        let path = "/jobs/overview";
        let (code, body) = match self
            .exchange(base, reqwest::Method::GET, path, None)
            .await?
        {
            Ok(answer) => answer,
            Err(cause) => return Err(Unreachable(format!("GET {path}: {cause}"))),
        };
        if code != 200 {
            return Err(Unreachable(format!(
                "GET {path}: Flink answered {code}: {}",
                flink_message(&body)
            )));
        }
        let jobs = body.get("jobs").and_then(Value::as_array);
        Ok(jobs
            .into_iter()
            .flatten()
            .filter_map(|j| {
                Some(FlinkJob {
                    job_id: j.get("jid")?.as_str()?.parse().ok()?,
                    name: truncate(j.get("name")?.as_str()?),
                    state: truncate(j.get("state")?.as_str()?),
                })
            })
            .collect())
    }

    /// One request to Flink at `base` + `path`: the status and the JSON body of a 2xx or 4xx
    /// answer (a 5xx or no answer is Unreachable), or jobstore's failure-cause when the
    /// request cannot be sent there or its answer cannot be accepted.
    async fn exchange(
        &self, base: &FlinkRestUrl, method: reqwest::Method, path: &str, body: Option<&Value>,
    ) -> Result<Result<(u16, Value), Value>, Unreachable> {
        let base = match self.checked_base(base).await {
            Ok(b) => b,
            Err(cause) => return Ok(Err(cause)),
        };
        let url = format!("{base}{path}");
        let what = format!("{method} {url}");
        let mut request = self.http.request(method, &url);
        if let Some(body) = body {
            request = request.json(body);
        }
        let res = request
            .send()
            .await
            .map_err(|e| Unreachable(format!("{what}: {}", error_chain(&e))))?;
        let status = res.status().as_u16();
        let body = match self.read_answer(res, &what).await? {
            Ok(body) => body,
            Err(cause) => return Ok(Err(cause)),
        };
        if status >= 500 {
            return Err(Unreachable(format!(
                "{what}: Flink answered {status}: {}",
                flink_message(&body)
            )));
        }
        Ok(Ok((status, body)))
    }

    /// Reads an answer of at most `max_answer` bytes, chunk by chunk. A redirect or a larger
    /// answer is a failure-cause (Err inside Ok); a broken connection is Unreachable.
    async fn read_answer(
        &self, mut res: reqwest::Response, what: &str,
    ) -> Result<Result<Value, Value>, Unreachable> {
        let status = res.status();
        if status.is_redirection() {
            return Ok(Err(failure_cause(
                "FlinkRedirectException",
                &format!(
                    "{what}: the answer was {} (a redirect); jobstore follows no redirect: \
                     configure Flink's own REST address as flink-rest-url",
                    status.as_u16()
                ),
            )));
        }
        let too_large = || {
            Ok(Err(failure_cause(
                "FlinkAnswerTooLargeException",
                &format!(
                    "{what}: the answer ({}) was larger than --flink-max-answer ({} bytes); \
                     it was not read further",
                    status.as_u16(),
                    self.max_answer
                ),
            )))
        };
        if res
            .content_length()
            .is_some_and(|n| n > self.max_answer as u64)
        {
            return too_large();
        }
        let mut bytes = Vec::new();
        loop {
            match res.chunk().await {
                Ok(Some(chunk)) => {
                    if bytes.len() + chunk.len() > self.max_answer {
                        return too_large();
                    }
                    bytes.extend_from_slice(&chunk);
                }
                Ok(None) => break,
                Err(e) => {
                    return Err(Unreachable(format!(
                        "{what}: reading the answer: {}",
                        error_chain(&e)
                    )));
                }
            }
        }
        // Not JSON: nothing of it is quoted (only Flink's own error fields are).
        Ok(Ok(serde_json::from_slice(&bytes).unwrap_or(Value::Null)))
    }
}

/// Reads Flink's status body `{"status": {"id": ...}, "operation": ...}` of an operation of
/// `kind`: a savepoint's `location`, a checkpoint's `checkpointId`, a disposal's `{}`, or the
/// failure-cause (`failure-cause`; `failureCause` for checkpoints in Flink 2.3).
pub fn parse_status(kind: OperationKind, body: &Value) -> Option<FlinkAnswer> {
    match body.pointer("/status/id")?.as_str()? {
        "IN_PROGRESS" => Some(FlinkAnswer::InProgress),
        "COMPLETED" => {
            let op = body.get("operation")?;
            let cause = op
                .get("failure-cause")
                .or_else(|| op.get("failureCause"))
                .filter(|c| c.is_object());
            if let Some(cause) = cause {
                return Some(FlinkAnswer::Completed(Outcome::FailureCause(cause.clone())));
            }
            let done = match kind {
                OperationKind::Checkpoint => {
                    Outcome::Checkpoint(op.get("checkpointId")?.as_i64().filter(|id| *id >= 1)?)
                }
                OperationKind::Disposal => Outcome::Disposed,
                _ => Outcome::Location(op.get("location")?.as_str()?.to_owned()),
            };
            Some(FlinkAnswer::Completed(done))
        }
        _ => None,
    }
}

/// The first line of each of the first entries of Flink's error body `{"errors": [...]}`
/// (Flink appends a Java stack trace), each cut to [`MAX_QUOTED`] characters. Nothing else
/// of the body is quoted: the target may not be Flink.
fn flink_message(body: &Value) -> String {
    let quoted: Vec<String> = body
        .get("errors")
        .and_then(Value::as_array)
        .map(|errors| {
            errors
                .iter()
                .filter_map(Value::as_str)
                .take(MAX_QUOTED_ERRORS)
                .map(|e| truncate(e.lines().next().unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default();
    if quoted.is_empty() {
        "no Flink error message".to_owned()
    } else {
        quoted.join("; ")
    }
}

fn truncate(s: &str) -> String {
    match s.char_indices().nth(MAX_QUOTED) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_owned(),
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

/// A failure-cause of jobstore's own, shaped like Flink's (`class`, `stack-trace`,
/// `serialized-throwable`): Flink's REST client (`flink savepoint`, `flink stop`) decodes the
/// serialized throwable and prints jobstore's class and message.
pub fn failure_cause(class: &str, message: &str) -> Value {
    let class = format!("jobstore.{class}");
    let stack_trace = format!("{class}: {message}");
    let serialized = crate::flink_throwable::serialized_throwable(&class, message, &stack_trace);
    json!({
        "class": class,
        "stack-trace": stack_trace,
        "serialized-throwable": serialized,
    })
}

/// What an operation of this kind is called in jobstore's own failure-causes, and ` for
/// job J` unless it belongs to no job (a disposal).
fn operation_words(kind: OperationKind, job: JobId) -> (&'static str, String) {
    let what = match kind {
        OperationKind::Checkpoint => "checkpoint",
        OperationKind::Disposal => "savepoint disposal",
        _ => "savepoint",
    };
    let of_job = if job == JobId::NONE {
        String::new()
    } else {
        format!(" for job {job}")
    };
    (what, of_job)
}

/// The failure-cause of an operation Flink no longer knows.
pub fn lost_cause(
    kind: OperationKind, job: JobId, request: TriggerId, flink_message: &str,
) -> Value {
    let (what, of_job) = operation_words(kind, job);
    failure_cause(
        "FlinkOperationLostException",
        &format!(
            "Flink lost the {what} operation with triggerId={request}{of_job}: it answered 404 \
             ({flink_message}). Flink keeps operation results in JobManager memory only (for \
             rest.async.store-duration) and forgets them on JobManager failover; whether the \
             {what} was made is unknown."
        ),
    )
}

/// The failure-cause of an operation Flink refused.
pub fn rejected_cause(kind: OperationKind, job: JobId, code: u16, flink_message: &str) -> Value {
    let (what, of_job) = operation_words(kind, job);
    failure_cause(
        "FlinkRequestRejectedException",
        &format!("Flink refused the {what} request{of_job} with {code}: {flink_message}"),
    )
}

/// The failure-cause of an operation that did not complete in time.
pub fn timeout_cause(timeout: Duration, last_error: Option<&str>) -> Value {
    let mut message = format!(
        "The operation did not complete within the operation timeout of {}",
        humantime::format_duration(timeout)
    );
    if let Some(e) = last_error {
        message.push_str(&format!("; Flink was unreachable: {e}"));
    }
    message.push('.');
    failure_cause("SavepointTimeoutException", &message)
}

/// A random name for one serve process, as lease owner.
pub fn owner_name() -> String {
    let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "jobstore".into());
    format!(
        "{host}/{}/{}",
        std::process::id(),
        &TriggerId::random().to_string()[..8]
    )
}

/// Whether a disposal's failure-cause says there was nothing at the path (its files gone
/// already): Flink 2.3 fails it with a `FlinkException` whose cause is
/// `java.io.FileNotFoundException: Cannot find checkpoint or savepoint file/directory ...`
/// (tests/data/flink-2.3.0/lifecycle). An existing folder without `_metadata` fails with a
/// FileNotFoundException too, but another message, and its folder stays: not gone.
pub fn savepoint_is_gone(cause: &Value) -> bool {
    let text = cause
        .get("stack-trace")
        .and_then(Value::as_str)
        .unwrap_or_default();
    text.contains(
        "java.io.FileNotFoundException: Cannot find checkpoint or savepoint file/directory",
    )
}
