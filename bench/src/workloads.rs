//! The work the clients do (`cycle`, `status`, `list`), against serve (or any server that
//! answers the same requests) or the store in-process, and the data set up for it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::bail;
use serde_json::{Value, json};

use crate::cli::{ClientKind, Workload};
use crate::client::Client;
use crate::direct::{Cluster, Id, Store};
use crate::payloads::{Payloads, Rng, Template};

/// The cluster the cycles create in.
pub const BENCH_CLUSTER: &str = "bench";
/// The cluster the `list` workload lists.
pub const LIST_CLUSTER: &str = "bench-list";
/// serve's default `--cluster-id`: the un-prefixed Flink status route acts on it.
pub const DEFAULT_CLUSTER: &str = "default";

/// What every client of a cell does, one operation after another.
pub struct Work {
    pub workload: Workload,
    pub payloads: Arc<Payloads>,
    pub large_percent: f64,
    /// The (job, trigger) pairs the status polls pick from at random.
    pub operations: Arc<Vec<(Id, Id)>>,
    bench: Cluster,
    list: Cluster,
    default: Cluster,
}

impl Work {
    pub fn new(
        workload: Workload, payloads: Arc<Payloads>, large_percent: f64,
        operations: Arc<Vec<(Id, Id)>>,
    ) -> anyhow::Result<Arc<Work>> {
        Ok(Arc::new(Work {
            workload,
            payloads,
            large_percent,
            operations,
            bench: BENCH_CLUSTER.parse()?,
            list: LIST_CLUSTER.parse()?,
            default: DEFAULT_CLUSTER.parse()?,
        }))
    }

    /// One operation; a cycle answers its create's and its clean's time.
    pub async fn once(
        &self, conn: &mut Conn, rng: &mut Rng,
    ) -> Result<Option<(Duration, Duration)>, String> {
        match self.workload {
            Workload::Cycle => {
                let id = Id::random();
                let t = self.payloads.pick(rng, self.large_percent);
                let t0 = Instant::now();
                conn.create(&self.bench, t, id).await?;
                let t1 = Instant::now();
                conn.clean(&self.bench, id).await?;
                Ok(Some((t1 - t0, t1.elapsed())))
            }
            Workload::Status => {
                if self.operations.is_empty() {
                    return Err("no operations to poll".into());
                }
                let (job, trigger) =
                    self.operations[(rng.next_u64() % self.operations.len() as u64) as usize];
                conn.status(&self.default, job, trigger).await.map(|_| None)
            }
            Workload::List => conn.list(&self.list).await.map(|_| None),
            Workload::None => Err("no workload".into()),
        }
    }
}

/// Where one side of a cell sends its work.
#[derive(Clone)]
pub enum Target {
    /// HTTP clients against a base URL (serve, a JobManager, the file-store driver).
    Http { base: String, client: ClientKind },
    /// The store in-process, the baseline.
    Direct(Store),
}

impl Target {
    pub fn connect(&self) -> anyhow::Result<Conn> {
        Ok(match self {
            Target::Http { base, client } => Conn::Http(Client::new(*client, base)?),
            Target::Direct(store) => Conn::Direct(store.clone()),
        })
    }
}

/// One client's way to its target.
pub enum Conn {
    Http(Client),
    Direct(Store),
}

impl Conn {
    async fn create(&mut self, cluster: &Cluster, t: &Template, id: Id) -> Result<(), String> {
        let id_text = id.to_string();
        match self {
            Conn::Http(c) => {
                let path = format!("/v1/clusters/{cluster}/job-results");
                let body = t.body_for(&id_text).into_bytes();
                c.expect("POST", &path, Some(body), 201).await.map(drop)
            }
            Conn::Direct(s) => {
                s.create_job_result(cluster, id, &t.result_for(&id_text))
                    .await
            }
        }
    }

    async fn clean(&mut self, cluster: &Cluster, id: Id) -> Result<(), String> {
        match self {
            Conn::Http(c) => {
                let path = format!("/v1/clusters/{cluster}/job-results/{id}/clean");
                c.expect("POST", &path, None, 200).await.map(drop)
            }
            Conn::Direct(s) => s.mark_job_result_clean(cluster, id).await,
        }
    }

    async fn status(&mut self, cluster: &Cluster, job: Id, trigger: Id) -> Result<(), String> {
        match self {
            Conn::Http(c) => {
                let path = format!("/jobs/{job}/savepoints/{trigger}");
                c.expect("GET", &path, None, 200).await.map(drop)
            }
            Conn::Direct(s) => s.has_operation(cluster, job, trigger).await,
        }
    }

    async fn list(&mut self, cluster: &Cluster) -> Result<usize, String> {
        match self {
            Conn::Http(c) => {
                let path = format!("/v1/clusters/{cluster}/job-results?state=dirty");
                c.expect("GET", &path, None, 200).await.map(|b| b.len())
            }
            Conn::Direct(s) => s.list_dirty_job_results(cluster).await,
        }
    }
}

/// How a savepoint operation set up for the status polls ends.
pub enum Outcome {
    Location(String),
    FailureCause(Value),
    InProgress,
}

/// The matrix's operations: 60% completed with a location, 20% with a failure-cause, 20%
/// left in progress; ten operations per job.
pub fn mixed_operations(n: usize, payloads: &Payloads) -> Vec<(Id, Id, Outcome)> {
    let cause = payloads.small[0]
        .result
        .get("failure-cause")
        .cloned()
        .unwrap_or_else(|| {
            json!({"class": "org.apache.flink.runtime.checkpoint.CheckpointException",
                   "stack-trace": "org.apache.flink.runtime.checkpoint.CheckpointException: Checkpoint Coordinator is suspending.\n\tat org.apache.flink.runtime.checkpoint.CheckpointCoordinator.stopCheckpointScheduler(CheckpointCoordinator.java:2056)",
                   "serialized-throwable": "rO0ABXNyADtvcmcuYXBhY2hlLmZsaW5r"})
        });
    let jobs: Vec<Id> = (0..(n / 10).max(1)).map(|_| Id::random()).collect();
    (0..n)
        .map(|i| {
            let job = jobs[i % jobs.len()];
            let trigger = Id::random();
            let outcome = match i % 5 {
                0..=2 => Outcome::Location(format!(
                    "file:/var/flink/savepoints/savepoint-{}-{}",
                    &job.to_string()[..6],
                    &trigger.to_string()[..12]
                )),
                3 => Outcome::FailureCause(cause.clone()),
                _ => Outcome::InProgress,
            };
            (job, trigger, outcome)
        })
        .collect()
}

/// Creates savepoint operations in serve's default cluster through the API (Flink's
/// trigger request, then jobstore's completion); answers their (job, trigger) pairs.
pub async fn create_operations(
    client: &reqwest::Client, base: &str, target_directory: &str, ops: &[(Id, Id, Outcome)],
) -> anyhow::Result<Vec<(Id, Id)>> {
    for (job, trigger, outcome) in ops {
        let res = client
            .post(format!("{base}/jobs/{job}/savepoints"))
            .json(&json!({"target-directory": target_directory, "triggerId": trigger.to_string()}))
            .send()
            .await?;
        if res.status() != reqwest::StatusCode::ACCEPTED {
            bail!("trigger answered {}: {}", res.status(), res.text().await?);
        }
        let body = match outcome {
            Outcome::Location(l) => json!({ "location": l }),
            Outcome::FailureCause(c) => json!({ "failure-cause": c }),
            Outcome::InProgress => continue,
        };
        let res = client
            .post(format!(
                "{base}/v1/clusters/{DEFAULT_CLUSTER}/jobs/{job}/savepoints/{trigger}/complete"
            ))
            .json(&body)
            .send()
            .await?;
        if res.status() != reqwest::StatusCode::OK {
            bail!("complete answered {}: {}", res.status(), res.text().await?);
        }
    }
    Ok(ops.iter().map(|(j, t, _)| (*j, *t)).collect())
}

/// The `list` workload's cluster: `n` dirty entries and `n` clean ones, each half with
/// the usual payload mix (one in 20 with the 36 KB failure-cause). Answers the size of its
/// `state=dirty` listing.
pub async fn setup_list_cluster(
    client: &reqwest::Client, base: &str, n: usize, payloads: &Payloads,
) -> anyhow::Result<usize> {
    // Even i dirty, odd i clean; pair i / 2 decides the payload.
    for i in 0..2 * n {
        let id = Id::random().to_string();
        let t = if (i / 2) % 20 == 7 {
            &payloads.large
        } else {
            &payloads.small[(i / 2) % payloads.small.len()]
        };
        let res = client
            .post(format!("{base}/v1/clusters/{LIST_CLUSTER}/job-results"))
            .header("content-type", "application/json")
            .body(t.body_for(&id))
            .send()
            .await?;
        if res.status() != reqwest::StatusCode::CREATED {
            bail!("create answered {}: {}", res.status(), res.text().await?);
        }
        if i % 2 == 1 {
            let res = client
                .post(format!(
                    "{base}/v1/clusters/{LIST_CLUSTER}/job-results/{id}/clean"
                ))
                .send()
                .await?;
            if res.status() != reqwest::StatusCode::OK {
                bail!("clean answered {}: {}", res.status(), res.text().await?);
            }
        }
    }
    let res = client
        .get(format!(
            "{base}/v1/clusters/{LIST_CLUSTER}/job-results?state=dirty"
        ))
        .send()
        .await?;
    Ok(res.bytes().await?.len())
}
