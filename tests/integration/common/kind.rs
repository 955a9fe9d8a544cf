//! The two result stores as the HTTP contract names them, and the results the tests send.

use serde_json::{Value, json};

/// The two result stores as the HTTP contract names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Job,
    Application,
}

pub const KINDS: [Kind; 2] = [Kind::Job, Kind::Application];

impl Kind {
    /// A job result for even `n`, an application result for odd `n`: the kinds of a load,
    /// alternately.
    pub fn alternating(n: usize) -> Kind {
        if n.is_multiple_of(2) {
            Kind::Job
        } else {
            Kind::Application
        }
    }

    /// The path segment after `/v1/clusters/{cluster}/`.
    pub fn segment(self) -> &'static str {
        match self {
            Kind::Job => "job-results",
            Kind::Application => "application-results",
        }
    }

    /// The field of `result` that holds the id.
    pub fn result_id_field(self) -> &'static str {
        match self {
            Kind::Job => "id",
            Kind::Application => "application-id",
        }
    }

    /// The field of an entry that holds the id.
    pub fn entry_id_field(self) -> &'static str {
        match self {
            Kind::Job => "job-id",
            Kind::Application => "application-id",
        }
    }

    /// The key of the list in a listing.
    pub fn list_field(self) -> &'static str {
        self.segment()
    }

    /// The table and its id column.
    pub fn table(self) -> (&'static str, &'static str) {
        match self {
            Kind::Job => ("job_results", "job_id"),
            Kind::Application => ("application_results", "application_id"),
        }
    }

    /// `/v1/clusters/{cluster}/{segment}`
    pub fn base(self, cluster: &str) -> String {
        format!("/v1/clusters/{cluster}/{}", self.segment())
    }

    /// `{server}/v1/clusters/{cluster}/{segment}`: the whole URL on one server.
    pub fn url(self, server: &str, cluster: &str) -> String {
        format!("{server}{}", self.base(cluster))
    }

    /// `/v1/clusters/{cluster}/{segment}/{id}`
    pub fn entry(self, cluster: &str, id: &str) -> String {
        format!("{}/{id}", self.base(cluster))
    }

    /// `/v1/clusters/{cluster}/{segment}/{id}/clean`
    pub fn clean(self, cluster: &str, id: &str) -> String {
        format!("{}/{id}/clean", self.base(cluster))
    }

    /// A valid `result` object for `id`, shaped like Flink 2.3 writes it.
    pub fn result(self, id: &str) -> Value {
        match self {
            Kind::Job => json!({
                "id": id,
                "name": "test-job",
                "application-status": "SUCCEEDED",
                "accumulator-results": {},
                "net-runtime": 1234,
                "application-id": id,
                "start-time": 1_796_013_188_511_i64,
                "end-time": 1_796_013_191_017_i64,
            }),
            Kind::Application => json!({
                "application-id": id,
                "application-state": "FINISHED",
                "application-name": "test-application",
                "start-time": 1_796_013_188_480_i64,
                "end-time": 1_796_013_191_017_i64,
            }),
        }
    }

    /// The envelope Flink writes: `{"result": ..., "version": 1}`.
    pub fn body(self, id: &str) -> Value {
        json!({"result": self.result(id), "version": 1})
    }

    /// A result of the load tests, with a few fields that differ per `n` (so that a mix-up
    /// shows) and, for jobs, an unknown field that must be kept as sent.
    pub fn load_result(self, id: &str, n: u64) -> Value {
        match self {
            Kind::Job => json!({
                "id": id,
                "name": format!("load-{n}"),
                "application-status": "SUCCEEDED",
                "accumulator-results": {"n": n.to_string()},
                "net-runtime": n,
                "start-time": 1_796_013_188_511_i64 + n as i64,
                "end-time": 1_796_013_191_017_i64 + n as i64,
                "unknown-field": {"kept": [n, "as sent", {"deep": true}]},
            }),
            Kind::Application => json!({
                "application-id": id,
                "application-state": "FINISHED",
                "application-name": format!("load-{n}"),
                "start-time": 1_796_013_188_480_i64 + n as i64,
                "end-time": 1_796_013_191_017_i64 + n as i64,
            }),
        }
    }

    /// The envelope of [`Kind::load_result`].
    pub fn load_body(self, id: &str, n: u64) -> Value {
        json!({"result": self.load_result(id, n), "version": 1})
    }
}
