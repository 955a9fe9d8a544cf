//! serve's flushes of result writes over a cycle cell, from its `/metrics` (the group
//! commit's histograms): how many transactions, their rows, and the mean of a flush's two
//! phases (gathering its batch, writing it). Read before and after the cell, so the figures
//! cover its warm-up too.

/// The group commit's totals at one scrape.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Flushes {
    /// Committed transactions of result writes.
    pub transactions: f64,
    /// Writes in them.
    pub rows: f64,
    /// Flushes, and their seconds gathering.
    pub gathered: f64,
    pub gathering: f64,
    /// Flushes, and their seconds writing.
    pub written: f64,
    pub writing: f64,
}

const SAMPLES: [&str; 6] = [
    "jobstore_group_commit_rows_count",
    "jobstore_group_commit_rows_sum",
    "jobstore_group_commit_gather_seconds_count",
    "jobstore_group_commit_gather_seconds_sum",
    "jobstore_group_commit_write_seconds_count",
    "jobstore_group_commit_write_seconds_sum",
];

impl Flushes {
    /// From the text of `/metrics`; `None` when a sample is missing (an older serve).
    pub fn parse(text: &str) -> Option<Flushes> {
        let value = |name: &str| {
            text.lines().find_map(|l| {
                l.strip_prefix(name)?
                    .strip_prefix(' ')?
                    .trim()
                    .parse::<f64>()
                    .ok()
            })
        };
        let [transactions, rows, gathered, gathering, written, writing] =
            SAMPLES.map(value).map(|v| v.unwrap_or(f64::NAN));
        let f = Flushes {
            transactions,
            rows,
            gathered,
            gathering,
            written,
            writing,
        };
        [transactions, rows, gathered, gathering, written, writing]
            .iter()
            .all(|v| v.is_finite())
            .then_some(f)
    }

    /// serve's `/metrics` at `base`; `None` when it cannot be read.
    pub async fn scrape(client: &reqwest::Client, base: &str) -> Option<Flushes> {
        let answer = client.get(format!("{base}/metrics")).send().await.ok()?;
        Flushes::parse(&answer.text().await.ok()?)
    }

    /// What happened between `before` and `self`.
    pub fn since(&self, before: &Flushes) -> Flushes {
        Flushes {
            transactions: self.transactions - before.transactions,
            rows: self.rows - before.rows,
            gathered: self.gathered - before.gathered,
            gathering: self.gathering - before.gathering,
            written: self.written - before.written,
            writing: self.writing - before.writing,
        }
    }

    /// One line: transactions per second over `secs`, rows each, each phase's mean.
    pub fn line(&self, secs: f64) -> String {
        let ms = |s: f64, n: f64| if n > 0.0 { s / n * 1e3 } else { f64::NAN };
        format!(
            "{:.0} transactions/s, {:.1} rows each; a flush gathered {:.3} ms and wrote {:.3} ms (means)",
            self.transactions / secs,
            self.rows / self.transactions,
            ms(self.gathering, self.gathered),
            ms(self.writing, self.written),
        )
    }
}

/// Reads the flushes before a cell and prints what the cell's flushes did after it.
pub struct FlushWatch {
    client: reqwest::Client,
    base: String,
    before: Option<Flushes>,
    started: std::time::Instant,
}

impl FlushWatch {
    /// Reads serve's flushes at `base` when `cycles` (a cycle cell through serve is about to
    /// run); `None` otherwise.
    pub async fn start(cycles: bool, base: &str) -> Option<FlushWatch> {
        if !cycles {
            return None;
        }
        let client = reqwest::Client::new();
        let before = Flushes::scrape(&client, base).await;
        Some(FlushWatch {
            client,
            base: base.to_owned(),
            before,
            started: std::time::Instant::now(),
        })
    }

    /// The cell's line (`None` when nothing was watched or serve's metrics could not be
    /// read).
    pub async fn finish(watch: Option<FlushWatch>) -> Option<String> {
        let watch = watch?;
        let secs = watch.started.elapsed().as_secs_f64();
        let after = Flushes::scrape(&watch.client, &watch.base).await?;
        Some(after.since(&watch.before?).line(secs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const METRICS: &str = "# HELP jobstore_group_commit_rows x\n\
        jobstore_group_commit_rows_bucket{le=\"1\"} 3\n\
        jobstore_group_commit_rows_sum 40\n\
        jobstore_group_commit_rows_count 4\n\
        jobstore_group_commit_gather_seconds_sum 0.002\n\
        jobstore_group_commit_gather_seconds_count 4\n\
        jobstore_group_commit_write_seconds_sum 0.008\n\
        jobstore_group_commit_write_seconds_count 4\n";

    #[test]
    fn a_cells_flushes_are_the_difference_of_two_scrapes() {
        let after = Flushes::parse(METRICS).unwrap();
        assert_eq!(after.rows, 40.0);
        let before = Flushes {
            transactions: 2.0,
            rows: 10.0,
            gathered: 2.0,
            gathering: 0.001,
            written: 2.0,
            writing: 0.002,
        };
        assert_eq!(
            after.since(&before).line(1.0),
            "2 transactions/s, 15.0 rows each; a flush gathered 0.500 ms and wrote 3.000 ms (means)"
        );
        assert_eq!(Flushes::parse("jobstore_group_commit_rows_sum 1\n"), None);
    }
}
