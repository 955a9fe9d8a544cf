//! The operator console (`/ui/`) in a real headless Chromium, driven over W3C WebDriver by
//! Debian's `chromedriver` (installed by `scripts/console/install.sh`), on both backends,
//! with data made through the REST API. One chromedriver and one browser serve every case.
//!
//! With `UPDATE_SCREENSHOTS=1` it also writes `docs/console-overview.png` and
//! `docs/console-job.png` (1280 px wide).

use crate::common;

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use common::{Backend, Serve, TestDb};
use serde_json::{Value, json};

const ADMIN: &str = "admin-token-console-1";
const READ: &str = "read-token-console-1";
const WRITE: &str = "write-token-console-1";
/// A read token for cluster `alpha` only.
const LIMITED: &str = "limited-token-console-1";

const J1: &str = "38dcc0b26ce09271cefd5020d41b4b88";
const J2: &str = "91c0ad3c99e6611c32417a7c5d5146d2";
const J3: &str = "6e84621ee1bef3c42ab882c8a5c87683";
const J_NEW: &str = "aaaabbbbccccddddeeeeffff00001111";
const APP: &str = "0123456789abcdef0123456789abcdef";

const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// `chromedriver` on 127.0.0.1, in a process group of its own; dropping the guard kills the
/// group (chromedriver and the browsers it started) by its id, also when the test panics.
struct Driver {
    child: Child,
    url: String,
}

impl Driver {
    fn start() -> Driver {
        use std::os::unix::process::CommandExt;
        let found = Command::new("chromedriver")
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        assert!(
            found,
            "chromedriver is missing: run `bash scripts/console/install.sh` (as root) to install \
             Debian's chromium and chromium-driver"
        );
        let port = free_port();
        let child = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .arg("--allowed-ips=127.0.0.1")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("chromedriver starts");
        Driver {
            child,
            url: format!("http://127.0.0.1:{port}"),
        }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let pid = self.child.id() as i32;
        // SAFETY: signals the process group this guard's child leads.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
        let _ = self.child.wait();
    }
}

/// One browser session over WebDriver's JSON protocol.
struct Browser {
    http: reqwest::Client,
    session: String,
    /// `http://127.0.0.1:<port>` of the console under test.
    base: String,
}

impl Browser {
    async fn start(driver: &Driver) -> Browser {
        let http = reqwest::Client::new();
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:loggingPrefs": {"browser": "ALL"},
            "goog:chromeOptions": {
                "binary": chromium_binary(),
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", "--window-size=1280,900",
                         "--no-first-run", "--disable-extensions"]
            }
        }}});
        let deadline = Instant::now() + Duration::from_secs(20);
        let answer = loop {
            match http
                .post(format!("{}/session", driver.url))
                .json(&caps)
                .send()
                .await
            {
                Ok(r) => break r.json::<Value>().await.expect("a JSON answer"),
                Err(e) if Instant::now() < deadline => {
                    let _ = e;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => panic!("chromedriver did not answer: {e}"),
            }
        };
        let session = answer["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no browser session: {answer}"))
            .to_owned();
        Browser {
            http,
            session: format!("{}/session/{session}", driver.url),
            base: String::new(),
        }
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let mut req = self.http.request(method, format!("{}{path}", self.session));
        if let Some(b) = body {
            req = req.json(&b);
        }
        let answer: Value = req
            .send()
            .await
            .expect("chromedriver answers")
            .json()
            .await
            .expect("a JSON answer");
        answer["value"].clone()
    }

    async fn post(&self, path: &str, body: Value) -> Value {
        self.call(reqwest::Method::POST, path, Some(body)).await
    }

    async fn get(&self, path: &str) -> Value {
        self.call(reqwest::Method::GET, path, None).await
    }

    async fn goto(&self, path: &str) {
        let url = format!("{}{path}", self.base);
        let v = self.post("/url", json!({"url": url})).await;
        assert!(v.is_null(), "navigating to {path}: {v}");
    }

    async fn script(&self, script: &str) -> Value {
        self.post("/execute/sync", json!({"script": script, "args": []}))
            .await
    }

    /// The number a script returns (0 when it returns none).
    async fn number(&self, script: &str) -> f64 {
        self.script(script).await.as_f64().unwrap_or(0.0)
    }

    async fn all(&self, css: &str) -> Vec<String> {
        let v = self
            .post("/elements", json!({"using": "css selector", "value": css}))
            .await;
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|e| e[ELEMENT].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The first element matching `css`, waited for up to 10 s.
    async fn find(&self, css: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(e) = self.all(css).await.into_iter().next() {
                return e;
            }
            if Instant::now() > deadline {
                let raw = self
                    .post("/elements", json!({"using": "css selector", "value": css}))
                    .await;
                eprintln!("finding {css}: {raw}");
                let body = self.script("return document.body.innerText").await;
                panic!("no element {css} on the page; it shows:\n{body}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn text(&self, css: &str) -> String {
        let e = self.find(css).await;
        self.get(&format!("/element/{e}/text"))
            .await
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    async fn count(&self, css: &str) -> usize {
        self.all(css).await.len()
    }

    async fn click(&self, css: &str) {
        let e = self.find(css).await;
        let v = self.post(&format!("/element/{e}/click"), json!({})).await;
        assert!(v.is_null(), "click {css}: {v}");
    }

    async fn type_into(&self, css: &str, text: &str) {
        let e = self.find(css).await;
        let v = self
            .post(&format!("/element/{e}/value"), json!({"text": text}))
            .await;
        assert!(v.is_null(), "typing into {css}: {v}");
    }

    /// The browser console's entries since the last call.
    async fn logs(&self) -> Vec<Value> {
        let v = self.post("/se/log", json!({"type": "browser"})).await;
        v.as_array().cloned().unwrap_or_default()
    }

    /// Asserts that the browser console has no error since the last call.
    async fn assert_no_console_errors(&self, page: &str) {
        let errors: Vec<Value> = self
            .logs()
            .await
            .into_iter()
            .filter(|e| e["level"] == "SEVERE" || e["level"] == "ERROR")
            .collect();
        assert!(
            errors.is_empty(),
            "{page}: errors in the browser console: {errors:?}"
        );
    }

    async fn cookie(&self, name: &str) -> Option<String> {
        let v = self.get(&format!("/cookie/{name}")).await;
        v["value"].as_str().map(str::to_owned)
    }

    async fn set_cookie(&self, name: &str, value: &str) {
        let v = self
            .post(
                "/cookie",
                json!({"cookie": {"name": name, "value": value, "path": "/", "httpOnly": true,
                                  "sameSite": "Strict"}}),
            )
            .await;
        assert!(v.is_null(), "setting a cookie: {v}");
    }

    async fn window(&self, width: u32, height: u32) {
        self.post("/window/rect", json!({"width": width, "height": height}))
            .await;
    }

    async fn sign_in(&self, token: &str) {
        self.goto("/ui/").await;
        self.find("[data-testid=sign-in-form]").await;
        self.type_into("#token", token).await;
        self.click("[data-testid=sign-in]").await;
        self.find("[data-testid=sign-out]").await;
    }

    async fn sign_out(&self) {
        self.click("[data-testid=sign-out]").await;
        self.find("[data-testid=sign-in-form]").await;
    }

    /// Saves a screenshot of the whole page, `width` px wide.
    async fn screenshot(&self, width: u32, file: &str) {
        let height = self
            .script("return document.documentElement.scrollHeight")
            .await
            .as_u64()
            .unwrap_or(900)
            .clamp(400, 4000) as u32;
        self.window(width, height + 120).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let png = self.get("/screenshot").await;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(png.as_str().expect("a screenshot"))
            .expect("base64");
        let path = format!("{}/docs/{file}", env!("CARGO_MANIFEST_DIR"));
        std::fs::write(&path, bytes).expect("the screenshot is written");
        self.window(1280, 900).await;
    }

    async fn quit(&self) {
        let _ = self.call(reqwest::Method::DELETE, "", None).await;
    }
}

fn chromium_binary() -> String {
    for candidate in ["/usr/bin/chromium", "/usr/bin/chromium-browser"] {
        if std::path::Path::new(candidate).exists() {
            return candidate.to_owned();
        }
    }
    panic!(
        "chromium is missing: run `bash scripts/console/install.sh` (as root) to install \
         Debian's chromium and chromium-driver"
    );
}

/// The API, with the admin token.
struct Api {
    http: reqwest::Client,
    base: String,
}

impl Api {
    async fn send(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(ADMIN);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let res = req.send().await.expect("jobstore answers");
        let status = res.status().as_u16();
        let text = res.text().await.unwrap_or_default();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    async fn expect(
        &self, method: reqwest::Method, path: &str, body: Option<Value>, status: u16,
    ) -> Value {
        let (got, answer) = self.send(method.clone(), path, body).await;
        assert_eq!(got, status, "{method} {path}: {answer}");
        answer
    }

    async fn post(&self, path: &str, body: Value, status: u16) -> Value {
        self.expect(reqwest::Method::POST, path, Some(body), status)
            .await
    }

    /// `GET path`, asserting `status`; the answer.
    async fn get(&self, path: &str, status: u16) -> Value {
        self.expect(reqwest::Method::GET, path, None, status).await
    }

    /// A savepoint of `job` on `cluster`, completed with `outcome` (`None`: left open).
    async fn savepoint(&self, cluster: &str, job: &str, trigger: &str, outcome: Option<Value>) {
        let c = format!("/v1/clusters/{cluster}/jobs/{job}/savepoints");
        self.post(&c, json!({"triggerId": trigger}), 202).await;
        if let Some(o) = outcome {
            tokio::time::sleep(Duration::from_millis(30)).await;
            self.post(&format!("{c}/{trigger}/complete"), o, 200).await;
        }
    }
}

fn job_file(id: &str) -> Value {
    let path = format!(
        "{}/tests/data/flink-2.3.0/job-result-store/{id}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(path).expect("Flink's file")).expect("JSON")
}

const CAUSE_LINE: &str = "java.lang.IllegalStateException: the savepoint ran out of disk";

/// Two clusters: `alpha` (one dirty and one clean job result, three completed savepoints of
/// J1, one failed, one open) and `beta` (one dirty job result, one application result).
async fn seed(api: &Api) {
    for c in ["alpha", "beta"] {
        api.expect(
            reqwest::Method::PUT,
            &format!("/v1/clusters/{c}"),
            Some(json!({"flink-rest-url": null, "savepoint-directory": format!("file:///sp/{c}")})),
            200,
        )
        .await;
    }
    api.post("/v1/clusters/alpha/job-results", job_file(J1), 201)
        .await;
    api.post("/v1/clusters/alpha/job-results", job_file(J2), 201)
        .await;
    api.post(
        &format!("/v1/clusters/alpha/job-results/{J1}/clean"),
        json!({}),
        200,
    )
    .await;
    api.post("/v1/clusters/beta/job-results", job_file(J3), 201)
        .await;
    let app = json!({"result": {"application-id": APP, "application-state": "FINISHED",
        "application-name": "orders-app", "start-time": 1_796_013_188_480_i64,
        "end-time": 1_796_013_191_017_i64}, "version": 1});
    api.post("/v1/clusters/beta/application-results", app, 201)
        .await;
    for n in 1..=3 {
        let trigger = format!("{n:032x}");
        let location = json!({"location": format!("file:/sp/alpha/savepoint-38dcc0-{n:012x}")});
        api.savepoint("alpha", J1, &trigger, Some(location)).await;
    }
    let cause = json!({"failure-cause": {
        "class": "java.lang.IllegalStateException",
        "stack-trace": format!("{CAUSE_LINE}\n\tat org.apache.flink.Checkpointer.run(Checkpointer.java:42)\n\tat java.base/java.lang.Thread.run(Thread.java:840)"),
    }});
    api.savepoint("alpha", J1, &format!("{:032x}", 4), Some(cause))
        .await;
    api.savepoint("alpha", J2, &format!("{:032x}", 5), None)
        .await;
    let put = |path: &str, body: Value| {
        let path = format!("/v1/clusters/alpha/{path}");
        async move {
            api.expect(reqwest::Method::PUT, &path, Some(body), 200)
                .await
        }
    };
    put(
        "savepoint-schedule",
        json!({"interval": "6h", "kind": "SAVEPOINT"}),
    )
    .await;
    put(
        "savepoint-retention",
        json!({"max-count": 5, "max-age": "7d"}),
    )
    .await;
    let lease = api
        .post(
            "/v1/clusters/alpha/ha/lease/acquire",
            json!({"holder": "jobmanager-0", "duration-ms": 600000}),
            200,
        )
        .await;
    let fence = json!({"epoch": lease["epoch"], "lease-id": lease["lease-id"]});
    let mut info = fence.clone();
    info["address"] = json!("pekko.tcp://flink@10.0.0.5:6123/user/rpc/dispatcher_1");
    info["session-id"] = json!("2f7e4c1a-7f4e-4a57-9d3e-5b1f0c9e2a11");
    put("ha/leader-info/dispatcher", info).await;
    let mut handle = fence.clone();
    handle["job"] = json!(J1);
    handle["handle"] = json!("aced0005");
    api.post(
        "/v1/clusters/alpha/ha/state-handles/checkpoint/1",
        handle,
        201,
    )
    .await;
}

/// Makes beta's dirty entry 15 minutes old (straight in SQL: the API stamps the time).
async fn age_dirty_entry(db: &TestDb) {
    let then = match db.backend {
        Backend::Postgres => "now() - interval '15 minutes'",
        Backend::Sqlite => "strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-15 minutes')",
    };
    let sql = format!(
        "UPDATE job_results SET created_at = {then} WHERE cluster_id = 'beta' AND job_id = '{J3}'"
    );
    assert_eq!(db.execute(&sql).await, Ok(1));
}

/// What the console shows in a cell of the overview.
async fn cell(b: &Browser, cluster: &str, field: &str) -> String {
    b.text(&format!(
        "tr[data-cluster='{cluster}'] [data-field='{field}']"
    ))
    .await
}

/// The status of a console page for the browser's session, over plain HTTP (WebDriver does
/// not tell a page's status).
async fn status_with_session(b: &Browser, path: &str) -> u16 {
    let sid = b.cookie("jobstore_session").await.unwrap_or_default();
    reqwest::Client::new()
        .get(format!("{}{path}", b.base))
        .header("Cookie", format!("jobstore_session={sid}"))
        .send()
        .await
        .expect("jobstore answers")
        .status()
        .as_u16()
}

async fn on_backend(b: &mut Browser, backend: Backend, screenshots: bool) {
    let db = TestDb::new(backend).await;
    let tokens = format!("admin:{ADMIN},read:{READ},write:{WRITE},read:alpha:{LIMITED}");
    let serve = Serve::start_with_env(&db.url, &[], &[("JOBSTORE_TOKENS", &tokens)]).await;
    b.base = serve.base.clone();
    let api = Api {
        http: reqwest::Client::new(),
        base: serve.base.clone(),
    };
    seed(&api).await;
    age_dirty_entry(&db).await;
    let label = format!("{backend:?}");

    // The browser console is read for real: an error written there is seen.
    b.goto("/ui/").await;
    b.script("console.error('probe of the log reader')").await;
    let probe = b.logs().await;
    assert!(
        probe.iter().any(|e| e["level"] == "SEVERE"
            && e["message"]
                .as_str()
                .is_some_and(|m| m.contains("probe of the log reader"))),
        "the browser's console log is not readable: {probe:?}"
    );

    // Without a session: the sign-in form and no data, on every page.
    b.logs().await;
    for path in [
        "/ui/",
        "/ui/clusters/alpha",
        &format!("/ui/clusters/alpha/jobs/{J1}"),
    ] {
        b.goto(path).await;
        b.find("[data-testid=sign-in-form] input[type=password]")
            .await;
        assert_eq!(
            b.count("tr[data-cluster], tr[data-result], [data-testid=chart-mark]")
                .await,
            0,
            "{label} {path}"
        );
        b.assert_no_console_errors(path).await;
    }
    b.goto("/").await;
    b.find("[data-testid=sign-in-form]").await;

    // A read token: data, and no action.
    b.sign_in(READ).await;
    b.assert_no_console_errors("sign-in").await;
    b.find("tr[data-cluster='alpha']").await;
    // Per field of the overview: alpha's cell and beta's (None: not looked at).
    for (field, alpha, beta) in [
        ("dirty", "1", Some("1")),
        ("clean", "1", Some("0")),
        ("applications", "0", Some("1")),
        ("open-operations", "1", Some("0")),
        ("failed-24h", "1", Some("0")),
        ("schedule", "every 6h (SAVEPOINT)", None),
        ("retention", "keep 5, at most 7d", None),
    ] {
        for (cluster, want) in [("alpha", Some(alpha)), ("beta", beta)] {
            let Some(want) = want else { continue };
            assert_eq!(
                cell(b, cluster, field).await,
                want,
                "{label}: overview {cluster} {field}"
            );
        }
    }
    assert!(
        cell(b, "alpha", "oldest-dirty").await.contains("ago"),
        "{label}: the oldest dirty entry's age"
    );
    b.assert_no_console_errors("overview").await;
    if screenshots {
        b.screenshot(1280, "console-overview.png").await;
    }

    b.click("tr[data-cluster='alpha'] [data-testid=cluster-link]")
        .await;
    let dirty = format!("tr[data-result='{J2}'][data-state='dirty']");
    b.find(&dirty).await;
    let age = b.text(&format!("{dirty} [data-field='created']")).await;
    assert!(
        age.contains("UTC") && age.contains("ago"),
        "{label}: a dirty entry with its age: {age}"
    );
    b.find(&format!("tr[data-result='{J1}'][data-state='clean']"))
        .await;
    assert!(
        b.text("[data-testid=operations]")
            .await
            .contains(CAUSE_LINE),
        "{label}: the failure's first line on the cluster page"
    );
    assert_eq!(
        b.count("[data-testid=remove-result], [data-testid=trigger-savepoint]")
            .await,
        0,
        "{label}: no action for a read token"
    );
    b.assert_no_console_errors("cluster page").await;

    // New data shows within 5 s, without a reload, keeping the scroll position.
    b.window(1280, 500).await;
    b.script("window.__notReloaded = true; window.scrollTo(0, 300);")
        .await;
    let scrolled = b.number("return window.scrollY").await;
    assert!(scrolled > 0.0, "{label}: the cluster page scrolls");
    let mut new = job_file(J2);
    new["result"]["id"] = json!(J_NEW);
    api.post("/v1/clusters/alpha/job-results", new, 201).await;
    let deadline = Instant::now() + Duration::from_secs(6);
    while b.count(&format!("tr[data-result='{J_NEW}']")).await == 0 {
        assert!(
            Instant::now() < deadline,
            "{label}: new data did not show within 5 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        b.script("return window.__notReloaded === true").await,
        json!(true),
        "{label}: the page was reloaded"
    );
    let after = b.number("return window.scrollY").await;
    assert!(
        (after - scrolled).abs() < 1.0,
        "{label}: the scroll position moved from {scrolled} to {after}"
    );
    b.window(1280, 900).await;

    // The job page: a chart mark per completed savepoint, the failure-cause in full.
    b.goto(&format!("/ui/clusters/alpha/jobs/{J1}")).await;
    b.find("[data-testid=duration-chart]").await;
    let titles = b
        .script("return Array.from(document.querySelectorAll('[data-testid=chart-mark]')).map(m => (m.querySelector('title') || {}).textContent || '')")
        .await;
    let titles = titles.as_array().cloned().unwrap_or_default();
    assert_eq!(
        titles.len(),
        3,
        "{label}: one mark per completed savepoint: {titles:?}"
    );
    for t in &titles {
        let t = t.as_str().unwrap_or_default();
        assert!(
            t.contains("UTC") && t.contains("file:/sp/alpha/savepoint-38dcc0-"),
            "{label}: a mark's title: {t}"
        );
    }
    assert_eq!(
        b.text("[data-testid=failure] [data-field=failure-cause]")
            .await,
        CAUSE_LINE
    );
    let trace = b
        .script("const d = document.querySelector('[data-testid=failure] details'); return [d.open, d.textContent]")
        .await;
    assert_eq!(trace[0], json!(false), "{label}: the stack trace is folded");
    assert!(
        trace[1]
            .as_str()
            .unwrap_or_default()
            .contains("Checkpointer.java:42"),
        "{label}: the whole trace"
    );
    assert!(
        b.text("[data-testid=latest-savepoint]")
            .await
            .contains("savepoint-38dcc0-000000000003")
    );
    assert_eq!(
        b.count("[data-testid=trigger-savepoint], [data-testid=remove-result]")
            .await,
        0,
        "{label}: no action for a read token"
    );
    b.assert_no_console_errors("job page").await;
    if screenshots {
        b.screenshot(1280, "console-job.png").await;
    }

    // Readable at 400 px: nothing wider than the window.
    b.window(400, 800).await;
    for path in [
        "/ui/",
        "/ui/clusters/alpha",
        &format!("/ui/clusters/alpha/jobs/{J1}"),
    ] {
        b.goto(path).await;
        b.find("[data-testid=read-at]").await;
        let width = b
            .number("return document.documentElement.scrollWidth")
            .await;
        let inner = b.number("return window.innerWidth").await;
        assert!(
            width <= inner,
            "{label}: {path} is {width} px wide at a {inner} px window"
        );
    }
    b.window(1280, 900).await;

    // Sign-out ends the session on the server: the old cookie shows nothing.
    let old = b
        .cookie("jobstore_session")
        .await
        .expect("a session cookie");
    b.sign_out().await;
    b.goto("/ui/clusters/alpha").await;
    b.find("[data-testid=sign-in-form]").await;
    b.set_cookie("jobstore_session", &old).await;
    b.goto("/ui/clusters/alpha").await;
    b.find("[data-testid=sign-in-form]").await;
    assert_eq!(
        b.count("tr[data-result]").await,
        0,
        "{label}: the old cookie shows nothing"
    );
    b.assert_no_console_errors("after sign-out").await;

    // A write token triggers a savepoint from the job page; the operation is in the API.
    b.sign_in(WRITE).await;
    b.goto(&format!("/ui/clusters/alpha/jobs/{J1}")).await;
    assert_eq!(
        b.count("[data-testid=remove-result]").await,
        0,
        "{label}: removing needs admin"
    );
    b.click("[data-testid=trigger-savepoint]").await;
    b.click("[data-testid=confirm-savepoint]").await;
    let notice = b.text("[data-testid=notice]").await;
    let id = notice
        .split_whitespace()
        .find_map(|w| {
            let w = w.trim_end_matches('.');
            (w.len() == 32 && w.bytes().all(|c| c.is_ascii_hexdigit())).then(|| w.to_owned())
        })
        .unwrap_or_else(|| panic!("{label}: no request id in {notice:?}"));
    let op = api
        .get(
            &format!("/v1/clusters/alpha/jobs/{J1}/savepoints/{id}"),
            200,
        )
        .await;
    assert_eq!(op["status"]["id"], "IN_PROGRESS", "{label}: {op}");
    let list = api
        .get(
            &format!("/v1/clusters/alpha/savepoint-operations?job-id={J1}&status=IN_PROGRESS"),
            200,
        )
        .await;
    let listed = list["savepoint-operations"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        listed
            .iter()
            .any(|o| o["request-id"] == json!(id) && o["target-directory"] == "file:///sp/alpha"),
        "{label}: {list}"
    );
    b.find(&format!("tr[data-operation='{id}']")).await;
    b.assert_no_console_errors("savepoint triggered").await;
    b.sign_out().await;

    // A cluster-limited token sees its cluster only: 403 on another's page.
    b.sign_in(LIMITED).await;
    b.find("tr[data-cluster='alpha']").await;
    assert_eq!(
        b.count("tr[data-cluster='beta'], tr[data-cluster='default']")
            .await,
        0,
        "{label}: the limited token sees alpha only"
    );
    b.assert_no_console_errors("limited overview").await;
    b.goto("/ui/clusters/beta").await;
    assert_eq!(
        b.text("[data-testid=error-status]")
            .await
            .split_whitespace()
            .next(),
        Some("403")
    );
    assert_eq!(b.count("tr[data-result]").await, 0);
    assert_eq!(status_with_session(b, "/ui/clusters/beta").await, 403);
    assert_eq!(
        status_with_session(b, &format!("/ui/clusters/beta/jobs/{J3}")).await,
        403
    );
    assert_eq!(status_with_session(b, "/ui/clusters/alpha").await, 200);
    b.logs().await;
    b.sign_out().await;

    // An admin removes a stale job result; unknown pages are 404 pages; a bad filter says so.
    b.sign_in(ADMIN).await;
    assert_eq!(status_with_session(b, "/ui/clusters/nowhere").await, 404);
    assert_eq!(
        status_with_session(
            b,
            "/ui/clusters/alpha/jobs/ffffffffffffffffffffffffffffffff"
        )
        .await,
        404
    );
    b.goto("/ui/clusters/alpha?job=not-a-job").await;
    assert!(
        b.text("[data-testid=filter-error]")
            .await
            .contains("32 hex")
    );
    b.logs().await;
    b.goto("/ui/clusters/beta").await;
    b.find(&format!(
        "tr.warn[data-result='{J3}'] [data-testid=dirty-warning]"
    ))
    .await;
    b.click(&format!(
        "tr[data-result='{J3}'] [data-testid=remove-result]"
    ))
    .await;
    b.click("[data-testid=confirm-remove]").await;
    b.find("[data-testid=notice]").await;
    assert_eq!(b.count(&format!("tr[data-result='{J3}']")).await, 0);
    api.get(&format!("/v1/clusters/beta/job-results/{J3}"), 404)
        .await;
    b.assert_no_console_errors("result removed").await;
    b.sign_out().await;

    // A POST without the form's CSRF token changes nothing.
    let forged = reqwest::Client::new()
        .post(format!(
            "{}/ui/clusters/alpha/job-results/{J2}/remove",
            serve.base
        ))
        .header("Cookie", format!("jobstore_session={old}"))
        .form(&[("csrf", "0000")])
        .send()
        .await
        .expect("jobstore answers");
    assert_ne!(forged.status().as_u16(), 303);
    api.get(&format!("/v1/clusters/alpha/job-results/{J2}"), 200)
        .await;
    drop(serve);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_in_a_real_browser() {
    let driver = Driver::start();
    let mut browser = Browser::start(&driver).await;
    let screenshots = std::env::var("UPDATE_SCREENSHOTS").is_ok_and(|v| v == "1");
    on_backend(&mut browser, Backend::Postgres, screenshots).await;
    on_backend(&mut browser, Backend::Sqlite, false).await;
    browser.quit().await;
    drop(driver);
}

/// Without tokens the console is open: data at once, and the actions of an admin.
#[tokio::test]
async fn console_without_tokens_is_open() {
    let (serve, _db) = Serve::on_sqlite(&[]).await;
    let http = reqwest::Client::new();
    let res = http
        .get(format!("{}/ui/", serve.base))
        .send()
        .await
        .expect("jobstore answers");
    assert_eq!(res.status().as_u16(), 200);
    let csrf_cookie = res
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with("jobstore_csrf="))
        .expect("a CSRF cookie")
        .to_owned();
    assert!(csrf_cookie.contains("HttpOnly") && csrf_cookie.contains("SameSite=Strict"));
    let page = res.text().await.unwrap_or_default();
    assert!(page.contains("data-cluster=\"default\""), "{page}");
    assert!(!page.contains("data-testid=\"sign-in-form\""));
    let redirect = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(format!("{}/", serve.base))
        .send()
        .await
        .unwrap();
    assert_eq!(redirect.status().as_u16(), 303);
    assert_eq!(redirect.headers()["location"], "/ui/");
}
