//! What the clients send: Flink's real JobResultStore files, and the cheap generator that
//! picks among them.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde_json::Value;

/// One of Flink's files, with its job id to replace.
pub struct Template {
    /// The envelope as Flink writes it.
    pub body: String,
    /// Its job id, replaced by a fresh one per create.
    id: String,
    /// The `result` object.
    pub result: Value,
}

impl Template {
    pub fn body_for(&self, id: &str) -> String {
        self.body.replace(&self.id, id)
    }

    pub fn result_for(&self, id: &str) -> Value {
        let mut r = self.result.clone();
        if let Value::Object(m) = &mut r {
            for field in ["id", "application-id"] {
                if m.contains_key(field) {
                    m.insert(field.into(), Value::String(id.to_owned()));
                }
            }
        }
        r
    }
}

/// Flink's small files and the one with the 36 KB failure-cause.
pub struct Payloads {
    pub small: Vec<Template>,
    pub large: Template,
}

impl Payloads {
    pub fn load(dir: Option<&Path>) -> anyhow::Result<Payloads> {
        let candidates: Vec<PathBuf> = match dir {
            Some(d) => vec![d.to_path_buf()],
            None => {
                let here = checkout();
                vec![
                    here.join("tests/data/flink-2.3.0/job-result-store"),
                    here.join("../shared/flink-reference/job-result-store"),
                ]
            }
        };
        let dir = candidates
            .iter()
            .find(|d| d.is_dir())
            .with_context(|| format!("no Flink job-result-store files in {candidates:?}"))?;
        let mut templates = Vec::new();
        let mut names: Vec<_> = std::fs::read_dir(dir)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .collect();
        names.sort();
        for path in names {
            let body = std::fs::read_to_string(&path)?;
            let v: Value = serde_json::from_str(&body)
                .with_context(|| format!("parsing {}", path.display()))?;
            let result = v.get("result").cloned().context("no `result`")?;
            let id = result
                .get("id")
                .and_then(Value::as_str)
                .context("no `result.id`")?
                .to_owned();
            templates.push(Template { body, id, result });
        }
        templates.sort_by_key(|t| t.body.len());
        let large = templates.pop().context("no Flink files")?;
        if large.body.len() < 10_000 || templates.is_empty() {
            bail!(
                "expected small files and one with a large failure-cause in {}",
                dir.display()
            );
        }
        Ok(Payloads {
            small: templates,
            large,
        })
    }

    /// The large file `large_percent` of the time, else one of the small ones.
    pub fn pick(&self, rng: &mut Rng, large_percent: f64) -> &Template {
        if (rng.next_u64() % 10_000) as f64 <= large_percent * 100.0 - 1.0 {
            &self.large
        } else {
            &self.small[(rng.next_u64() % self.small.len() as u64) as usize]
        }
    }
}

/// The checkout the bench crate sits in (bench/..): test data and Flink scripts.
pub fn checkout() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// xorshift64*: a cheap per-worker generator.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A random seed (the standard library's per-process random keys, mixed with a count).
    pub fn seed() -> u64 {
        use std::hash::{BuildHasher, Hasher};
        use std::sync::atomic::{AtomicU64, Ordering};
        static COUNT: AtomicU64 = AtomicU64::new(0);
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(COUNT.fetch_add(1, Ordering::Relaxed));
        h.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flinks_files_with_the_large_one_at_its_share() {
        let p = Payloads::load(None).expect("tests/data");
        assert!(p.large.body.len() > 30_000);
        let mut rng = Rng::new(7);
        let n = 100_000;
        let large = (0..n)
            .filter(|_| std::ptr::eq(p.pick(&mut rng, 5.0), &p.large))
            .count();
        assert!((4_500..5_500).contains(&large), "{large} of {n}");
        let id = "0123456789abcdef0123456789abcdef";
        let body: serde_json::Value = serde_json::from_str(&p.small[0].body_for(id)).unwrap();
        assert_eq!(body["result"]["id"], id);
        assert_eq!(p.small[0].result_for(id)["id"], id);
    }
}
