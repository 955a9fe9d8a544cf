//! Bearer tokens with a `read` or `write` scope (write implies read).
//!
//! Tokens come from a file (`--tokens-file`, one `SCOPE TOKEN` per line, `#` comments) or
//! the environment (`JOBSTORE_TOKENS="read:TOKEN,write:TOKEN"`). With none configured, auth
//! is off. With tokens, every request but `/healthz`, `/readyz` and `/metrics` needs
//! `Authorization: Bearer <token>`: 401 without a known token, 403 when a read token asks
//! to write (anything but GET and HEAD). Tokens are compared as SHA-256 digests in constant
//! time, and never logged.

use axum::extract::Request;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::error::ApiError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scope {
    Read,
    Write,
}

impl Scope {
    fn parse(s: &str) -> Option<Scope> {
        match s {
            "read" => Some(Scope::Read),
            "write" => Some(Scope::Write),
            _ => None,
        }
    }
}

/// The configured tokens (digests only).
#[derive(Clone, Default)]
pub struct Tokens {
    entries: Vec<([u8; 32], Scope)>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Tokens({} configured, values redacted)",
            self.entries.len()
        )
    }
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

impl Tokens {
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    fn add(&mut self, scope: &str, token: &str, origin: &str) -> Result<(), String> {
        let scope = Scope::parse(scope.trim())
            .ok_or_else(|| format!("{origin}: scope must be `read` or `write`"))?;
        let token = token.trim();
        if token.len() < 8 || token.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(format!(
                "{origin}: a token must be at least 8 characters without spaces"
            ));
        }
        self.entries.push((digest(token), scope));
        Ok(())
    }

    /// Reads a tokens file: one `SCOPE TOKEN` per line; blank lines and `#` comments skipped.
    pub fn parse_file(text: &str, name: &str) -> Result<Tokens, String> {
        let mut tokens = Tokens::default();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let origin = format!("{name} line {}", n + 1);
            let (scope, token) = line
                .split_once(char::is_whitespace)
                .ok_or_else(|| format!("{origin}: expected `SCOPE TOKEN`"))?;
            tokens.add(scope, token, &origin)?;
        }
        Ok(tokens)
    }

    /// Reads `read:TOKEN,write:TOKEN` (the JOBSTORE_TOKENS variable).
    pub fn parse_env(text: &str) -> Result<Tokens, String> {
        let mut tokens = Tokens::default();
        for (n, item) in text
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .enumerate()
        {
            let origin = format!("JOBSTORE_TOKENS item {}", n + 1);
            let (scope, token) = item
                .split_once(':')
                .ok_or_else(|| format!("{origin}: expected `SCOPE:TOKEN`"))?;
            tokens.add(scope, token, &origin)?;
        }
        Ok(tokens)
    }

    pub fn merge(mut self, other: Tokens) -> Tokens {
        self.entries.extend(other.entries);
        self
    }

    /// The scope of a presented token, comparing every configured digest in constant time.
    fn scope_of(&self, presented: &str) -> Option<Scope> {
        let d = digest(presented);
        let mut found: Option<Scope> = None;
        for (known, scope) in &self.entries {
            if bool::from(known.ct_eq(&d)) {
                found = found.max(Some(*scope));
            }
        }
        found
    }
}

/// Paths that stay open with tokens configured.
fn is_open(path: &str) -> bool {
    matches!(path, "/healthz" | "/readyz" | "/metrics")
}

/// The check every request goes through (in `http::edge_layer`): the 401 or 403 answer
/// for a request that may not pass, `None` for one that may.
pub fn denial(tokens: &Tokens, req: &Request) -> Option<Response> {
    if tokens.is_empty() || is_open(req.uri().path()) {
        return None;
    }
    let presented = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            let (scheme, token) = v.split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
        });
    let Some(scope) = presented.and_then(|t| tokens.scope_of(t)) else {
        let mut res = ApiError::new(
            StatusCode::UNAUTHORIZED,
            "missing or unknown bearer token: send Authorization: Bearer <token>",
        )
        .into_response();
        res.headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        return Some(res);
    };
    let needs = if matches!(*req.method(), Method::GET | Method::HEAD) {
        Scope::Read
    } else {
        Scope::Write
    };
    if scope < needs {
        return Some(
            ApiError::new(
                StatusCode::FORBIDDEN,
                "this token has the read scope; the request needs write",
            )
            .into_response(),
        );
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_files_and_env() {
        let t = Tokens::parse_file("# ops\nread  reader-token-1\n\nwrite writer-token-1\n", "f")
            .unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t.scope_of("reader-token-1"), Some(Scope::Read));
        assert_eq!(t.scope_of("writer-token-1"), Some(Scope::Write));
        assert_eq!(t.scope_of("writer-token-2"), None);
        assert_eq!(t.scope_of(""), None);
        let e = Tokens::parse_env("read:abcdefgh, write:ijklmnop").unwrap();
        assert_eq!(e.scope_of("ijklmnop"), Some(Scope::Write));
        assert!(
            Tokens::parse_file("admin xxxxxxxxxx", "f")
                .unwrap_err()
                .contains("line 1")
        );
        assert!(Tokens::parse_env("read:short").is_err());
        assert!(Tokens::parse_env("readtoken").is_err());
        assert!(!format!("{t:?}").contains("reader-token"));
    }
}
