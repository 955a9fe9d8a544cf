//! Flink's wire types: the result-store envelope (`{"result": {...}, "version": 1}`) for
//! job results and application results, validated field by field while every field,
//! known or not, is kept exactly as it was sent.

use serde_json::{Map, Value};

use std::fmt;

use crate::ids::{ApplicationId, IdError, JobId};

/// Which of Flink's two result stores an entry belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ResultKind {
    /// Flink's `JobResultStore`, keyed by `result.id`.
    Job,
    /// Flink 2.3's `ApplicationResultStore`, keyed by `result.application-id`.
    Application,
}

/// The id of a result-store entry: a job id (job results) or an application id (application
/// results), so that the kind and the id always travel together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ResultId {
    Job(JobId),
    Application(ApplicationId),
}

impl ResultId {
    pub fn kind(self) -> ResultKind {
        match self {
            ResultId::Job(_) => ResultKind::Job,
            ResultId::Application(_) => ResultKind::Application,
        }
    }

    /// Parses an id of the given kind (32 hex characters, either case).
    pub fn parse(kind: ResultKind, s: &str) -> Result<Self, IdError> {
        Ok(match kind {
            ResultKind::Job => ResultId::Job(s.parse()?),
            ResultKind::Application => ResultId::Application(s.parse()?),
        })
    }
}

impl fmt::Display for ResultId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResultId::Job(id) => id.fmt(f),
            ResultId::Application(id) => id.fmt(f),
        }
    }
}

crate::ids::text_eq!(ResultId);

impl serde::Serialize for ResultId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// The OpenAPI schemas of Flink's result-store files, as [`parse_envelope`] accepts them: every
/// field below is checked, any other field is kept as sent.
#[allow(dead_code)] // read by the OpenAPI document only
pub mod schema {
    use serde::Deserialize;
    use serde_json::{Map, Value};
    use utoipa::ToSchema;

    use crate::ids::{ApplicationId, JobId};

    /// Flink's `SerializedThrowable` JSON; any object is accepted and kept as sent.
    #[derive(Deserialize, ToSchema, Default)]
    #[serde(rename_all = "kebab-case")]
    pub struct FailureCause {
        /// the exception class (Flink writes a string)
        class: Option<Value>,
        /// the stack trace (Flink writes a string)
        stack_trace: Option<Value>,
        /// the serialized exception, base64 (Flink writes a string)
        serialized_throwable: Option<Value>,
        #[serde(flatten)]
        other: Map<String, Value>,
    }

    /// Flink's `ApplicationStatus`.
    #[derive(Deserialize, ToSchema, Default)]
    #[serde(rename_all = "UPPERCASE")]
    pub enum ApplicationStatus {
        Succeeded,
        Failed,
        Canceled,
        #[default]
        Unknown,
    }

    /// Flink's JobResult JSON; unknown fields are kept.
    #[derive(Deserialize, ToSchema)]
    #[serde(rename_all = "kebab-case")]
    pub struct JobResult {
        id: JobId,
        #[serde(default)]
        name: String,
        #[serde(default)]
        #[schema(inline)]
        application_status: ApplicationStatus,
        #[serde(default)]
        accumulator_results: std::collections::BTreeMap<String, String>,
        #[serde(default)]
        #[schema(minimum = 0)]
        net_runtime: i64,
        #[serde(default)]
        failure_cause: FailureCause,
        #[schema(required = false)]
        application_id: ApplicationId,
        #[serde(flatten)]
        run: Run,
    }

    /// Flink 2.3's application result JSON; unknown fields are kept.
    #[derive(Deserialize, ToSchema)]
    #[serde(rename_all = "kebab-case")]
    pub struct ApplicationResult {
        application_id: ApplicationId,
        #[serde(default)]
        application_state: String,
        #[serde(default)]
        application_name: String,
        #[serde(flatten)]
        run: Run,
    }

    /// What both results end with: when the job or application ran, and any other field.
    #[derive(Deserialize, ToSchema)]
    #[serde(rename_all = "kebab-case")]
    pub struct Run {
        #[serde(default)]
        start_time: i64,
        #[serde(default)]
        end_time: i64,
        #[serde(flatten)]
        other: Map<String, Value>,
    }

    /// Flink's `JobResultStore` file: `{"result": {...}, "version": 1}`.
    #[derive(Deserialize, ToSchema)]
    pub struct JobResultFile {
        result: JobResult,
        /// the file version Flink writes
        #[serde(default)]
        #[schema(minimum = 1, maximum = 1)]
        version: u8,
    }

    /// Flink 2.3's `ApplicationResultStore` file.
    #[derive(Deserialize, ToSchema)]
    pub struct ApplicationResultFile {
        result: ApplicationResult,
        /// the file version Flink writes
        #[serde(default)]
        #[schema(minimum = 1, maximum = 1)]
        version: u8,
    }
}

/// Values Flink's `ApplicationStatus` (a JobResult's `application-status`) can take.
pub const APPLICATION_STATUSES: [&str; 4] = ["SUCCEEDED", "FAILED", "CANCELED", "UNKNOWN"];

impl ResultKind {
    /// "job" or "application", as in Flink's messages.
    pub fn noun(self) -> &'static str {
        match self {
            ResultKind::Job => "job",
            ResultKind::Application => "application",
        }
    }

    /// The field of the result JSON that holds the id.
    pub fn result_id_field(self) -> &'static str {
        match self {
            ResultKind::Job => "id",
            ResultKind::Application => "application-id",
        }
    }

    /// The field of an entry that holds the id.
    pub fn entry_id_field(self) -> &'static str {
        match self {
            ResultKind::Job => "job-id",
            ResultKind::Application => "application-id",
        }
    }

    /// The key of the list in a listing answer.
    pub fn list_field(self) -> &'static str {
        match self {
            ResultKind::Job => "job-results",
            ResultKind::Application => "application-results",
        }
    }

    /// "Job result store" / "Application result store".
    pub fn store_name(self) -> &'static str {
        match self {
            ResultKind::Job => "Job result store",
            ResultKind::Application => "Application result store",
        }
    }

    /// Flink's message for a duplicate create (`IllegalStateException`).
    pub fn conflict_message(self, id: ResultId) -> String {
        format!(
            "{} already contains an entry for {} {id}",
            self.store_name(),
            self.noun()
        )
    }

    /// Flink's message for marking an absent entry clean (`NoSuchElementException`).
    pub fn not_present_message(self, id: ResultId) -> String {
        format!(
            "Could not mark {} {id} as clean as it is not present in the {} result store.",
            self.noun(),
            self.noun()
        )
    }

    /// The message for an unknown entry on reads and deletes.
    pub fn not_found_message(self, id: ResultId) -> String {
        format!(
            "There is no entry for {} {id} in the {} result store.",
            self.noun(),
            self.noun()
        )
    }
}

/// Validates a submitted envelope and returns the entry's id and its `result` object.
///
/// Errors name the offending field; unknown fields are allowed and kept.
pub fn parse_envelope(kind: ResultKind, body: Value) -> Result<(ResultId, Value), String> {
    let Value::Object(mut envelope) = body else {
        return Err("the body must be a JSON object {\"result\": {...}, \"version\": 1}".into());
    };
    match envelope.get("version") {
        None => {}
        Some(v) if v.as_u64() == Some(1) => {}
        Some(v) => return Err(format!("field `version` must be 1, got {v}")),
    }
    let result = match envelope.remove("result") {
        Some(Value::Object(result)) => result,
        Some(_) => return Err("field `result` must be a JSON object".into()),
        None => return Err("field `result` is missing".into()),
    };
    let id = match kind {
        ResultKind::Job => ResultId::Job(validate_job_result(&result)?),
        ResultKind::Application => ResultId::Application(validate_application_result(&result)?),
    };
    let result = Value::Object(result);
    reject_nul(&result, "result")?;
    reject_long_numbers(&result, "result")?;
    Ok((id, result))
}

/// The most characters a number may have once written out without an exponent (as
/// PostgreSQL's jsonb prints it): every f64 fits (`5e-324` is 326 characters).
pub const MAX_WRITTEN_OUT_NUMBER: u64 = 400;

/// Refuses a number whose exponent would make it longer than [`MAX_WRITTEN_OUT_NUMBER`]
/// characters written out, naming where it is: numbers are kept exactly (serde_json's
/// `arbitrary_precision`), and PostgreSQL writes `1e100000` out in full, 100,000 digits
/// for 8 bytes sent. A number without an exponent is kept as sent whatever its length.
pub fn reject_long_numbers(value: &Value, path: &str) -> Result<(), String> {
    match value {
        Value::Number(n) if written_out_len(&n.to_string()) > MAX_WRITTEN_OUT_NUMBER => {
            Err(format!(
                "field `{path}` holds a number longer than {MAX_WRITTEN_OUT_NUMBER} digits written out, which cannot be kept exactly"
            ))
        }
        Value::Array(items) => items
            .iter()
            .enumerate()
            .try_for_each(|(i, v)| reject_long_numbers(v, &format!("{path}[{i}]"))),
        Value::Object(m) => m
            .iter()
            .try_for_each(|(k, v)| reject_long_numbers(v, &format!("{path}.{k}"))),
        _ => Ok(()),
    }
}

/// About how many characters a JSON number's text has written out without an exponent.
fn written_out_len(text: &str) -> u64 {
    let Some((mantissa, exponent)) = text.split_once(['e', 'E']) else {
        return text.len() as u64;
    };
    let Ok(exponent) = exponent.parse::<i64>() else {
        return u64::MAX;
    };
    let mantissa = mantissa.trim_start_matches('-');
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let int_digits = int.len() as i64 + exponent;
    let frac_digits = frac.len() as i64 - exponent;
    let len = int_digits
        .max(1)
        .saturating_add(frac_digits.max(0))
        .saturating_add(2);
    u64::try_from(len).unwrap_or(u64::MAX)
}

/// Refuses a NUL character (`\u0000`) anywhere in a JSON value, keys included, naming
/// where it is: PostgreSQL can store it neither in `text` nor in `jsonb`, and both backends
/// must accept exactly the same input.
pub fn reject_nul(value: &Value, path: &str) -> Result<(), String> {
    let found = |at: &str| {
        Err(format!(
            "field `{at}` contains the NUL character \\u0000, which cannot be stored"
        ))
    };
    match value {
        Value::String(s) if s.contains('\0') => found(path),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .try_for_each(|(i, v)| reject_nul(v, &format!("{path}[{i}]"))),
        Value::Object(m) => m.iter().try_for_each(|(k, v)| {
            let at = format!("{path}.{k}");
            if k.contains('\0') {
                return found(&at);
            }
            reject_nul(v, &at)
        }),
        _ => Ok(()),
    }
}

fn field_path(field: &str) -> String {
    format!("field `result.{field}`")
}

fn required_id<I: std::str::FromStr>(
    result: &Map<String, Value>, field: &str,
) -> Result<I, String> {
    match result.get(field) {
        None => Err(format!("{} is missing", field_path(field))),
        Some(v) => parse_id(field, v),
    }
}

fn parse_id<I: std::str::FromStr>(field: &str, v: &Value) -> Result<I, String> {
    v.as_str()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("{} must be 32 hexadecimal characters", field_path(field)))
}

fn optional(
    result: &Map<String, Value>, field: &str, ok: impl Fn(&Value) -> bool, expected: &str,
) -> Result<(), String> {
    match result.get(field) {
        Some(v) if !ok(v) => Err(format!("{} must be {expected}", field_path(field))),
        _ => Ok(()),
    }
}

/// An integer Flink's `long` holds (what Flink writes, and what the SQL views cast to
/// `bigint`), at least 0.
fn is_non_negative_integer(v: &Value) -> bool {
    v.as_i64().is_some_and(|n| n >= 0)
}

/// An integer Flink's `long` holds.
fn is_integer(v: &Value) -> bool {
    v.is_i64()
}

fn validate_job_result(result: &Map<String, Value>) -> Result<JobId, String> {
    let id = required_id(result, "id")?;
    optional(result, "name", Value::is_string, "a string")?;
    optional(
        result,
        "application-status",
        |v| {
            v.as_str()
                .is_some_and(|s| APPLICATION_STATUSES.contains(&s))
        },
        "one of SUCCEEDED, FAILED, CANCELED, UNKNOWN",
    )?;
    optional(
        result,
        "net-runtime",
        is_non_negative_integer,
        "a non-negative integer of at most 9223372036854775807 (milliseconds)",
    )?;
    optional(
        result,
        "accumulator-results",
        |v| {
            v.as_object()
                .is_some_and(|m| m.values().all(Value::is_string))
        },
        "an object whose values are strings",
    )?;
    optional(result, "failure-cause", Value::is_object, "an object")?;
    if let Some(v) = result.get("application-id") {
        parse_id::<ApplicationId>("application-id", v)?;
    }
    times(result)?;
    Ok(id)
}

/// `start-time` and `end-time`, when present: epoch milliseconds in a Java long.
fn times(result: &Map<String, Value>) -> Result<(), String> {
    for field in ["start-time", "end-time"] {
        optional(
            result,
            field,
            is_integer,
            "an integer of at most 64 bits (epoch milliseconds)",
        )?;
    }
    Ok(())
}

fn validate_application_result(result: &Map<String, Value>) -> Result<ApplicationId, String> {
    let id = required_id(result, "application-id")?;
    optional(result, "application-state", Value::is_string, "a string")?;
    optional(result, "application-name", Value::is_string, "a string")?;
    times(result)?;
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job(result: Value) -> Result<(ResultId, Value), String> {
        parse_envelope(ResultKind::Job, json!({"result": result, "version": 1}))
    }

    #[test]
    fn accepts_flink_files_and_keeps_unknown_fields() {
        let r = json!({"id": "38DCC0B26CE09271CEFD5020D41B4B88", "name": "n",
            "application-status": "FAILED", "accumulator-results": {"a": "b64"},
            "net-runtime": 0, "failure-cause": {"class": "x"}, "future-field": [1, 2]});
        let (id, kept) = job(r.clone()).unwrap();
        assert_eq!(id.to_string(), "38dcc0b26ce09271cefd5020d41b4b88");
        assert_eq!(kept, r);
        assert!(parse_envelope(ResultKind::Job, json!({"result": {"id": "0".repeat(32)}})).is_ok());
    }

    #[test]
    fn numbers_too_long_written_out_are_refused() {
        assert_eq!(written_out_len("12345"), 5);
        assert!(written_out_len("1e3") < 10);
        assert!(written_out_len("5e-324") <= MAX_WRITTEN_OUT_NUMBER);
        assert!(written_out_len("-1.7976931348623157e308") <= MAX_WRITTEN_OUT_NUMBER);
        assert!(written_out_len("1e401") > MAX_WRITTEN_OUT_NUMBER);
        assert!(written_out_len("1e-401") > MAX_WRITTEN_OUT_NUMBER);
        assert_eq!(written_out_len("1e99999999999999999999"), u64::MAX);
        let id = "0".repeat(32);
        let body: Value = serde_json::from_str(&format!(
            r#"{{"result": {{"id": "{id}", "x": [1, {{"y": 1e100000}}]}}}}"#
        ))
        .unwrap();
        let err = parse_envelope(ResultKind::Job, body).unwrap_err();
        assert!(err.contains("result.x[1].y"), "{err}");
    }

    #[test]
    fn names_the_bad_field() {
        let id = "0".repeat(32);
        let cases = [
            (json!({"result": {"id": id}, "version": 2}), "version"),
            (json!({"result": {"id": id}, "version": "1"}), "version"),
            (json!({"version": 1}), "result"),
            (json!({"result": [], "version": 1}), "result"),
            (json!([]), "JSON object"),
            (json!({"result": {}}), "result.id"),
            (json!({"result": {"id": "xyz"}}), "result.id"),
            (json!({"result": {"id": 12}}), "result.id"),
            (
                json!({"result": {"id": id, "application-status": "DONE"}}),
                "application-status",
            ),
            (
                json!({"result": {"id": id, "net-runtime": -1}}),
                "net-runtime",
            ),
            (
                json!({"result": {"id": id, "net-runtime": 1.5}}),
                "net-runtime",
            ),
            (
                json!({"result": {"id": id, "net-runtime": i64::MAX as u64 + 1}}),
                "net-runtime",
            ),
            (
                json!({"result": {"id": id, "net-runtime": u64::MAX}}),
                "net-runtime",
            ),
            (
                json!({"result": {"id": id, "start-time": u64::MAX}}),
                "start-time",
            ),
            (
                json!({"result": {"id": id, "accumulator-results": {"a": 1}}}),
                "accumulator-results",
            ),
            (
                json!({"result": {"id": id, "failure-cause": "boom"}}),
                "failure-cause",
            ),
        ];
        for (body, field) in cases {
            let err = parse_envelope(ResultKind::Job, body.clone()).unwrap_err();
            assert!(err.contains(field), "{body}: {err}");
        }
        let err =
            parse_envelope(ResultKind::Application, json!({"result": {"id": id}})).unwrap_err();
        assert!(err.contains("application-id"), "{err}");
    }
}
