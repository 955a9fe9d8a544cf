//! Who views the console: with tokens configured, a signed-in session (a random id in an
//! `HttpOnly`, `SameSite=Strict` cookie, `Secure` when the request came over TLS; the server
//! keeps the SHA-256 of the id and of the token it stands for in `ui_sessions`, shared by every
//! replica, so a sign-out ends it everywhere); without tokens, everyone. Every form carries a
//! CSRF token derived from a second random cookie (double submit, compared in constant time).

use std::time::Duration;

use axum::http::{HeaderMap, HeaderValue, header};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::http::AppState;
use crate::http::auth::Viewer;
use crate::store::StoreError;

pub const SESSION_COOKIE: &str = "jobstore_session";
pub const CSRF_COOKIE: &str = "jobstore_csrf";
/// How long a session lasts after sign-in.
pub const SESSION_LIFETIME: Duration = Duration::from_secs(12 * 3600);
/// Sessions kept at most (the oldest go first at a sign-in beyond it).
pub const MAX_SESSIONS: u32 = 10_000;

/// The viewer of one request.
pub struct Who {
    /// `None`: tokens are configured and the request has no live session.
    pub viewer: Option<Viewer>,
    /// Whether the viewer signed in (tokens configured): the page offers a sign-out.
    pub signed_in: bool,
    /// The CSRF token the page's forms carry.
    pub csrf: String,
    /// A new CSRF cookie to set (the request had none).
    pub new_csrf_cookie: Option<String>,
    /// The request came over TLS (a proxy's `X-Forwarded-Proto: https` or `Forwarded:
    /// proto=https`): cookies get `Secure`.
    pub secure: bool,
}

/// The value of a cookie of the request.
pub fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    crate::http::extract::header_items(headers, header::COOKIE, ';')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.trim())
        .filter(|v| (32..=128).contains(&v.len()) && v.bytes().all(|b| b.is_ascii_hexdigit()))
}

pub fn sha256_hex(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// 256 random bits as hex.
pub fn random_id() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

fn csrf_of(seed: &str) -> String {
    sha256_hex(&format!("jobstore-console-csrf:{seed}"))
}

pub fn is_secure(headers: &HeaderMap) -> bool {
    let forwarded_proto = headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("https"));
    let forwarded = headers
        .get(header::FORWARDED)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.to_ascii_lowercase().contains("proto=https"));
    forwarded_proto || forwarded
}

/// A `Set-Cookie` value.
pub fn set_cookie(name: &str, value: &str, max_age: Option<u64>, secure: bool) -> HeaderValue {
    let mut c = format!("{name}={value}; Path=/; HttpOnly; SameSite=Strict");
    if let Some(age) = max_age {
        c.push_str(&format!("; Max-Age={age}"));
    }
    if secure {
        c.push_str("; Secure");
    }
    HeaderValue::from_str(&c).expect("a cookie of hex and ASCII")
}

/// Who sends the request.
pub async fn who(state: &AppState, headers: &HeaderMap) -> Result<Who, StoreError> {
    let secure = is_secure(headers);
    let (seed, new_csrf_cookie) = match cookie(headers, CSRF_COOKIE) {
        Some(c) => (c.to_owned(), None),
        None => {
            let c = random_id();
            (c.clone(), Some(c))
        }
    };
    let csrf = csrf_of(&seed);
    let tokens = &state.config.tokens;
    if tokens.is_empty() {
        return Ok(Who {
            viewer: Some(Viewer::open()),
            signed_in: false,
            csrf,
            new_csrf_cookie,
            secure,
        });
    }
    let mut viewer = None;
    if let (Some(sid), Some(console)) = (cookie(headers, SESSION_COOKIE), state.store.console())
        && let Some(digest) = console.session_token(&sha256_hex(sid)).await?
    {
        viewer = tokens.viewer_of_digest(&digest);
    }
    Ok(Who {
        signed_in: viewer.is_some(),
        viewer,
        csrf,
        new_csrf_cookie,
        secure,
    })
}

/// Whether a form's CSRF token is the one of the request's CSRF cookie.
pub fn csrf_ok(headers: &HeaderMap, presented: Option<&str>) -> bool {
    let (Some(seed), Some(presented)) = (cookie(headers, CSRF_COOKIE), presented) else {
        return false;
    };
    bool::from(csrf_of(seed).as_bytes().ct_eq(presented.as_bytes()))
}
