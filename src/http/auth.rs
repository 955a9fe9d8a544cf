//! Bearer tokens with a scope (`read`, `write` or `admin`; each implies the ones before it),
//! each valid for every cluster or only for the clusters its patterns name.
//!
//! Tokens come from a file (`--tokens-file`, one `SCOPE TOKEN` or `SCOPE CLUSTERS TOKEN` per
//! line, `#` comments) or the environment (`JOBSTORE_TOKENS="read:TOKEN,write:prod-*:TOKEN"`).
//! CLUSTERS is a list of cluster-id patterns (`,` between them in the file, `|` in the
//! variable, whose items `,` already separates) where `*` matches any run of characters.
//! With none configured, auth is off. With tokens, every request but `/healthz`, `/readyz`
//! and `/metrics` needs `Authorization: Bearer <token>`: 401 without a known token, 403 when
//! the token's scope is too low for the request (`GET`/`HEAD` need `read`, `PUT`/`DELETE`
//! need `admin` except under `/v1/clusters/{cluster}/ha/`, every other method `write`) or the request's cluster is not one of the
//! token's (`/v1/clusters/{cluster}...` is for that cluster, the un-prefixed Flink routes
//! `/jobs/...` for the default cluster; the cluster list `GET /v1/clusters` and any other
//! path naming no cluster need a token for every cluster, `/openapi.json` excepted). Tokens
//! are compared as SHA-256 digests in constant time, and never logged nor echoed.

use axum::extract::Request;
use axum::http::{Method, header};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::error::ApiError;
use crate::ids::ClusterId;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scope {
    Read,
    Write,
    Admin,
}

impl Scope {
    fn parse(s: &str) -> Option<Scope> {
        match s {
            "read" => Some(Scope::Read),
            "write" => Some(Scope::Write),
            "admin" => Some(Scope::Admin),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Write => "write",
            Scope::Admin => "admin",
        }
    }

    /// The scope a request needs, by its method; under `/v1/clusters/{cluster}/ha/` (Flink's
    /// HA services: what a JobManager's plugin writes, `PUT` and `DELETE` included) every
    /// write needs `write` only.
    fn needed_by(method: &Method, path: &str) -> Scope {
        match *method {
            Method::GET | Method::HEAD => Scope::Read,
            Method::PUT | Method::DELETE if !is_ha_path(path) => Scope::Admin,
            _ => Scope::Write,
        }
    }
}

/// `/v1/clusters/{cluster}/ha` or below.
fn is_ha_path(path: &str) -> bool {
    path.strip_prefix("/v1/clusters/")
        .and_then(|rest| rest.split_once('/'))
        .is_some_and(|(_, rest)| rest == "ha" || rest.starts_with("ha/"))
}

/// The clusters a token is valid for.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Clusters {
    All,
    /// Cluster-id patterns, `*` matching any run of characters (none of them is `*` alone).
    Only(Vec<String>),
}

impl Clusters {
    /// Parses `p1<sep>p2...`; `None` when a pattern is empty, longer than a cluster id, or
    /// has a character a cluster id cannot have (other than `*`).
    fn parse(text: &str, sep: char) -> Option<Clusters> {
        let mut patterns = Vec::new();
        for p in text.split(sep) {
            let ok = (1..=128).contains(&p.len())
                && p.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'*'));
            if !ok {
                return None;
            }
            if p.bytes().all(|b| b == b'*') {
                return Some(Clusters::All);
            }
            patterns.push(p.to_owned());
        }
        Some(Clusters::Only(patterns))
    }

    fn allows(&self, cluster: &str) -> bool {
        match self {
            Clusters::All => true,
            Clusters::Only(patterns) => patterns.iter().any(|p| glob(p, cluster)),
        }
    }
}

/// Whether `text` matches `pattern`, where `*` matches any run of characters (also none) and
/// every other character itself. Linear in practice: one backtracking point, the last `*`.
fn glob(pattern: &str, text: &str) -> bool {
    let (p, t) = (pattern.as_bytes(), text.as_bytes());
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, ti));
            pi += 1;
        } else if pi < p.len() && p[pi] == t[ti] {
            pi += 1;
            ti += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&b| b == b'*')
}

/// One configured token (its digest only).
#[derive(Clone)]
struct Entry {
    digest: [u8; 32],
    scope: Scope,
    clusters: Clusters,
}

/// The configured tokens (digests only).
#[derive(Clone, Default)]
pub struct Tokens {
    entries: Vec<Entry>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Tokens({} configured, {} cluster-limited, values redacted)",
            self.entries.len(),
            self.limited()
        )
    }
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// What one presented token may do: the union of the lines that configure it.
#[derive(Debug, Default)]
struct Grants<'a>(Vec<(Scope, &'a Clusters)>);

impl Tokens {
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// How many tokens are limited to some clusters.
    pub fn limited(&self) -> usize {
        self.entries
            .iter()
            .filter(|e| e.clusters != Clusters::All)
            .count()
    }

    /// Adds one token. Messages name `origin` (the line or item), never the token nor any
    /// other text of the line: a line with its fields out of order would have the token
    /// where a scope or a pattern belongs.
    fn add(
        &mut self, scope: &str, clusters: Option<(&str, char)>, token: &str, origin: &str,
    ) -> Result<(), String> {
        let scope = Scope::parse(scope.trim())
            .ok_or_else(|| format!("{origin}: scope must be `read`, `write` or `admin`"))?;
        let clusters = match clusters {
            None => Clusters::All,
            Some((text, sep)) => Clusters::parse(text.trim(), sep).ok_or_else(|| {
                format!(
                    "{origin}: the clusters must be cluster-id patterns separated by `{sep}` \
                     (letters, digits, `.`, `_`, `-`, and `*` for any run of characters; \
                     1 to 128 characters each)"
                )
            })?,
        };
        let token = token.trim();
        if token.len() < 8 || token.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(format!(
                "{origin}: a token must be at least 8 characters without spaces"
            ));
        }
        self.entries.push(Entry {
            digest: digest(token),
            scope,
            clusters,
        });
        Ok(())
    }

    /// Reads a tokens file: one `SCOPE TOKEN` (every cluster) or `SCOPE CLUSTERS TOKEN`
    /// (CLUSTERS: comma-separated cluster-id patterns) per line; blank lines and `#`
    /// comments skipped.
    pub fn parse_file(text: &str, name: &str) -> Result<Tokens, String> {
        let mut tokens = Tokens::default();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let origin = format!("{name} line {}", n + 1);
            let fields: Vec<&str> = line.split_whitespace().collect();
            tokens.add_fields(
                &fields,
                ',',
                &origin,
                "`SCOPE TOKEN` or `SCOPE CLUSTERS TOKEN`",
            )?;
        }
        Ok(tokens)
    }

    /// Reads `read:TOKEN,write:CLUSTERS:TOKEN` (the JOBSTORE_TOKENS variable), CLUSTERS
    /// being `|`-separated cluster-id patterns. An item has at most three `:`-separated
    /// fields: a token with a `:` in it needs the CLUSTERS field (`write:*:to:ken`).
    pub fn parse_env(text: &str) -> Result<Tokens, String> {
        let mut tokens = Tokens::default();
        for (n, item) in text
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .enumerate()
        {
            let origin = format!("JOBSTORE_TOKENS item {}", n + 1);
            let fields: Vec<&str> = item.splitn(3, ':').collect();
            tokens.add_fields(
                &fields,
                '|',
                &origin,
                "`SCOPE:TOKEN` or `SCOPE:CLUSTERS:TOKEN`",
            )?;
        }
        Ok(tokens)
    }

    /// Adds the token of one line or item: `[scope, token]` or `[scope, clusters, token]`
    /// (cluster patterns separated by `sep`).
    fn add_fields(
        &mut self, fields: &[&str], sep: char, origin: &str, expected: &str,
    ) -> Result<(), String> {
        match fields[..] {
            [scope, token] => self.add(scope, None, token, origin),
            [scope, clusters, token] => self.add(scope, Some((clusters, sep)), token, origin),
            _ => Err(format!("{origin}: expected {expected}")),
        }
    }

    pub fn merge(mut self, other: Tokens) -> Tokens {
        self.entries.extend(other.entries);
        self
    }

    /// What a presented token may do, comparing every configured digest in constant time
    /// (every entry is compared, whichever matches).
    fn grants_of(&self, presented: &str) -> Grants<'_> {
        let d = digest(presented);
        let mut grants = Grants::default();
        for e in &self.entries {
            if bool::from(e.digest.ct_eq(&d)) {
                grants.0.push((e.scope, &e.clusters));
            }
        }
        grants
    }

    /// The hex SHA-256 of a presented token when it is a configured one (what a console
    /// session keeps instead of the token).
    pub fn known_digest(&self, presented: &str) -> Option<String> {
        if self.grants_of(presented).0.is_empty() {
            return None;
        }
        Some(hex::encode(digest(presented)))
    }

    /// What the configured token of this hex digest may do (`None`: no such token any
    /// more, e.g. after a restart with another tokens file).
    pub fn viewer_of_digest(&self, hex_digest: &str) -> Option<Viewer> {
        let mut d = [0u8; 32];
        hex::decode_to_slice(hex_digest, &mut d).ok()?;
        let mut grants = Vec::new();
        for e in &self.entries {
            if bool::from(e.digest.ct_eq(&d)) {
                grants.push((e.scope, e.clusters.clone()));
            }
        }
        (!grants.is_empty()).then_some(Viewer { grants })
    }

    /// The highest scope of a presented token, whatever its clusters (tests).
    #[cfg(test)]
    fn scope_of(&self, presented: &str) -> Option<Scope> {
        self.grants_of(presented).0.iter().map(|g| g.0).max()
    }
}

/// Paths that stay open with tokens configured.
fn is_open(path: &str) -> bool {
    matches!(path, "/healthz" | "/readyz" | "/metrics") || is_console(path)
}

/// The console (`/` redirects there): it signs its viewers in itself (`ui::session`), with
/// these tokens' scopes and clusters.
fn is_console(path: &str) -> bool {
    path == "/" || path == "/ui" || path.starts_with("/ui/")
}

/// What one configured token may do, for the console: the union of the lines that configure
/// it, or everything when no token is configured.
#[derive(Debug, Clone)]
pub struct Viewer {
    grants: Vec<(Scope, Clusters)>,
}

impl Viewer {
    /// The viewer of a console without tokens: every scope on every cluster.
    pub fn open() -> Viewer {
        Viewer {
            grants: vec![(Scope::Admin, Clusters::All)],
        }
    }

    /// Whether the token has `scope` (or more) on `cluster`.
    pub fn may(&self, scope: Scope, cluster: &str) -> bool {
        self.grants
            .iter()
            .any(|(s, c)| *s >= scope && c.allows(cluster))
    }

    /// Whether the token reaches `cluster` at all (reads it).
    pub fn sees(&self, cluster: &str) -> bool {
        self.may(Scope::Read, cluster)
    }

    /// The token's highest scope anywhere, for the page header.
    pub fn scope_name(&self) -> &'static str {
        self.grants
            .iter()
            .map(|g| g.0)
            .max()
            .unwrap_or(Scope::Read)
            .name()
    }

    /// Whether some line of the token is limited to some clusters and none covers them all.
    pub fn limited(&self) -> bool {
        !self.grants.iter().any(|(_, c)| *c == Clusters::All)
    }
}

/// The clusters a request reaches, by its path.
#[derive(Debug, PartialEq, Eq)]
enum Target {
    /// One cluster: `/v1/clusters/{cluster}[/...]`, or the default cluster for `/jobs/...`.
    Cluster(String),
    /// A cluster segment that is not a cluster id once percent-decoded (the route answers
    /// 400): only a token for every cluster passes.
    BadCluster,
    /// No cluster in particular: `/openapi.json`.
    Nothing,
    /// Every cluster, or a path that names none (`GET /v1/clusters`, unknown paths): only a
    /// token for every cluster passes, so that a route added later without a cluster in its
    /// path is closed to cluster-limited tokens until someone decides otherwise.
    Any,
}

fn target(path: &str, default_cluster: &ClusterId) -> Target {
    if path == "/openapi.json" {
        return Target::Nothing;
    }
    // Flink's own routes without a cluster prefix, as Flink serves them and as its REST
    // client sends them: the default cluster's.
    let flink = path.strip_prefix("/v1").unwrap_or(path);
    if ["/jobs", "/savepoint-disposal"]
        .iter()
        .any(|r| flink == *r || flink.starts_with(&format!("{r}/")))
    {
        return Target::Cluster(default_cluster.as_str().to_owned());
    }
    let Some(rest) = path.strip_prefix("/v1/clusters/") else {
        return Target::Any;
    };
    let segment = rest.split('/').next().unwrap_or_default();
    if segment.is_empty() {
        return Target::Any;
    }
    // The router percent-decodes the segment before the handler parses it as a cluster id:
    // decide on the same text.
    match percent_decode(segment) {
        Some(c) if c.parse::<ClusterId>().is_ok() => Target::Cluster(c),
        _ => Target::BadCluster,
    }
}

/// `%XX`-decodes a path segment as the router does (a malformed escape stays as written);
/// `None` for text that is not UTF-8.
fn percent_decode(s: &str) -> Option<String> {
    percent_encoding::percent_decode_str(s)
        .decode_utf8()
        .ok()
        .map(|c| c.into_owned())
}

/// At most 64 characters of a cluster id, for messages.
fn shown(cluster: &str) -> &str {
    match cluster.char_indices().nth(64) {
        Some((i, _)) => &cluster[..i],
        None => cluster,
    }
}

fn forbidden(message: String) -> Response {
    ApiError::Forbidden(message).into_response()
}

/// The check every request goes through (in `http::edge_layer`): the 401 or 403 answer
/// for a request that may not pass, `None` for one that may.
pub fn denial(tokens: &Tokens, default_cluster: &ClusterId, req: &Request) -> Option<Response> {
    let path = req.uri().path();
    if tokens.is_empty() || is_open(path) {
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
    let grants = presented.map(|t| tokens.grants_of(t)).unwrap_or_default();
    if grants.0.is_empty() {
        return Some(ApiError::Unauthorized.into_response());
    }
    let needs = Scope::needed_by(req.method(), path);
    let target = target(path, default_cluster);
    let reaches = |clusters: &Clusters| match &target {
        Target::Nothing => true,
        Target::Cluster(c) => clusters.allows(c),
        Target::BadCluster | Target::Any => *clusters == Clusters::All,
    };
    if grants.0.iter().any(|(s, c)| *s >= needs && reaches(c)) {
        return None;
    }
    // Refused: by scope when some line of the token reaches the target, else by cluster.
    if let Some(best) = grants
        .0
        .iter()
        .filter(|(_, c)| reaches(c))
        .map(|g| g.0)
        .max()
    {
        return Some(forbidden(format!(
            "this token has the {} scope; the request needs {}",
            best.name(),
            needs.name()
        )));
    }
    tracing::warn!(
        target = ?target,
        method = %req.method(),
        "a cluster-limited token was refused outside its clusters"
    );
    Some(forbidden(match &target {
        Target::Cluster(c) => format!("this token is not allowed for cluster {}", shown(c)),
        Target::BadCluster => "this token is not allowed for this cluster".to_owned(),
        Target::Nothing | Target::Any => {
            "this token is limited to some clusters; this path needs a token for every cluster"
                .to_owned()
        }
    }))
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
            Tokens::parse_file("owner xxxxxxxxxx", "f")
                .unwrap_err()
                .contains("line 1")
        );
        assert!(Tokens::parse_env("read:short").is_err());
        assert!(Tokens::parse_env("readtoken").is_err());
        assert!(!format!("{t:?}").contains("reader-token"));
    }

    #[test]
    fn ha_writes_need_write_and_other_puts_and_deletes_admin() {
        use axum::http::Method;
        let needs = |m: Method, p: &str| Scope::needed_by(&m, p);
        assert_eq!(needs(Method::PUT, "/v1/clusters/c"), Scope::Admin);
        assert_eq!(
            needs(Method::DELETE, "/v1/clusters/c/job-results/x"),
            Scope::Admin
        );
        assert_eq!(
            needs(Method::PUT, "/v1/clusters/c/ha/leader-info/dispatcher"),
            Scope::Write
        );
        assert_eq!(
            needs(
                Method::DELETE,
                "/v1/clusters/c/ha/state-handles/checkpoint/x"
            ),
            Scope::Write
        );
        assert_eq!(needs(Method::PUT, "/v1/clusters/c/hab/x"), Scope::Admin);
        assert_eq!(needs(Method::PUT, "/v1/clusters/ha"), Scope::Admin);
        assert_eq!(needs(Method::GET, "/v1/clusters/c/ha/lease"), Scope::Read);
        assert_eq!(
            needs(Method::POST, "/v1/clusters/c/ha/lease/acquire"),
            Scope::Write
        );
    }

    #[test]
    fn parses_admin_and_cluster_patterns() {
        let t = Tokens::parse_file(
            "admin admin-token-1\nwrite prod-*,staging writer-token-1\nread * reader-token-1\n",
            "f",
        )
        .unwrap();
        assert_eq!(t.len(), 3);
        assert_eq!(t.limited(), 1);
        assert_eq!(t.scope_of("admin-token-1"), Some(Scope::Admin));
        let g = t.grants_of("writer-token-1");
        assert_eq!(
            g.0,
            vec![(
                Scope::Write,
                &Clusters::Only(vec!["prod-*".into(), "staging".into()])
            )]
        );
        assert_eq!(*t.grants_of("reader-token-1").0[0].1, Clusters::All);
        let e = Tokens::parse_env("write:prod-*|dev-?x:abcdefgh");
        assert!(e.is_err(), "`?` is no pattern character");
        let e = Tokens::parse_env("read:abcdefgh,write:prod-*|eu-*:ijklmnop,admin:*:to:ken:xyz")
            .unwrap();
        assert_eq!(
            *e.grants_of("ijklmnop").0[0].1,
            Clusters::Only(vec!["prod-*".into(), "eu-*".into()])
        );
        assert_eq!(e.scope_of("to:ken:xyz"), Some(Scope::Admin));
        assert_eq!(e.scope_of("abcdefgh"), Some(Scope::Read));
    }

    #[test]
    fn malformed_lines_name_their_line_and_never_the_token() {
        let secret = "s3cr3t-t0ken-value";
        for (text, what) in [
            (format!("read ok-token-1\nowner {secret}\n"), "scope"),
            (format!("# c\n\nwrite prod/eu {secret}\n"), "clusters"),
            (format!("write prod-*,,eu {secret}\n"), "clusters"),
            (format!("write {secret} prod-*\n"), "at least 8"),
            (format!("write prod-* {secret} extra\n"), "expected"),
            ("write prod-* short\n".to_owned(), "at least 8"),
            (format!("{secret}\n"), "expected"),
        ] {
            let err = Tokens::parse_file(&text, "tokens").unwrap_err();
            let line = text.lines().count();
            assert!(err.contains(&format!("tokens line {line}:")), "{err}");
            assert!(err.contains(what), "{err}");
            assert!(!err.contains(secret), "{err}");
        }
        for (text, what) in [
            (format!("read:ok-token-1,owner:{secret}"), "item 2"),
            (format!("write:prod eu:{secret}"), "item 1"),
            (format!("write:{secret}"), ""),
        ] {
            match Tokens::parse_env(&text) {
                Err(err) => {
                    assert!(err.contains(what), "{err}");
                    assert!(!err.contains(secret), "{err}");
                }
                Ok(_) => assert!(what.is_empty(), "{text} parsed"),
            }
        }
    }

    #[test]
    fn globs_match_star_runs_only() {
        for (p, t, m) in [
            ("prod-*", "prod-eu", true),
            ("prod-*", "prod-", true),
            ("prod-*", "prod", false),
            ("prod-*", "dev-1", false),
            ("*-eu", "prod-eu", true),
            ("*-eu", "prod-eu-2", false),
            ("p*d*u", "prod-eu", true),
            ("p*d*x", "prod-eu", false),
            ("prod", "prod", true),
            ("prod", "prod-eu", false),
            ("a.b", "aXb", false),
            ("**", "", true),
        ] {
            assert_eq!(glob(p, t), m, "{p} {t}");
        }
    }

    #[test]
    fn targets_by_path() {
        let d: ClusterId = "default".parse().unwrap();
        assert_eq!(
            target("/v1/clusters/prod-eu/job-results", &d),
            Target::Cluster("prod-eu".into())
        );
        assert_eq!(
            target("/v1/clusters/prod-eu", &d),
            Target::Cluster("prod-eu".into())
        );
        assert_eq!(
            target("/v1/clusters/prod%2Deu/job-results", &d),
            Target::Cluster("prod-eu".into())
        );
        assert_eq!(target("/v1/clusters/prod-%2F/x", &d), Target::BadCluster);
        assert_eq!(target("/v1/clusters/prod-%zz/x", &d), Target::BadCluster);
        assert_eq!(
            target("/jobs/abc/savepoints", &d),
            Target::Cluster("default".into())
        );
        for flink in [
            "/v1/jobs/abc/savepoints",
            "/savepoint-disposal",
            "/v1/savepoint-disposal/abc",
        ] {
            assert_eq!(
                target(flink, &d),
                Target::Cluster("default".into()),
                "{flink}"
            );
        }
        assert_eq!(target("/v1/clusters", &d), Target::Any);
        assert_eq!(target("/v1/clusters/", &d), Target::Any);
        assert_eq!(target("/v1/other", &d), Target::Any);
        assert_eq!(target("/openapi.json", &d), Target::Nothing);
    }
}
