//! Builds the store's statement table from the SQL files under `src/store/sql/`: one constant
//! per statement name, with the text each backend runs and the names of its parameters.
//!
//! - `common/NAME.sql`: one statement for both backends, which differ at most in the spelling
//!   of the placeholders below;
//! - `postgres/NAME.sql` and `sqlite/NAME.sql`: a statement whose SQL truly differs (its
//!   header says why): both files must exist, and no common one;
//! - `postgres_only/NAME.sql`: a statement only PostgreSQL runs, for what SQLite does another
//!   way (the group commit's batch of result writes); its constant is a `PgSql`, which the
//!   runner of both backends does not take;
//! - `fragments/NAME.sql`: text that statements share, written in as `{NAME}` (without its
//!   `--` comment lines and its final newline); a fragment whose text holds `{arg}` is written
//!   in as `{NAME(X)}`, X in the place of `{arg}`.
//!
//! Parameters are named: `:cluster`, `:epoch`, ... (a `:` and a lowercase snake_case name; `::`
//! is PostgreSQL's cast, and comments and quoted text are left alone). The build writes them
//! as `$1`, `$2`, ... in the order of their first use (a name used twice is one parameter) and
//! records the names in that order (`Sql::params`); the store binds a struct whose fields are
//! those names (`store::db`, `params!`), which the compiler checks against the list. The two
//! files of a per-backend statement name the same parameters. A positional `$N` in a
//! statement file is refused.
//!
//! The placeholders, for PostgreSQL and for SQLite (X is SQL, written in as it stands, with
//! its parameters):
//!
//! - `{now}`: `now()`; `strftime('%Y-%m-%dT%H:%M:%fZ', 'now')`;
//! - `{now_plus_ms(X)}`, `{now_minus_ms(X)}`: now plus (minus) X milliseconds,
//!   `now() + make_interval(secs => CAST(X AS double precision) / 1000.0)`;
//!   `strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '+' || (CAST(X AS REAL) / 1000.0) || ' seconds')`;
//! - `{timestamp_from_ms(X)}`: the time of X epoch milliseconds,
//!   `to_timestamp(CAST(X AS double precision) / 1000.0)`;
//!   `strftime('%Y-%m-%dT%H:%M:%fZ', CAST(X AS REAL) / 1000.0, 'unixepoch')`;
//! - `{epoch_ms(X)}`: the time X as epoch milliseconds (NULL for PostgreSQL's infinities),
//!   `CASE WHEN isfinite(X) THEN CAST(floor(extract(epoch FROM X) * 1000) AS bigint) END`;
//!   `CAST(round((julianday(X) - 2440587.5) * 86400000) AS INTEGER)`;
//! - `{uuid(X)}`, `{uuid_text(X)}`, `{json(X)}`: `CAST(X AS uuid)`, `CAST(X AS text)`,
//!   `CAST(X AS json)`; X (SQLite keeps lease ids and results as text);
//! - `{least(X, Y)}`: the smaller of X and Y, `LEAST(X, Y)`; `MIN(X, Y)`;
//! - `{for_share}`: ` FOR SHARE` (a share lock on the rows read); nothing (SQLite has one
//!   writer);
//! - `{indexed_by(INDEX)}`: nothing; ` INDEXED BY INDEX` (an index hint).
//!
//! The build fails, naming the file, on an unknown placeholder, on a `{` or `}` that is not
//! one, on a positional parameter, and on a statement that one backend lacks (so that a store
//! method cannot be written for one backend only).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

const SQL_DIR: &str = "src/store/sql";

#[derive(Clone, Copy, PartialEq)]
enum Backend {
    Postgres,
    Sqlite,
}

/// The `.sql` files of a folder by name (none when the folder does not exist).
fn files(dir: &Path) -> BTreeMap<String, PathBuf> {
    let mut out = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        if path.extension().is_some_and(|e| e == "sql") {
            let stem = path
                .file_stem()
                .and_then(|s| s.to_str())
                .expect("a UTF-8 name");
            assert!(
                stem.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
                "{}: statement and fragment names are lowercase snake_case",
                path.display()
            );
            out.insert(stem.to_owned(), path);
        }
    }
    out
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The text of a placeholder for a backend: `Ok(None)` when it is not a built-in one.
fn builtin(name: &str, arg: Option<&str>, backend: Backend) -> Result<Option<String>, String> {
    use Backend::{Postgres, Sqlite};
    const SQLITE_NOW: &str = "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')";
    let takes_arg = || arg.ok_or_else(|| format!("{{{name}(...)}} takes an argument"));
    let text = match name {
        "now" | "for_share" | "checkpoint_id_floor" if arg.is_some() => {
            return Err(format!("{{{name}}} takes no argument"));
        }
        "now" => match backend {
            Postgres => "now()".to_owned(),
            Sqlite => SQLITE_NOW.to_owned(),
        },
        "for_share" => match backend {
            Postgres => " FOR SHARE".to_owned(),
            Sqlite => String::new(),
        },
        // The lowest checkpoint id the counters hand out on the database's current timeline:
        // (timeline - 1) * 2^32 on PostgreSQL (the timeline rises at every promotion of a
        // standby, and its number heads the current WAL file's name), 0 on SQLite.
        "checkpoint_id_floor" => match backend {
            Postgres => "(CAST(CAST('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) AS bit(32)) AS bigint) - 1) * 4294967296".to_owned(),
            Sqlite => "0".to_owned(),
        },
        "now_plus_ms" | "now_minus_ms" => {
            let x = takes_arg()?;
            let sign = if name == "now_plus_ms" { '+' } else { '-' };
            match backend {
                Postgres => {
                    format!(
                        "now() {sign} make_interval(secs => CAST({x} AS double precision) / 1000.0)"
                    )
                }
                Sqlite => format!(
                    "strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '{sign}' || (CAST({x} AS REAL) / 1000.0) || ' seconds')"
                ),
            }
        }
        "timestamp_from_ms" => {
            let x = takes_arg()?;
            match backend {
                Postgres => format!("to_timestamp(CAST({x} AS double precision) / 1000.0)"),
                Sqlite => {
                    format!(
                        "strftime('%Y-%m-%dT%H:%M:%fZ', CAST({x} AS REAL) / 1000.0, 'unixepoch')"
                    )
                }
            }
        }
        "epoch_ms" => {
            let x = takes_arg()?;
            match backend {
                Postgres => format!(
                    "CASE WHEN isfinite({x}) THEN CAST(floor(extract(epoch FROM {x}) * 1000) AS bigint) END"
                ),
                Sqlite => {
                    format!("CAST(round((julianday({x}) - 2440587.5) * 86400000) AS INTEGER)")
                }
            }
        }
        "least" => {
            let x = takes_arg()?;
            match backend {
                Postgres => format!("LEAST({x})"),
                Sqlite => format!("MIN({x})"),
            }
        }
        "uuid" | "uuid_text" | "json" => {
            let x = takes_arg()?;
            let ty = if name == "uuid_text" { "text" } else { name };
            match backend {
                Postgres => format!("CAST({x} AS {ty})"),
                Sqlite => x.to_owned(),
            }
        }
        "indexed_by" => {
            let index = takes_arg()?;
            if index.is_empty()
                || !index
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
            {
                return Err(format!("{{indexed_by({index})}} names no index"));
            }
            match backend {
                Postgres => String::new(),
                Sqlite => format!(" INDEXED BY {index}"),
            }
        }
        _ => return Ok(None),
    };
    Ok(Some(text))
}

struct Expander {
    fragments: BTreeMap<String, PathBuf>,
}

impl Expander {
    /// `text` with its placeholders written out for `backend`.
    fn expand(&self, text: &str, backend: Backend, depth: usize) -> Result<String, String> {
        if depth > 8 {
            return Err("placeholders nested too deep (a fragment that names itself?)".into());
        }
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(at) = rest.find(['{', '}']) {
            out.push_str(&rest[..at]);
            if rest[at..].starts_with('}') {
                return Err(format!(
                    "a `}}` that closes no placeholder: {:?}",
                    line_of(rest, at)
                ));
            }
            let (name, arg, len) = parse(&rest[at..]).ok_or_else(|| {
                format!("a `{{` that opens no placeholder: {:?}", line_of(rest, at))
            })?;
            let arg = arg
                .map(|a| self.expand(a, backend, depth + 1))
                .transpose()?;
            let text = match builtin(name, arg.as_deref(), backend)? {
                Some(text) => text,
                None => match self.fragments.get(name) {
                    Some(path) => {
                        let fragment = read(path)
                            .lines()
                            .filter(|l| !l.trim_start().starts_with("--"))
                            .collect::<Vec<_>>()
                            .join("\n");
                        let fragment = fragment.trim_end();
                        let text = match (&arg, fragment.contains("{arg}")) {
                            (None, false) => fragment.to_owned(),
                            (Some(arg), true) => fragment.replace("{arg}", arg),
                            (None, true) => {
                                return Err(format!("{{{name}(...)}} takes an argument"));
                            }
                            (Some(_), false) => {
                                return Err(format!("{{{name}}} takes no argument"));
                            }
                        };
                        self.expand(&text, backend, depth + 1)
                            .map_err(|e| format!("{}: {e}", path.display()))?
                    }
                    None => return Err(format!("unknown placeholder {{{name}}}")),
                },
            };
            out.push_str(&text);
            rest = &rest[at + len..];
        }
        out.push_str(rest);
        Ok(out)
    }
}

/// The line of `text` around byte `at`, for an error.
fn line_of(text: &str, at: usize) -> &str {
    let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let end = text[at..].find('\n').map_or(text.len(), |i| at + i);
    &text[start..end]
}

/// A placeholder at the start of `text` (which starts with `{`): its name, its argument (the
/// text between balanced parentheses) and its length.
fn parse(text: &str) -> Option<(&str, Option<&str>, usize)> {
    let body = &text[1..];
    let name_len = body
        .bytes()
        .take_while(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'_')
        .count();
    if name_len == 0 {
        return None;
    }
    let name = &body[..name_len];
    let after = &body[name_len..];
    if let Some(inner) = after.strip_prefix('(') {
        let mut depth = 1;
        for (i, c) in inner.char_indices() {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                '\n' => return None,
                _ => {}
            }
            if depth == 0 {
                return inner[i + 1..]
                    .starts_with('}')
                    .then(|| (name, Some(&inner[..i]), 1 + name_len + 1 + i + 2));
            }
        }
        None
    } else {
        after
            .starts_with('}')
            .then_some((name, None, 1 + name_len + 1))
    }
}

/// `text` with its named parameters (`:name`) written as `$1`, `$2`, ...: a name takes its
/// place in `order`, or the next place when it is not there yet. Comments (`--` to the end of
/// the line), quoted text and identifiers, and `::` (a cast) are left alone; a positional
/// parameter (`$1`) is an error.
fn number_params(text: &str, order: &mut Vec<String>) -> Result<String, String> {
    let name_byte = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_';
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < bytes.len() {
        let rest = &text[i..];
        let skip = match bytes[i] {
            b'-' if rest.starts_with("--") => rest.find('\n').unwrap_or(rest.len()),
            quote @ (b'\'' | b'"') => {
                let end = rest[1..]
                    .find(quote as char)
                    .ok_or_else(|| format!("unterminated quoted text: {:?}", line_of(text, i)))?;
                end + 2
            }
            b':' if rest.starts_with("::") => 2,
            b':' if rest.len() > 1
                && (bytes[i + 1].is_ascii_lowercase() || bytes[i + 1] == b'_') =>
            {
                let len = 1 + rest[1..].bytes().take_while(|b| name_byte(*b)).count();
                let name = &rest[1..len];
                let n = match order.iter().position(|p| p == name) {
                    Some(at) => at + 1,
                    None => {
                        order.push(name.to_owned());
                        order.len()
                    }
                };
                write!(out, "${n}").expect("writing to a String");
                i += len;
                continue;
            }
            b'$' if rest.len() > 1 && bytes[i + 1].is_ascii_digit() => {
                return Err(format!(
                    "a positional parameter: name it (`:name`): {:?}",
                    line_of(text, i)
                ));
            }
            _ => rest.chars().next().map_or(1, char::len_utf8),
        };
        out.push_str(&rest[..skip]);
        i += skip;
    }
    Ok(out)
}

/// A Rust list literal of names.
fn names(order: &[String]) -> String {
    let quoted: Vec<String> = order.iter().map(|n| format!("{n:?}")).collect();
    format!("&[{}]", quoted.join(", "))
}

/// A Rust raw string literal holding `text`.
fn literal(text: &str) -> String {
    let mut hashes = String::from("#");
    while text.contains(&format!("\"{hashes}")) {
        hashes.push('#');
    }
    format!("r{hashes}\"{text}\"{hashes}")
}

fn main() {
    println!("cargo:rerun-if-changed={SQL_DIR}");
    // refinery embeds the migrations at compile time.
    println!("cargo:rerun-if-changed=migrations");
    let root = Path::new(SQL_DIR);
    for sub in ["common", "postgres", "sqlite", "postgres_only", "fragments"] {
        println!("cargo:rerun-if-changed={SQL_DIR}/{sub}");
    }
    let common = files(&root.join("common"));
    let postgres = files(&root.join("postgres"));
    let sqlite = files(&root.join("sqlite"));
    let postgres_only = files(&root.join("postgres_only"));
    let expander = Expander {
        fragments: files(&root.join("fragments")),
    };
    let pg_names: BTreeSet<&String> = postgres.keys().collect();
    let lite_names: BTreeSet<&String> = sqlite.keys().collect();
    if let Some(name) = pg_names.symmetric_difference(&lite_names).next() {
        panic!("{SQL_DIR}: statement {name} has a file for one backend only");
    }
    let mut seen: BTreeSet<&String> = BTreeSet::new();
    for name in common
        .keys()
        .chain(postgres.keys())
        .chain(postgres_only.keys())
    {
        assert!(
            seen.insert(name),
            "{SQL_DIR}: statement {name} has files in more than one of common/, postgres/ and sqlite/, postgres_only/"
        );
    }

    // A statement's text for a backend, its parameters numbered in `order`.
    let statement = |path: &Path, backend, order: &mut Vec<String>| {
        expander
            .expand(&read(path), backend, 0)
            .and_then(|text| number_params(&text, order))
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    };
    let mut out = String::from("// Generated by build.rs from src/store/sql: do not edit.\n");
    let all: BTreeMap<&String, (&PathBuf, &PathBuf, String)> = common
        .iter()
        .map(|(n, p)| (n, (p, p, format!("common/{n}.sql"))))
        .chain(postgres.iter().map(|(n, p)| {
            (
                n,
                (p, &sqlite[n], format!("postgres/{n}.sql, sqlite/{n}.sql")),
            )
        }))
        .collect();
    for (name, (pg, lite, where_)) in all {
        let mut order = Vec::new();
        let pg_text = statement(pg, Backend::Postgres, &mut order);
        let mut own = Vec::new();
        statement(lite, Backend::Sqlite, &mut own);
        let sorted = |names: &[String]| names.iter().cloned().collect::<BTreeSet<_>>();
        assert!(
            sorted(&order) == sorted(&own),
            "{where_}: the two files name different parameters ({order:?}, {own:?})"
        );
        // SQLite's text numbered as PostgreSQL's: one list of names serves both.
        let lite_text = statement(lite, Backend::Sqlite, &mut order);
        writeln!(
            out,
            "/// `{where_}`\npub const {}: Sql = Sql {{ name: \"{name}\", postgres: {}, sqlite: {}, params: {} }};",
            name.to_ascii_uppercase(),
            literal(&pg_text),
            literal(&lite_text),
            names(&order),
        )
        .expect("writing to a String");
    }
    for (name, path) in &postgres_only {
        let mut order = Vec::new();
        let text = statement(path, Backend::Postgres, &mut order);
        writeln!(
            out,
            "/// `postgres_only/{name}.sql`\npub const {}: PgSql = PgSql {{ name: \"{name}\", postgres: {}, params: {} }};",
            name.to_ascii_uppercase(),
            literal(&text),
            names(&order),
        )
        .expect("writing to a String");
    }
    let dest = Path::new(&std::env::var("OUT_DIR").expect("OUT_DIR")).join("statements.rs");
    std::fs::write(&dest, out).unwrap_or_else(|e| panic!("{}: {e}", dest.display()));
}
