//! What /proc says about a process: resident memory and CPU time.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::cells::{Samples, Summary};

/// VmRSS of a process in kB.
pub fn rss_kb(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// User + system CPU time of a process, all its threads (waited-for children not counted).
pub fn cpu_time(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command's closing parenthesis; utime and stime are 14 and 15.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    // Clock ticks: 100 per second on Linux.
    Some(Duration::from_millis((utime + stime) * 10))
}

/// CPU time of the PostgreSQL backends connected to one database (their process title
/// names it); backends that exit meanwhile are not counted.
pub fn backends_cpu_time(database: &str) -> Duration {
    let mut total = Duration::ZERO;
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return total;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let title = String::from_utf8_lossy(&cmdline);
        if title.starts_with("postgres: ")
            && title.split_whitespace().any(|w| w == database)
            && let Some(t) = cpu_time(pid)
        {
            total += t;
        }
    }
    total
}

/// Samples a process's VmRSS every 50 ms until finished; keeps the max.
pub struct RssSampler {
    max: Arc<AtomicU64>,
    /// The max since it was last reset (`phase().store(0)`).
    phase: Arc<AtomicU64>,
    samples: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl RssSampler {
    pub fn start(pid: u32) -> RssSampler {
        let max = Arc::new(AtomicU64::new(0));
        let phase = Arc::new(AtomicU64::new(0));
        let samples = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (m, ph, s, st) = (max.clone(), phase.clone(), samples.clone(), stop.clone());
        let task = tokio::spawn(async move {
            // Bounded: at most 2 hours of samples.
            for _ in 0..(2 * 3600 * 20) {
                if st.load(Ordering::Relaxed) {
                    break;
                }
                match rss_kb(pid) {
                    Some(kb) => {
                        m.fetch_max(kb, Ordering::Relaxed);
                        ph.fetch_max(kb, Ordering::Relaxed);
                        s.fetch_add(1, Ordering::Relaxed);
                    }
                    None => break,
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
        RssSampler {
            max,
            phase,
            samples,
            stop,
            task,
        }
    }

    /// The max since the last reset; reset it by storing 0.
    pub fn phase(&self) -> Arc<AtomicU64> {
        self.phase.clone()
    }

    /// Stops sampling; answers the max and the number of samples.
    pub async fn finish(self) -> (u64, u64) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.task.await;
        (
            self.max.load(Ordering::Relaxed),
            self.samples.load(Ordering::Relaxed),
        )
    }
}

/// The disk's commit latency: 50 writes of 8 KB to a file in `dir`, each followed by
/// fdatasync (what a durable commit waits for), timed, then `gap` without one. Some disks
/// sync within 0.1 ms only when the syncs come back to back, and take several times that
/// after a gap of a quarter of a millisecond (BENCHMARKS.md, `scripts/bench/fsync-gaps.py`):
/// a flush at few clients meets the gap (its answers out, the next requests in).
pub async fn fdatasync_latency(dir: &Path, gap: Duration) -> anyhow::Result<Summary> {
    let path = dir.join("fdatasync-probe");
    tokio::task::spawn_blocking(move || {
        let mut file = std::fs::File::create(&path)?;
        let block = [0u8; 8192];
        let mut samples = Samples::default();
        for _ in 0..50 {
            file.write_all(&block)?;
            let t = Instant::now();
            file.sync_data()?;
            samples.push(t.elapsed());
            if !gap.is_zero() {
                std::thread::sleep(gap);
            }
        }
        std::fs::remove_file(&path)?;
        Ok(samples.sorted())
    })
    .await?
}
