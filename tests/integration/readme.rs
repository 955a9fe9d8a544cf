//! The README's HTTP examples, run as written, top to bottom, against a `jobstore serve`
//! on each backend: every `sh` block of the "HTTP API" section up to "Service endpoints",
//! and of the "Auth" section, in order, in one shell per section. Every `curl` line states the status it answers in a trailing comment
//! (`# 201`, `# 200 or 204`); the test checks each one, so that the README cannot drift from
//! the service.
//!
//! What the test changes in the text before running it: the address `127.0.0.1:8090` becomes
//! the test server's, and a `jobstore serve ...` line (the Auth section's) starts the test's
//! own binary with the same flags on a free port, stopped at the end.

use crate::common;

use std::process::Command;

use common::{Backend, Serve, TestStore};

const README: &str = include_str!("../../README.md");

/// The `sh` blocks of one `## `/`### ` section, in order, up to the heading `until` (or the
/// section's end).
fn blocks(section: &str, until: Option<&str>) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_section = false;
    let mut current: Option<String> = None;
    // Inside a fenced block that is not collected (another language, or another section):
    // its lines may start with `#` and are no headings.
    let mut other_fence = false;
    for line in README.lines() {
        if other_fence {
            other_fence = line != "```";
            continue;
        }
        if let Some(block) = &mut current {
            if line == "```" {
                out.push(std::mem::take(block));
                current = None;
            } else {
                block.push_str(line);
                block.push('\n');
            }
            continue;
        }
        if line.starts_with("```") {
            if in_section && line == "```sh" {
                current = Some(String::new());
            } else {
                other_fence = true;
            }
            continue;
        }
        if line.starts_with('#') && line.contains(' ') {
            let title = line.trim_start_matches('#').trim();
            let level = line.len() - line.trim_start_matches('#').len();
            if title == section {
                in_section = true;
                continue;
            }
            if Some(title) == until {
                in_section = false;
            }
            // A heading of the same or a higher level ends the section.
            if in_section && level <= section_level(section) {
                in_section = false;
            }
        }
    }
    assert!(
        !out.is_empty(),
        "README.md has no sh block under '{section}'"
    );
    out
}

fn section_level(section: &str) -> usize {
    README
        .lines()
        .find(|l| l.trim_start_matches('#').trim() == section && l.starts_with('#'))
        .map(|l| l.len() - l.trim_start_matches('#').len())
        .unwrap_or_else(|| panic!("README.md has no section '{section}'"))
}

/// One shell script of the blocks: continuation lines joined, each `curl` line turned into a
/// check of the status its comment states.
fn script(blocks: &[String], base: &str) -> (String, usize) {
    let mut joined = Vec::new();
    for block in blocks {
        let mut pending = String::new();
        for line in block.lines() {
            if let Some(head) = line.strip_suffix('\\') {
                pending.push_str(head);
                continue;
            }
            pending.push_str(line);
            joined.push(std::mem::take(&mut pending));
        }
    }
    let mut checks = 0;
    let mut out = String::from(CHECK_FN);
    for line in joined {
        let line = line
            .replace("127.0.0.1:8090", base)
            .replace("HOST:8090", base);
        let trimmed = line.trim_start();
        if trimmed.starts_with("curl ") {
            let (command, comment) = trimmed
                .split_once(" # ")
                .unwrap_or_else(|| panic!("README.md: a curl line states no status: {trimmed}"));
            let statuses: Vec<&str> = comment
                .split(|c: char| !c.is_ascii_digit())
                .filter(|w| w.len() == 3)
                .collect();
            assert!(
                !statuses.is_empty(),
                "README.md: the comment of `{command}` names no status: {comment}"
            );
            out.push_str(&format!("check '{}' {command}\n", statuses.join(" ")));
            checks += 1;
        } else if trimmed.starts_with("jobstore serve ") {
            out.push_str("start_serve ");
            out.push_str(trimmed.trim_start_matches("jobstore serve "));
            out.push('\n');
        } else {
            out.push_str(&line);
            out.push('\n');
        }
    }
    (out, checks)
}

/// `check 'S1 S2' curl ARGS...`: runs curl quietly and fails unless it answers one of the
/// statuses. `start_serve FLAGS`: the Auth section's `jobstore serve` (see `run`).
const CHECK_FN: &str = r#"set -euo pipefail
check() {
  local want=$1; shift; shift
  local got
  got=$(curl -s -o /dev/null -w '%{http_code}' "$@") || { echo "curl $* failed" >&2; exit 1; }
  for w in $want; do [ "$got" = "$w" ] && { echo "ok $got: curl $*"; return 0; }; done
  echo "not ok: curl $* answered $got, the README says $want" >&2
  exit 1
}
"#;

fn run(script: &str, envs: &[(&str, &str)]) -> String {
    let out = Command::new("bash")
        .arg("-c")
        .arg(script)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .envs(envs.iter().copied())
        .output()
        .expect("bash runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "the README's examples failed:\n{stdout}\n{}\nscript:\n{script}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

async fn http_api_examples(backend: Backend) {
    let ts = TestStore::new(backend).await;
    let serve = Serve::start(&ts.url, &[]).await;
    let base = serve.base.trim_start_matches("http://").to_owned();
    let (script, checks) = script(&blocks("HTTP API", Some("Service endpoints")), &base);
    assert!(
        checks >= 20,
        "only {checks} checked curl lines in the HTTP API section"
    );
    let out = run(&script, &[]);
    assert_eq!(
        out.lines().filter(|l| l.starts_with("ok ")).count(),
        checks,
        "{out}"
    );
    drop(serve);
}

per_backend!(
    #[tokio::test]
    http_api_examples =>
        readme_http_examples_run_as_written_postgres,
        readme_http_examples_run_as_written_sqlite
);

/// The Auth section: what precedes its `jobstore serve --tokens-file tokens ...` runs in a
/// temporary folder (it writes `tokens` there), the test starts serve with the same flags
/// on a free port, and every curl line after it is checked, in that folder.
#[tokio::test]
async fn readme_auth_example_runs_as_written() {
    let ts = TestStore::new(Backend::Sqlite).await;
    let dir = tempfile::TempDir::new().unwrap();
    let blocks = blocks("Auth", None);
    // Everything before `jobstore serve` (writing the tokens file) runs first, in `dir`.
    let all: String = blocks.concat();
    let (before, after) = all
        .split_once("jobstore serve ")
        .expect("the Auth section starts jobstore serve");
    let (serve_line, rest) = after.split_once('\n').unwrap_or((after, ""));
    let prelude = format!("set -euo pipefail\ncd '{}'\n{before}", dir.path().display());
    run(&prelude, &[]);
    let mut flags: Vec<String> = serve_line.split_whitespace().map(str::to_owned).collect();
    // The test's own address: drop the snippet's --listen and its value.
    if let Some(i) = flags.iter().position(|f| f == "--listen") {
        flags.drain(i..=i + 1);
    }
    for f in flags.iter_mut() {
        if f == "tokens" {
            *f = dir.path().join("tokens").display().to_string();
        }
    }
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let serve = Serve::start(&ts.url, &flags).await;
    let base = serve.base.trim_start_matches("http://").to_owned();
    let (checked, checks) = script(&[rest.to_owned()], &base);
    assert!(
        checks >= 3,
        "only {checks} checked curl lines in the Auth section"
    );
    let out = run(&format!("cd '{}'\n{checked}", dir.path().display()), &[]);
    assert_eq!(
        out.lines().filter(|l| l.starts_with("ok ")).count(),
        checks,
        "{out}"
    );
    drop(serve);
}
