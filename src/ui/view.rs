//! What the console's pages show, as text: times in UTC with their age, durations, the first
//! line of a failure-cause, and the savepoint-duration chart (SVG drawn here).

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::store::{Operation, OperationJob, OperationKind, OperationStatus, Retention, Schedule};

/// `2026-12-02 12:30:05 UTC`.
pub fn utc(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

/// RFC 3339, for `<time datetime>`.
pub fn iso(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// A span for people: `42 s`, `12 min`, `3 h`, `5 d`.
pub fn span(d: chrono::Duration) -> String {
    let s = d.num_seconds().max(0);
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min", s / 60),
        3600..172800 => format!("{} h", s / 3600),
        _ => format!("{} d", s / 86400),
    }
}

/// A duration with sub-second precision for short ones: `850 ms`, `1.2 s`, `3 min`.
pub fn duration(d: chrono::Duration) -> String {
    let ms = d.num_milliseconds().max(0);
    if ms < 1000 {
        format!("{ms} ms")
    } else if ms < 60_000 {
        format!("{:.1} s", ms as f64 / 1000.0)
    } else {
        span(d)
    }
}

/// A time and its age: what every time on a page shows.
#[derive(Debug, Clone)]
pub struct When {
    pub iso: String,
    pub utc: String,
    pub age: String,
}

impl When {
    pub fn at(t: DateTime<Utc>, now: DateTime<Utc>) -> When {
        let age = if t > now {
            format!("in {}", span(t - now))
        } else {
            format!("{} ago", span(now - t))
        };
        When {
            iso: iso(t),
            utc: utc(t),
            age,
        }
    }

    /// `<time>` with the UTC time, and the age beside it.
    pub fn html(&self) -> String {
        format!(
            "<time datetime=\"{}\">{}</time> <span class=\"age\" data-field=\"age\">({})</span>",
            esc(&self.iso),
            esc(&self.utc),
            esc(&self.age)
        )
    }

    pub fn opt(t: Option<DateTime<Utc>>, now: DateTime<Utc>) -> Option<When> {
        t.map(|t| When::at(t, now))
    }
}

/// The first line of a failure-cause (Flink's `{"class", "stack-trace", ...}`), at most 300
/// characters.
pub fn cause_line(cause: &Value) -> String {
    let text = cause
        .get("stack-trace")
        .and_then(Value::as_str)
        .and_then(|s| s.lines().next())
        .filter(|l| !l.trim().is_empty())
        .map(str::to_owned)
        .or_else(|| {
            let class = cause.get("class").and_then(Value::as_str)?;
            Some(match cause.get("message").and_then(Value::as_str) {
                Some(m) => format!("{class}: {m}"),
                None => class.to_owned(),
            })
        })
        .unwrap_or_else(|| "failure-cause without a class".to_owned());
    clip(&text, 300)
}

/// The whole stack trace of a failure-cause (at most 64 KiB), else its JSON without the
/// serialized throwable.
pub fn cause_full(cause: &Value) -> String {
    let text = match cause.get("stack-trace").and_then(Value::as_str) {
        Some(s) => s.to_owned(),
        None => {
            let mut shown = cause.clone();
            if let Some(o) = shown.as_object_mut() {
                o.remove("serialized-throwable");
            }
            serde_json::to_string_pretty(&shown).unwrap_or_default()
        }
    };
    clip(&text, 65536)
}

pub fn clip(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}

/// An operation as a row of a table.
#[derive(Debug, Clone)]
pub struct OpRow {
    pub job_id: String,
    pub job_name: String,
    pub request_id: String,
    pub kind: &'static str,
    /// `in progress`, `completed`, `failed`.
    pub status: &'static str,
    pub trigger: &'static str,
    pub created: When,
    pub completed: Option<When>,
    pub duration: String,
    pub location: Option<String>,
    pub cause: Option<String>,
    pub cause_full: Option<String>,
    pub disposed: bool,
    pub detail: Option<String>,
}

impl OpRow {
    pub fn of(op: &Operation, now: DateTime<Utc>) -> OpRow {
        let status = match (op.status, &op.failure_cause) {
            (OperationStatus::InProgress, _) => "in progress",
            (_, Some(_)) => "failed",
            _ => "completed",
        };
        let end = op.completed_at.unwrap_or(now);
        let detail = match (&op.checkpoint_id, &op.savepoint_path) {
            (Some(id), _) => Some(format!("checkpoint {id}")),
            (None, Some(p)) => Some(format!("disposes {}", clip(p, 300))),
            _ => None,
        };
        OpRow {
            job_id: OperationJob(op.job_id).to_string(),
            job_name: op
                .job_name
                .clone()
                .map(|n| clip(&n, 120))
                .unwrap_or_default(),
            request_id: op.request_id.to_string(),
            kind: op.kind.as_str(),
            status,
            trigger: op.trigger.as_str(),
            created: When::at(op.created_at, now),
            completed: When::opt(op.completed_at, now),
            duration: duration(end - op.created_at),
            location: op.location.as_deref().map(|l| clip(l, 500)),
            cause: op.failure_cause.as_ref().map(cause_line),
            cause_full: op.failure_cause.as_ref().map(cause_full),
            disposed: op.disposed_at.is_some(),
            detail,
        }
    }
}

pub fn is_savepoint(kind: OperationKind) -> bool {
    matches!(
        kind,
        OperationKind::Savepoint
            | OperationKind::CancelWithSavepoint
            | OperationKind::StopWithSavepoint
            | OperationKind::TerminateWithSavepoint
    )
}

/// A configured duration as the API takes it: `500ms`, `30s`, `5m`, `6h`, `7d`.
pub fn setting_duration(d: std::time::Duration) -> String {
    let ms = d.as_millis();
    for (unit, size) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1000),
    ] {
        if ms >= size && ms.is_multiple_of(size) {
            return format!("{}{unit}", ms / size);
        }
    }
    format!("{ms}ms")
}

/// `every 6h (SAVEPOINT)`, `none`.
pub fn schedule_short(s: &Schedule) -> String {
    match s.interval {
        Some(i) => format!("every {} ({})", setting_duration(i), s.kind.as_str()),
        None => "none".to_owned(),
    }
}

/// `keep 5, at most 7d`.
pub fn retention_short(r: &Retention) -> String {
    let mut parts = Vec::new();
    if let Some(n) = r.max_count {
        parts.push(format!("keep {n}"));
    }
    if let Some(a) = r.max_age {
        parts.push(format!("at most {}", setting_duration(a)));
    }
    parts.join(", ")
}

/// Text for SVG and HTML written by hand.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The savepoint-duration chart: one `<circle>` with a `<title>` (time, duration, location)
/// per completed savepoint, over time; `None` without a completed savepoint.
pub fn duration_chart(ops: &[Operation]) -> Option<String> {
    let points: Vec<(DateTime<Utc>, i64, &str)> = ops
        .iter()
        .filter(|o| is_savepoint(o.kind) && o.status == OperationStatus::Completed)
        .filter_map(|o| {
            let done = o.completed_at?;
            let loc = o.location.as_deref()?;
            Some((done, (done - o.created_at).num_milliseconds().max(0), loc))
        })
        .collect();
    if points.is_empty() {
        return None;
    }
    let (w, h, left, right, top, bottom) = (720.0, 240.0, 64.0, 16.0, 16.0, 40.0);
    let t0 = points.iter().map(|p| p.0).min()?;
    let t1 = points.iter().map(|p| p.0).max()?;
    let span_ms = ((t1 - t0).num_milliseconds().max(1)) as f64;
    let max_ms = points.iter().map(|p| p.1).max().unwrap_or(1).max(1) as f64;
    let x = |t: DateTime<Utc>| {
        if points.len() == 1 {
            left + (w - left - right) / 2.0
        } else {
            left + (t - t0).num_milliseconds() as f64 / span_ms * (w - left - right)
        }
    };
    let y = |ms: i64| top + (1.0 - ms as f64 / max_ms) * (h - top - bottom);
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {w} {h}\" class=\"chart\" \
         role=\"img\" aria-labelledby=\"chart-title\" data-testid=\"duration-chart\">\
         <title id=\"chart-title\">Savepoint durations over time ({} savepoints)</title>",
        points.len()
    );
    let base = h - bottom;
    svg.push_str(&format!(
        "<line class=\"axis\" x1=\"{left}\" y1=\"{top}\" x2=\"{left}\" y2=\"{base}\"/>\
         <line class=\"axis\" x1=\"{left}\" y1=\"{base}\" x2=\"{}\" y2=\"{base}\"/>\
         <text class=\"label\" x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\
         <text class=\"label\" x=\"{}\" y=\"{base}\" text-anchor=\"end\">0</text>\
         <text class=\"label\" x=\"{left}\" y=\"{}\">{}</text>\
         <text class=\"label\" x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
        w - right,
        left - 6.0,
        top + 10.0,
        esc(&duration(chrono::Duration::milliseconds(max_ms as i64))),
        left - 6.0,
        h - 12.0,
        esc(&utc(t0)),
        w - right,
        h - 12.0,
        esc(&utc(t1)),
    ));
    let path: Vec<String> = points
        .iter()
        .map(|p| format!("{:.1},{:.1}", x(p.0), y(p.1)))
        .collect();
    svg.push_str(&format!(
        "<polyline class=\"line\" points=\"{}\"/>",
        path.join(" ")
    ));
    for (t, ms, loc) in &points {
        svg.push_str(&format!(
            "<circle class=\"mark\" data-testid=\"chart-mark\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"5\">\
             <title>{} · {} · {}</title></circle>",
            x(*t),
            y(*ms),
            esc(&utc(*t)),
            esc(&duration(chrono::Duration::milliseconds(*ms))),
            esc(&clip(loc, 300)),
        ));
    }
    svg.push_str("</svg>");
    Some(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_read_as_people_say_them() {
        let s = |n| span(chrono::Duration::seconds(n));
        assert_eq!(s(5), "5 s");
        assert_eq!(s(720), "12 min");
        assert_eq!(s(3 * 3600 + 10), "3 h");
        assert_eq!(s(5 * 86400), "5 d");
        assert_eq!(duration(chrono::Duration::milliseconds(1234)), "1.2 s");
    }

    #[test]
    fn first_lines_of_causes() {
        let c = serde_json::json!({"class": "x.Y", "stack-trace": "x.Y: boom\n\tat a.b(C.java:1)"});
        assert_eq!(cause_line(&c), "x.Y: boom");
        assert_eq!(cause_line(&serde_json::json!({"class": "x.Y"})), "x.Y");
        assert_eq!(esc("<a&\"'>"), "&lt;a&amp;&quot;&#39;&gt;");
    }
}
