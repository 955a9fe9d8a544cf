//! The one HTTP client of the suites, [`Client`]: the router driven in-process
//! (`tower::ServiceExt::oneshot`) or a server on a real connection (reqwest), both answering
//! a [`Resp`]; the router served on a real 127.0.0.1 listener ([`Service`]); and the check
//! of the contract's error body (`{"errors": ["<message>"]}`, never SQL or database text).

use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, Request, StatusCode, header};
use jobstore::http::{AppState, HttpConfig};
use serde_json::Value;
use tokio::task::JoinHandle;
use tower::ServiceExt;

use super::SharedStore;

/// An answer.
#[derive(Debug, Clone)]
pub struct Resp {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
    /// "METHOD path", for messages.
    pub request: String,
    /// From sending the request to the whole answer read.
    pub elapsed: Duration,
}

impl Resp {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body as JSON (panics, showing it, when it is not).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "{}: answer {} is not JSON ({e}): {:?}",
                self.request,
                self.status,
                self.text()
            )
        })
    }

    /// The `content-type` header, or `""`.
    pub fn content_type(&self) -> &str {
        self.headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }

    /// Asserts the status, showing the answer when it differs.
    #[track_caller]
    pub fn expect(&self, status: StatusCode) -> &Self {
        assert_eq!(
            self.status,
            status,
            "{}: expected {status}, got {} {:?}",
            self.request,
            self.status,
            self.text()
        );
        self
    }

    /// Asserts the status and the contract's error body `{"errors": ["<message>"]}` (JSON
    /// content type, one non-empty message, no database text) and returns the message.
    #[track_caller]
    pub fn error(&self, status: StatusCode) -> String {
        self.expect(status);
        assert_error_body(&self.request, self)
    }

    /// Asserts a 4xx error whose message contains each of `words` (case-insensitively).
    #[track_caller]
    pub fn error_naming(&self, status: StatusCode, words: &[&str]) -> String {
        assert!(status.is_client_error(), "{status} is not a 4xx");
        let message = self.error(status);
        for word in words {
            assert!(
                message.to_lowercase().contains(&word.to_lowercase()),
                "{}: message {message:?} does not name {word:?}",
                self.request
            );
        }
        message
    }
}

/// Words that betray database or SQL text in a message meant for clients: as written, and
/// in any case.
const SQL_WORDS: [&str; 7] = [
    "SELECT",
    "INSERT",
    "UPDATE ",
    "DELETE FROM",
    "SQLSTATE",
    "pg_",
    "sqlite",
];
const DB_WORDS_ANY_CASE: [&str; 8] = [
    "sqlx",
    "constraint",
    "database error",
    "syntax error",
    "relation ",
    "duplicate key",
    "violates",
    "error returned from database",
];

/// The first word of database or SQL text in `message`.
pub fn database_text(message: &str) -> Option<&'static str> {
    if let Some(w) = SQL_WORDS.iter().find(|w| message.contains(*w)) {
        return Some(w);
    }
    let lower = message.to_lowercase();
    DB_WORDS_ANY_CASE
        .iter()
        .find(|w| lower.contains(*w))
        .copied()
}

/// No SQL or database text in a message meant for clients.
#[track_caller]
pub fn assert_no_database_text(context: &str, message: &str) {
    if let Some(word) = database_text(message) {
        panic!("{context}: message carries database text ({word}): {message:?}");
    }
}

/// Why an error answer is not the contract's `{"errors": ["<message>"]}` (JSON, one
/// non-empty message, no SQL or database text); None when it is.
pub fn error_body_problem(r: &Resp) -> Option<String> {
    if !r.content_type().starts_with("application/json") {
        return Some(format!("content type {:?}", r.content_type()));
    }
    let Ok(body) = serde_json::from_slice::<Value>(&r.body) else {
        return Some("not JSON".into());
    };
    let Some(errors) = body.get("errors").and_then(Value::as_array) else {
        return Some("no `errors` array".into());
    };
    if body.as_object().map(|o| o.len()) != Some(1) || errors.len() != 1 {
        return Some("not exactly one field and one message".into());
    }
    let Some(message) = errors[0].as_str() else {
        return Some("the message is not a string".into());
    };
    if message.trim().is_empty() {
        return Some("empty message".into());
    }
    database_text(message).map(|w| format!("database text ({w})"))
}

/// Asserts the contract's error body; returns its message.
#[track_caller]
pub fn assert_error_body(context: &str, r: &Resp) -> String {
    if let Some(problem) = error_body_problem(r) {
        panic!(
            "{context}: error {} is not the contract's body ({problem}): {:?}",
            r.status,
            r.text()
        );
    }
    r.json()["errors"][0].as_str().unwrap().to_owned()
}

/// The one HTTP client of the suites: the router in-process, or a server on a real
/// connection. With an empty base, the paths given are whole URLs (one client for several
/// servers).
#[derive(Clone)]
pub struct Client {
    transport: Transport,
}

#[derive(Clone)]
enum Transport {
    InProcess(axum::Router),
    Http {
        base: String,
        client: reqwest::Client,
    },
}

fn shorten(s: &str) -> String {
    match s.char_indices().nth(160) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_owned(),
    }
}

impl Client {
    /// The router over `store`, driven in-process.
    pub fn in_process(store: SharedStore, config: HttpConfig) -> Client {
        Client::router(jobstore::http::router(AppState::new(store, config)))
    }

    /// This router, driven in-process.
    pub fn router(router: axum::Router) -> Client {
        Client {
            transport: Transport::InProcess(router),
        }
    }

    /// A server at `base` (`http://127.0.0.1:<port>`, or `""` for whole URLs), 30 s per
    /// request.
    pub fn http(base: impl Into<String>) -> Client {
        Client::http_with_timeout(base, Duration::from_secs(30))
    }

    /// [`Client::http`] with another timeout per request.
    pub fn http_with_timeout(base: impl Into<String>, timeout: Duration) -> Client {
        Client {
            transport: Transport::Http {
                base: base.into(),
                client: reqwest::Client::builder()
                    .timeout(timeout)
                    .pool_idle_timeout(Duration::from_secs(5))
                    .build()
                    .expect("an HTTP client"),
            },
        }
    }

    /// Any request, with these headers; a refused, reset or timed-out connection is `Err`
    /// (the router in-process always answers).
    pub async fn try_send(
        &self, method: Method, path: &str, headers: &[(&str, &str)], body: impl Into<Bytes>,
    ) -> Result<Resp, String> {
        let body: Bytes = body.into();
        let start = Instant::now();
        let request = format!("{method} {}", shorten(path));
        let (status, headers, body) = match &self.transport {
            Transport::InProcess(router) => {
                let mut builder = Request::builder().method(method.clone()).uri(path);
                for (name, value) in headers {
                    builder = builder.header(*name, *value);
                }
                let built = builder
                    .body(Body::from(body))
                    .unwrap_or_else(|e| panic!("cannot build {request}: {e}"));
                let response = router
                    .clone()
                    .oneshot(built)
                    .await
                    .unwrap_or_else(|e| match e {});
                let (parts, body) = response.into_parts();
                let body = axum::body::to_bytes(body, usize::MAX)
                    .await
                    .map_err(|e| format!("{request}: reading the answer: {e}"))?;
                (parts.status, parts.headers, body)
            }
            Transport::Http { base, client } => {
                let mut builder = client.request(method.clone(), format!("{base}{path}"));
                for (name, value) in headers {
                    builder = builder.header(*name, *value);
                }
                if !body.is_empty() {
                    builder = builder.body(body);
                }
                let response = builder
                    .send()
                    .await
                    .map_err(|e| format!("{request} on {base}: {e:?}"))?;
                let (status, headers) = (response.status(), response.headers().clone());
                let body = response
                    .bytes()
                    .await
                    .map_err(|e| format!("{request} on {base}: {e:?}"))?;
                (status, headers, body)
            }
        };
        Ok(Resp {
            status,
            headers,
            body,
            request,
            elapsed: start.elapsed(),
        })
    }

    /// Any request; `content_type` None sends none.
    pub async fn request(
        &self, method: Method, path: &str, content_type: Option<&str>, body: impl Into<Bytes>,
    ) -> Resp {
        let headers: Vec<(&str, &str)> = content_type
            .map(|ct| ("content-type", ct))
            .into_iter()
            .collect();
        self.try_send(method, path, &headers, body)
            .await
            .unwrap_or_else(|e| panic!("no answer: {e}"))
    }

    pub async fn get(&self, path: &str) -> Resp {
        self.request(Method::GET, path, None, Bytes::new()).await
    }

    pub async fn head(&self, path: &str) -> Resp {
        self.request(Method::HEAD, path, None, Bytes::new()).await
    }

    pub async fn delete(&self, path: &str) -> Resp {
        self.request(Method::DELETE, path, None, Bytes::new()).await
    }

    /// POST without a body and without a content type (mark clean).
    pub async fn post_empty(&self, path: &str) -> Resp {
        self.request(Method::POST, path, None, Bytes::new()).await
    }

    pub async fn post_json(&self, path: &str, body: &Value) -> Resp {
        self.request(Method::POST, path, Some(JSON), json_bytes(body))
            .await
    }

    /// POST with these exact bytes as a JSON body.
    pub async fn post_raw(&self, path: &str, body: impl AsRef<[u8]>) -> Resp {
        let body = Bytes::copy_from_slice(body.as_ref());
        self.request(Method::POST, path, Some(JSON), body).await
    }

    pub async fn put_json(&self, path: &str, body: &Value) -> Resp {
        self.request(Method::PUT, path, Some(JSON), json_bytes(body))
            .await
    }

    /// GET; no answer is `Err`.
    pub async fn try_get(&self, path: &str) -> Result<Resp, String> {
        self.try_send(Method::GET, path, &[], Bytes::new()).await
    }

    /// POST with a JSON body or none; no answer is `Err`.
    pub async fn try_post(&self, path: &str, body: Option<&Value>) -> Result<Resp, String> {
        match body {
            Some(body) => {
                self.try_send(
                    Method::POST,
                    path,
                    &[("content-type", JSON)],
                    json_bytes(body),
                )
                .await
            }
            None => self.try_send(Method::POST, path, &[], Bytes::new()).await,
        }
    }
}

const JSON: &str = "application/json";

fn json_bytes(body: &Value) -> Vec<u8> {
    serde_json::to_vec(body).expect("JSON")
}

/// A [`Resp`] of an answer read off a raw connection (status, and head and body as text),
/// for [`assert_error_body`].
pub fn raw_reply(status: u16, answer: &str) -> Resp {
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((answer, ""));
    let mut headers = HeaderMap::new();
    for line in head.lines().skip(1) {
        if let Some((name, value)) = line.split_once(':')
            && let (Ok(name), Ok(value)) = (
                HeaderName::from_bytes(name.trim().as_bytes()),
                HeaderValue::from_str(value.trim()),
            )
        {
            headers.append(name, value);
        }
    }
    Resp {
        status: StatusCode::from_u16(status).expect("an HTTP status"),
        headers,
        body: Bytes::from(body.to_owned()),
        request: "a raw request".to_owned(),
        elapsed: Duration::ZERO,
    }
}

/// The router on a real listener on 127.0.0.1 (a free port), like `jobstore serve`, with
/// its state at hand (the executor wake-up of the executors started beside it); stopped
/// on drop.
pub struct Service {
    pub http: Client,
    pub state: AppState,
    pub store: SharedStore,
    server: JoinHandle<()>,
}

impl Service {
    pub async fn start(store: SharedStore, config: HttpConfig) -> Service {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a listener on 127.0.0.1");
        let addr = listener.local_addr().expect("its address");
        let state = AppState::new(store.clone(), config);
        let app = jobstore::http::router(state.clone());
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.expect("serving");
        });
        Service {
            http: Client::http(format!("http://{addr}")),
            state,
            store,
            server,
        }
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        self.server.abort();
    }
}
