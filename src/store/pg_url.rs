//! libpq's multi-host connection URL, which sqlx does not read: `postgres://h1:5432,h2:5432/db`
//! names several servers, tried in order for one that takes writes
//! (`target_session_attrs=read-write`, jobstore's default) or for any that answers
//! (`target_session_attrs=any`). Each host becomes a `PgConnectOptions` of its own, with the
//! user, password, database and parameters of the URL.

use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::PgConnectOptions;

/// The servers of a `--database-url`, in the order they are tried.
#[derive(Debug, Clone)]
pub(crate) struct PgTarget {
    /// One entry per host, in the URL's order; each entry is the host as written (for
    /// logs) and its options.
    pub hosts: Vec<(String, PgConnectOptions)>,
    /// Only a server that takes writes will do (`target_session_attrs=read-write`).
    pub read_write: bool,
    /// libpq's `connect_timeout` (seconds), when the URL gives one.
    pub connect_timeout: Option<Duration>,
}

/// Parameters of libpq that this module reads and sqlx does not know.
const OWN_PARAMETERS: [&str; 2] = ["target_session_attrs", "connect_timeout"];

/// Parses a `postgres://` or `postgresql://` URL with one host or a comma-separated list
/// (`user:password@h1:5432,[::1]:5433,h3/db?params`). Errors never repeat the password.
pub(crate) fn parse(url: &str) -> Result<PgTarget, String> {
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| "the database URL has no scheme (postgres://...)".to_owned())?;
    // The authority ends at the first '/' or '?' after the last '@' (a password may hold
    // either; libpq requires them percent-encoded, but be lenient).
    let at = rest.rfind('@').map_or(0, |i| i + 1);
    let end = rest[at..].find(['/', '?']).map_or(rest.len(), |i| at + i);
    let (authority, tail) = rest.split_at(end);
    let (userinfo, hostlist) = authority.split_at(at);

    let (path, query) = match tail.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (tail, None),
    };
    let mut read_write = true;
    let mut connect_timeout = None;
    let mut kept = Vec::new();
    for pair in query.into_iter().flat_map(|q| q.split('&')) {
        if pair.is_empty() {
            continue;
        }
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match key {
            "target_session_attrs" => {
                read_write = match value {
                    "read-write" | "primary" => true,
                    "any" => false,
                    other => {
                        return Err(format!(
                            "target_session_attrs={other:?} is not supported: use read-write \
                             (the default) or any"
                        ));
                    }
                }
            }
            "connect_timeout" => {
                let secs: u64 = value
                    .parse()
                    .map_err(|_| format!("connect_timeout={value:?} is not whole seconds"))?;
                connect_timeout = (secs > 0).then(|| Duration::from_secs(secs));
            }
            _ => kept.push(pair),
        }
    }
    debug_assert!(
        OWN_PARAMETERS
            .iter()
            .all(|p| !kept.iter().any(|k| k.starts_with(p)))
    );
    let query = if kept.is_empty() {
        String::new()
    } else {
        format!("?{}", kept.join("&"))
    };

    // A '/', '?', '#' or '@' left unencoded in a password would end the authority of the
    // single-host URL handed to sqlx: encode them (what is encoded already stays).
    let userinfo = encode_userinfo(userinfo);
    let hosts = split_hosts(hostlist)?;
    let mut parsed = Vec::with_capacity(hosts.len().max(1));
    if hosts.is_empty() {
        // No host in the authority (`postgres:///db?host=/run/postgresql`): sqlx's defaults.
        let one = format!("{scheme}://{userinfo}{path}{query}");
        parsed.push((String::new(), options(&one)?));
    }
    for host in hosts {
        let one = format!("{scheme}://{userinfo}{host}{path}{query}");
        parsed.push((host.to_owned(), options(&one)?));
    }
    Ok(PgTarget {
        hosts: parsed,
        read_write,
        connect_timeout,
    })
}

/// `user:password@` with the characters that end a URL's authority percent-encoded.
fn encode_userinfo(userinfo: &str) -> String {
    let Some(inner) = userinfo.strip_suffix('@') else {
        return userinfo.to_owned();
    };
    let mut out = String::with_capacity(userinfo.len() + 8);
    for c in inner.chars() {
        match c {
            '/' => out.push_str("%2F"),
            '?' => out.push_str("%3F"),
            '#' => out.push_str("%23"),
            '@' => out.push_str("%40"),
            c => out.push(c),
        }
    }
    out.push('@');
    out
}

/// The hosts of an authority's host list: `h1:5432,[::1]:5433,h3` (commas inside brackets
/// belong to no IPv6 address, but are not split there either).
fn split_hosts(list: &str) -> Result<Vec<&str>, String> {
    if list.is_empty() {
        return Ok(Vec::new());
    }
    let mut hosts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in list.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                hosts.push(&list[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    hosts.push(&list[start..]);
    if let Some(empty) = hosts.iter().position(|h| h.is_empty()) {
        return Err(format!(
            "the database URL's host list has an empty entry (host {} of {})",
            empty + 1,
            hosts.len()
        ));
    }
    Ok(hosts)
}

/// sqlx's options of one single-host URL; its error without the URL.
fn options(url: &str) -> Result<PgConnectOptions, String> {
    PgConnectOptions::from_str(url).map_err(|e| {
        format!(
            "cannot read the database URL {}: {e}",
            super::redact_url(url)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(url: &str) -> Vec<(String, String, u16)> {
        parse(url)
            .unwrap()
            .hosts
            .into_iter()
            .map(|(written, o)| (written, o.get_host().to_owned(), o.get_port()))
            .collect()
    }

    #[test]
    fn one_host_is_one_entry() {
        let t = parse("postgres://u:p@h:5433/db?sslmode=disable").unwrap();
        assert!(t.read_write);
        assert_eq!(t.hosts.len(), 1);
        let o = &t.hosts[0].1;
        assert_eq!((o.get_host(), o.get_port()), ("h", 5433));
        assert_eq!(o.get_username(), "u");
        assert_eq!(o.get_database(), Some("db"));
    }

    #[test]
    fn a_host_list_keeps_its_order_user_database_and_parameters() {
        let t = parse(
            "postgresql://us%40r:pa%3Ass@h1:5432,h2,[::1]:5434/jobs?application_name=x&target_session_attrs=any&connect_timeout=3",
        )
        .unwrap();
        assert!(!t.read_write);
        assert_eq!(t.connect_timeout, Some(Duration::from_secs(3)));
        let got: Vec<_> = t
            .hosts
            .iter()
            .map(|(_, o)| {
                (
                    o.get_host().to_owned(),
                    o.get_port(),
                    o.get_username().to_owned(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("h1".to_owned(), 5432, "us@r".to_owned()),
                ("h2".to_owned(), 5432, "us@r".to_owned()),
                ("[::1]".to_owned(), 5434, "us@r".to_owned()),
            ]
        );
        for (_, o) in &t.hosts {
            assert_eq!(o.get_database(), Some("jobs"));
            assert_eq!(o.get_application_name(), Some("x"));
        }
    }

    #[test]
    fn no_userinfo_and_no_path() {
        assert_eq!(
            hosts("postgres://a:1,b:2"),
            [("a:1".into(), "a".into(), 1), ("b:2".into(), "b".into(), 2)]
        );
        assert_eq!(
            hosts("postgres://a:1,b:2?sslmode=disable"),
            [("a:1".into(), "a".into(), 1), ("b:2".into(), "b".into(), 2)]
        );
    }

    #[test]
    fn a_password_with_a_comma_or_slash_does_not_split_hosts() {
        let t = parse("postgres://u:a,b/c@h1,h2/db").unwrap();
        assert_eq!(t.hosts.len(), 2);
        assert_eq!(t.hosts[0].1.get_host(), "h1");
        assert_eq!(t.hosts[1].1.get_host(), "h2");
        assert_eq!(t.hosts[1].1.get_database(), Some("db"));
    }

    #[test]
    fn read_write_is_the_default_and_bad_values_are_refused() {
        assert!(parse("postgres://h/db").unwrap().read_write);
        assert!(
            parse("postgres://h/db?target_session_attrs=read-write")
                .unwrap()
                .read_write
        );
        let e = parse("postgres://u:secret@h/db?target_session_attrs=standby").unwrap_err();
        assert!(e.contains("standby"), "{e}");
        let e = parse("postgres://u:secret@h1,,h2/db").unwrap_err();
        assert!(e.contains("empty") && !e.contains("secret"), "{e}");
    }
}
