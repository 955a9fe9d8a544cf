//! The failure-causes jobstore writes itself, shaped like Flink's so that Flink's CLI prints
//! them, and how a disposal's failure-cause says the savepoint was gone already.

use std::time::Duration;

use serde_json::{Value, json};

use crate::store::{Operation, OperationKind};

/// A failure-cause of jobstore's own, shaped like Flink's (`class`, `stack-trace`,
/// `serialized-throwable`): Flink's REST client (`flink savepoint`, `flink stop`) decodes the
/// serialized throwable and prints jobstore's class and message.
pub fn failure_cause(class: &str, message: &str) -> Value {
    let class = format!("jobstore.{class}");
    let stack_trace = format!("{class}: {message}");
    let serialized = super::throwable::serialized_throwable(&class, message, &stack_trace);
    json!({
        "class": class,
        "stack-trace": stack_trace,
        "serialized-throwable": serialized,
    })
}

/// What an operation of this kind is called in jobstore's own failure-causes, and ` for
/// job J` unless it belongs to no job (a disposal).
fn operation_words(op: &Operation) -> (&'static str, String) {
    let what = match op.kind {
        OperationKind::Checkpoint => "checkpoint",
        OperationKind::Disposal => "savepoint disposal",
        _ => "savepoint",
    };
    let of_job = op
        .job_id
        .map(|job| format!(" for job {job}"))
        .unwrap_or_default();
    (what, of_job)
}

/// The failure-cause of an operation Flink no longer knows.
pub fn lost_cause(op: &Operation, flink_message: &str) -> Value {
    let (what, of_job) = operation_words(op);
    let request = op.request_id;
    failure_cause(
        "FlinkOperationLostException",
        &format!(
            "Flink lost the {what} operation with triggerId={request}{of_job}: it answered 404 \
             ({flink_message}). Flink keeps operation results in JobManager memory only (for \
             rest.async.store-duration) and forgets them on JobManager failover; whether the \
             {what} was made is unknown."
        ),
    )
}

/// The failure-cause of an operation Flink refused.
pub fn rejected_cause(op: &Operation, code: u16, flink_message: &str) -> Value {
    let (what, of_job) = operation_words(op);
    failure_cause(
        "FlinkRequestRejectedException",
        &format!("Flink refused the {what} request{of_job} with {code}: {flink_message}"),
    )
}

/// The failure-cause of an operation that did not complete in time.
pub fn timeout_cause(timeout: Duration, last_error: Option<&str>) -> Value {
    let mut message = format!(
        "The operation did not complete within the operation timeout of {}",
        humantime::format_duration(timeout)
    );
    if let Some(e) = last_error {
        message.push_str(&format!("; Flink was unreachable: {e}"));
    }
    message.push('.');
    failure_cause("SavepointTimeoutException", &message)
}

/// Whether a disposal's failure-cause says there was nothing at the path (its files gone
/// already): Flink 2.3 fails it with a `FlinkException` whose cause is
/// `java.io.FileNotFoundException: Cannot find checkpoint or savepoint file/directory ...`
/// (tests/data/flink-2.3.0/lifecycle). An existing folder without `_metadata` fails with a
/// FileNotFoundException too, but another message, and its folder stays: not gone.
pub fn savepoint_is_gone(cause: &Value) -> bool {
    let text = cause
        .get("stack-trace")
        .and_then(Value::as_str)
        .unwrap_or_default();
    text.contains(
        "java.io.FileNotFoundException: Cannot find checkpoint or savepoint file/directory",
    )
}
