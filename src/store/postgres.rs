//! Opening the PostgreSQL store: the shared home for every replica and cluster.
//!
//! Which server: `--database-url` may name several hosts (libpq's form,
//! `postgres://h1:5432,h2:5432/db`, see `pg_url`); they are tried in order for one that takes
//! writes (`target_session_attrs=read-write`, the default) whenever jobstore selects a server:
//! at start, and whenever a connection fails, lands on a read-only server, or waits too long.
//! New pool connections go to the selected server and are each checked read-write in the
//! pool's connect hook (a read-only one is refused and the connection made again, on the
//! server selected anew); so a standby is never used for writes.
//!
//! Failing fast: sqlx's pool retries a refused connection until the acquire timeout
//! (`--db-timeout`), so a database that is down would hold every request that long. Here a
//! *link* watches the database: a statement that fails on the connection, or a connection
//! that is not handed out within [`PROBE_AFTER`], makes it probe the hosts; when none takes
//! writes the link is *down*, and every request is answered 503 at once (no connection is
//! waited for) while the hosts are probed again every [`DOWN_RETRY`]; the first probe that
//! finds a read-write server makes the link up again, and the connections made before are
//! not reused.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgListener, PgPool, PgPoolOptions};
use sqlx::{ConnectOptions, Connection, Postgres};
use tokio::sync::{Notify, watch};

use super::db::Db;
use super::model::{OperationJob, OperationKey};
use super::operation_cache::OperationCache;
use super::pg_url::{self, PgTarget};
use super::{StoreConfig, migrate};

/// A connection not handed out this long after it was asked for makes the link probe the
/// servers (a refused connection is retried by the pool silently until `--db-timeout`).
pub(crate) const PROBE_AFTER: Duration = Duration::from_millis(50);
/// While no server takes writes, the hosts are probed this often.
pub(crate) const DOWN_RETRY: Duration = Duration::from_millis(100);
/// Probes while the link is up are at least this far apart.
const UP_PROBE_GAP: Duration = Duration::from_millis(100);
/// How long one host may take to accept a probe's connection (libpq's `connect_timeout` in
/// the URL overrides it; never longer than `--db-timeout`).
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// While no server takes writes, a new probe starts every [`DOWN_RETRY`] without waiting for
/// the earlier ones, so that a connection stuck on a dead primary (behind a proxy that has not
/// noticed yet) holds up one probe for its timeout, never the probe that finds the new
/// primary: as many at once as one probe timeout spans, at most this many.
const MAX_PROBES: usize = 128;
/// A pooled connection idle longer than this is checked (read-write, alive) before it is
/// handed out: one round trip, like the ping it replaces.
const CHECK_IDLE_AFTER: Duration = Duration::from_secs(1);

/// How a probe's note on a host that did not connect in time begins.
const TIMED_OUT: &str = "no connection within";

/// Whether the connection's server refuses writes (a standby, or a server or database set
/// `default_transaction_read_only`): what libpq's `target_session_attrs=read-write` checks.
const READ_ONLY: &str =
    "SELECT pg_is_in_recovery() OR current_setting('transaction_read_only') = 'on'";

/// The PostgreSQL store's connections: the pool of requests, the LISTEN's own connection
/// (outside that pool, so that it never takes a request's), and the link that selects the
/// server.
#[derive(Clone)]
pub(crate) struct PgDb {
    pub(crate) pool: PgPool,
    listen_pool: PgPool,
    pub(crate) link: Arc<Link>,
}

/// Which server the pools connect to, and whether any takes writes now.
pub(crate) struct Link {
    target: PgTarget,
    probe_timeout: Duration,
    /// How long a request may wait for the database (`--db-timeout`).
    pub(crate) timeout: Duration,
    state: watch::Sender<LinkState>,
    /// Asks the monitor to probe the hosts.
    wake: Notify,
    /// Pooled connections made before this are closed instead of reused (the server they
    /// reach was left, or went away).
    reset_at: Mutex<Instant>,
    pools: OnceLock<[PgPool; 2]>,
    /// The group commit flushers' own pools ([`PgDb::flusher`]); locked while the server
    /// changes, so that a pool made meanwhile connects to the new one.
    flushers: Mutex<Vec<PgPool>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LinkState {
    /// The pools connect to this host (its index in the URL).
    Up(usize),
    /// No host takes writes: requests are answered 503 at once.
    Down,
}

/// The error a request gets while no server takes writes (503, like a refused connection).
fn down_error() -> sqlx::Error {
    sqlx::Error::Io(std::io::Error::new(
        std::io::ErrorKind::ConnectionRefused,
        "no PostgreSQL server that takes writes is reachable (jobstore probes the hosts again every 100 ms)",
    ))
}

/// A connection failure that says the server is not there (or not yet, or not any more).
fn unreachable(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(_) | sqlx::Error::Tls(_) | sqlx::Error::Protocol(_) => true,
        sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed => true,
        sqlx::Error::Database(db) => {
            let code = db.code().unwrap_or_default();
            code.starts_with("08") || code.starts_with("57P")
        }
        _ => false,
    }
}

/// A statement refused because the server takes no writes (SQLSTATE 25006): the server
/// became a standby under this connection, or was set read-only.
fn read_only_refusal(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db) if db.code().as_deref() == Some("25006"))
}

/// What probing the hosts found.
enum Probe {
    /// The first host (in the URL's order) that takes writes, and a connection to it.
    Found(usize, PgConnection),
    /// None takes writes: why not, per host.
    None(Vec<String>),
    /// A host answered with another failure (authentication, too many connections): the
    /// servers are there, the link keeps its state.
    Unsure(String),
}

impl Link {
    /// Asks for a probe of the hosts (at most one runs at a time).
    pub(crate) fn suspect(&self) {
        self.wake.notify_one();
    }

    /// Looks at a statement's failure: one that says the server went away, or takes no
    /// writes any more, makes the link probe the hosts.
    pub(crate) fn saw(&self, e: &sqlx::Error) {
        if read_only_refusal(e) {
            tracing::warn!(
                "PostgreSQL refused a write (read-only server): selecting the server again"
            );
            self.reset_connections();
            self.suspect();
        } else if unreachable(e) {
            self.suspect();
        }
    }

    fn reset_connections(&self) {
        *self.reset_at.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
    }

    /// Whether a pooled connection of this age was made before the last reset.
    fn made_before_reset(&self, age: Duration) -> bool {
        let reset_at = *self.reset_at.lock().unwrap_or_else(|p| p.into_inner());
        Instant::now()
            .checked_sub(age)
            .is_some_and(|made| made < reset_at)
    }

    fn host_name(&self, i: usize) -> &str {
        self.target
            .hosts
            .get(i)
            .map_or("", |(name, _)| name.as_str())
    }

    /// One host: a connection when it suits (`None`: it is read-only and read-write was
    /// asked for).
    async fn try_host(
        &self, options: &PgConnectOptions, timeout: Duration,
    ) -> Result<Option<PgConnection>, String> {
        let attempt = async {
            let mut conn = PgConnection::connect_with(options).await?;
            if self.target.read_write && is_read_only(&mut conn).await? {
                let _ = conn.close().await;
                return Ok::<_, sqlx::Error>(None);
            }
            Ok(Some(conn))
        };
        match tokio::time::timeout(timeout, attempt).await {
            Ok(Ok(conn)) => Ok(conn),
            Ok(Err(e)) if unreachable(&e) => Err(e.to_string()),
            Ok(Err(e)) => Err(format!("unsure: {e}")),
            Err(_) => Err(format!("{TIMED_OUT} {} s", timeout.as_secs_f64())),
        }
    }

    /// Tries the hosts in the URL's order, each for at most `timeout`.
    async fn probe(&self, timeout: Duration) -> Probe {
        let mut why = Vec::new();
        let mut unsure = None;
        for (i, (name, options)) in self.target.hosts.iter().enumerate() {
            match self.try_host(options, timeout).await {
                Ok(Some(conn)) => return Probe::Found(i, conn),
                Ok(None) => why.push(format!("{name}: read-only")),
                Err(e) => {
                    if e.starts_with("unsure: ") && unsure.is_none() {
                        unsure = Some(format!("{name}: {}", &e["unsure: ".len()..]));
                    }
                    why.push(format!("{name}: {e}"));
                }
            }
        }
        match unsure {
            Some(e) => Probe::Unsure(e),
            None => Probe::None(why),
        }
    }

    /// Acts on a probe's finding; the connection it made, if any.
    fn apply(&self, probe: Probe) -> Option<PgConnection> {
        let before = *self.state.borrow();
        match probe {
            Probe::Found(i, conn) => {
                if before != LinkState::Up(i) {
                    let flushers = self.flushers.lock().unwrap_or_else(|e| e.into_inner());
                    if let Some([pool, listen_pool]) = self.pools.get() {
                        let options = self.target.hosts[i].1.clone();
                        listen_pool.set_connect_options(
                            options.clone().application_name(&listen_application_name()),
                        );
                        for flusher in flushers.iter() {
                            flusher.set_connect_options(options.clone());
                        }
                        pool.set_connect_options(options);
                    }
                    drop(flushers);
                    self.reset_connections();
                    tracing::info!(
                        host = self.host_name(i),
                        read_write = self.target.read_write,
                        "PostgreSQL server selected"
                    );
                    self.state.send_replace(LinkState::Up(i));
                }
                Some(conn)
            }
            Probe::None(why) => {
                if before != LinkState::Down {
                    self.reset_connections();
                    tracing::warn!(
                        hosts = %why.join("; "),
                        "no PostgreSQL server takes writes: requests are answered 503 at once until one does"
                    );
                    self.state.send_replace(LinkState::Down);
                }
                None
            }
            Probe::Unsure(e) => {
                tracing::warn!(error = %e, "probing the PostgreSQL servers failed");
                None
            }
        }
    }

    fn closed(&self) -> bool {
        self.pools.get().is_some_and(|[pool, _]| pool.is_closed())
    }

    /// Probes when asked to (at most every [`UP_PROBE_GAP`]) while up, every
    /// [`DOWN_RETRY`] while down; ends when the pools close.
    async fn monitor(self: Arc<Self>) {
        let mut last: Option<Instant> = None;
        loop {
            if self.closed() {
                return;
            }
            if *self.state.borrow() == LinkState::Down {
                self.clone().while_down().await;
                last = Some(Instant::now());
                continue;
            }
            self.wake.notified().await;
            if let Some(last) = last {
                tokio::time::sleep_until((last + UP_PROBE_GAP).into()).await;
            }
            if self.closed() {
                return;
            }
            last = Some(Instant::now());
            let probe = self.probe(self.probe_timeout).await;
            if let Some(conn) = self.apply(probe) {
                let _ = conn.close().await;
            }
        }
    }

    /// How many probes may be under way at once while down: enough that one starts every
    /// [`DOWN_RETRY`] however long each waits for its connection.
    fn probes_at_once(&self) -> usize {
        let span = self.probe_timeout.as_millis() / DOWN_RETRY.as_millis().max(1);
        usize::try_from(span)
            .unwrap_or(MAX_PROBES)
            .saturating_add(2)
            .min(MAX_PROBES)
    }

    /// While no server takes writes: a probe every [`DOWN_RETRY`], each with the whole probe
    /// timeout, without waiting for the ones still connecting. The first that finds a server selects it; of the others, only an answer newer
    /// than the last one acted on counts. Returns once a server takes writes, or the pools
    /// closed.
    async fn while_down(self: Arc<Self>) {
        let mut probes = tokio::task::JoinSet::new();
        let (mut started, mut applied) = (0u64, 0u64);
        loop {
            if self.closed() {
                return;
            }
            if probes.len() < self.probes_at_once() {
                started += 1;
                let (link, seq) = (self.clone(), started);
                probes.spawn(async move { (seq, link.probe(link.probe_timeout).await) });
            }
            let tick = tokio::time::sleep(DOWN_RETRY);
            tokio::pin!(tick);
            loop {
                tokio::select! {
                    _ = &mut tick => break,
                    Some(done) = probes.join_next(), if !probes.is_empty() => {
                        let Ok((seq, probe)) = done else { continue };
                        let found = matches!(probe, Probe::Found(..));
                        if !found && seq <= applied {
                            continue;
                        }
                        applied = applied.max(seq);
                        if let Some(conn) = self.apply(probe) {
                            let _ = conn.close().await;
                        }
                        if *self.state.borrow() != LinkState::Down {
                            // The probes still connecting are dropped with the set.
                            return;
                        }
                    }
                }
            }
        }
    }

    /// The connect hook of both pools: a connection to a read-only server is refused (the
    /// pool makes it again, after the link selected the server anew).
    async fn check_new(&self, conn: &mut PgConnection) -> Result<(), sqlx::Error> {
        if self.target.read_write && is_read_only(conn).await? {
            self.reset_connections();
            self.suspect();
            return Err(sqlx::Error::Io(std::io::Error::new(
                std::io::ErrorKind::ConnectionRefused,
                "the PostgreSQL server is read-only (a standby?): not used for writes",
            )));
        }
        Ok(())
    }

    /// The check of a pooled connection before it is handed out: never one made before
    /// the last reset; one idle for a while is checked alive and read-write.
    async fn check_pooled(&self, conn: &mut PgConnection, age: Duration, idle: Duration) -> bool {
        if self.made_before_reset(age) {
            return false;
        }
        if idle <= CHECK_IDLE_AFTER {
            return true;
        }
        if self.target.read_write {
            match is_read_only(conn).await {
                Ok(false) => true,
                Ok(true) => {
                    self.reset_connections();
                    self.suspect();
                    false
                }
                Err(_) => false,
            }
        } else {
            conn.ping().await.is_ok()
        }
    }
}

async fn is_read_only(conn: &mut PgConnection) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar::<_, bool>(READ_ONLY)
        .fetch_one(conn)
        .await
}

/// The pool options both pools share: the connect hook and the check before handing out.
fn pool_options(link: &Arc<Link>) -> PgPoolOptions {
    let connect = link.clone();
    let pooled = link.clone();
    PgPoolOptions::new()
        .test_before_acquire(false)
        .after_connect(move |conn, _meta| {
            let link = connect.clone();
            Box::pin(async move { link.check_new(conn).await })
        })
        .before_acquire(move |conn, meta| {
            let link = pooled.clone();
            Box::pin(async move { Ok(link.check_pooled(conn, meta.age, meta.idle_for).await) })
        })
}

impl PgDb {
    /// A connection of the request pool: at once an error while no server takes writes,
    /// and as soon as the link finds that out while waiting.
    pub(crate) async fn acquire(&self) -> Result<PoolConnection<Postgres>, sqlx::Error> {
        let mut state = self.link.state.subscribe();
        if *state.borrow_and_update() == LinkState::Down {
            return Err(down_error());
        }
        let acquire = self.pool.acquire();
        tokio::pin!(acquire);
        let slow = tokio::time::sleep(PROBE_AFTER);
        tokio::pin!(slow);
        let mut probing = false;
        loop {
            tokio::select! {
                got = &mut acquire => {
                    if let Err(e) = &got {
                        self.link.saw(e);
                    }
                    return got;
                }
                () = &mut slow, if !probing => {
                    probing = true;
                    self.link.suspect();
                }
                changed = state.changed() => {
                    if changed.is_err() || *state.borrow_and_update() == LinkState::Down {
                        return Err(down_error());
                    }
                }
            }
        }
    }

    /// A transaction on a connection of [`PgDb::acquire`].
    pub(crate) async fn begin(&self) -> Result<sqlx::Transaction<'static, Postgres>, sqlx::Error> {
        let conn = self.acquire().await?;
        sqlx::Transaction::begin(conn, None)
            .await
            .inspect_err(|e| self.link.saw(e))
    }

    /// The same database through a pool of its own for the group commit's flusher
    /// (`group_commit::start`), made on the runtime that calls this: its connection's
    /// round trips are then polled by the flusher's own thread, not behind the requests'
    /// tasks. One connection, with the request pool's settings and checks; it follows the
    /// link's change of server as the request pool does, and closes with it.
    pub(crate) fn flusher(&self) -> PgDb {
        let mut flushers = self.link.flushers.lock().unwrap_or_else(|e| e.into_inner());
        flushers.retain(|p| !p.is_closed());
        let options = self.pool.options();
        let pool = pool_options(&self.link)
            .max_connections(1)
            .acquire_timeout(options.get_acquire_timeout())
            .max_lifetime(options.get_max_lifetime())
            .idle_timeout(options.get_idle_timeout())
            .connect_lazy_with((*self.pool.connect_options()).clone());
        flushers.push(pool.clone());
        PgDb {
            pool,
            listen_pool: self.listen_pool.clone(),
            link: self.link.clone(),
        }
    }

    /// Closes the request pool (waiting for the connections in use), the flushers', then
    /// the LISTEN's.
    pub(crate) async fn close(&self) {
        self.pool.close().await;
        let flushers = self
            .link
            .flushers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        for flusher in flushers {
            flusher.close().await;
        }
        self.listen_pool.close().await;
        self.link.wake.notify_one();
    }

    pub(crate) fn size(&self) -> u32 {
        self.pool.size()
    }

    pub(crate) fn num_idle(&self) -> usize {
        self.pool.num_idle()
    }
}

/// Migrates (under the advisory lock, on a connection of its own, on the first host that
/// takes writes) when asked to, then opens the pools (lazily: connections are made as
/// requests need them).
pub(crate) async fn open(config: &StoreConfig) -> anyhow::Result<Db> {
    let mut target = pg_url::parse(&config.url).map_err(anyhow::Error::msg)?;
    for (_, options) in &mut target.hosts {
        *options = options
            .clone()
            .application_name("jobstore")
            .log_statements(tracing::log::LevelFilter::Trace);
    }
    let probe_timeout = target
        .connect_timeout
        .unwrap_or(PROBE_TIMEOUT)
        .min(config.acquire_timeout);
    let link = Arc::new(Link {
        target,
        probe_timeout,
        timeout: config.acquire_timeout,
        state: watch::Sender::new(LinkState::Up(0)),
        wake: Notify::new(),
        reset_at: Mutex::new(Instant::now()),
        pools: OnceLock::new(),
        flushers: Mutex::new(Vec::new()),
    });
    // The server at start: the first host that takes writes (the migration needs one).
    let found = match tokio::time::timeout(config.acquire_timeout, link.probe(probe_timeout)).await
    {
        Ok(probe) => probe,
        Err(_) => Probe::None(vec![format!(
            "no answer within {} s (--db-timeout)",
            config.acquire_timeout.as_secs_f64()
        )]),
    };
    let (first, mut conn) = match found {
        Probe::Found(i, conn) => (i, conn),
        Probe::None(why) => {
            anyhow::bail!("no PostgreSQL server that takes writes: {}", why.join("; "))
        }
        Probe::Unsure(e) => anyhow::bail!("cannot connect to PostgreSQL: {e}"),
    };
    if config.migrate {
        let outcome = migrate::migrate_postgres(&mut conn).await;
        let _ = conn.close().await;
        let applied = outcome?;
        tracing::info!(applied, "PostgreSQL schema is current");
    } else {
        let _ = conn.close().await;
    }
    if link.target.hosts.len() > 1 {
        tracing::info!(host = link.host_name(first), "PostgreSQL server selected");
    }
    link.state.send_replace(LinkState::Up(first));
    let options = link.target.hosts[first].1.clone();
    let pool = pool_options(&link)
        .max_connections(config.max_connections.max(1))
        .acquire_timeout(config.acquire_timeout)
        .connect_lazy_with(options.clone());
    // The LISTEN's connection: a pool of one, so that sqlx's listener can reconnect
    // through it; never closed for age or idleness.
    let listen_pool = pool_options(&link)
        .max_connections(1)
        .max_lifetime(None)
        .idle_timeout(None)
        .acquire_timeout(config.acquire_timeout)
        .connect_lazy_with(options.application_name(&listen_application_name()));
    let _ = link.pools.set([pool.clone(), listen_pool.clone()]);
    tokio::spawn(link.clone().monitor());
    Ok(Db::Postgres(PgDb {
        pool,
        listen_pool,
        link,
    }))
}

/// The channel the `ha_leader_info` trigger (migration V6) notifies.
const LEADER_INFO_CHANNEL: &str = "jobstore_ha_leader_info";

/// The channel the `savepoint_operations` trigger (migration V12) notifies: a completed
/// operation changed or went (payload `JOB REQUEST CLUSTER`, or `*` for every one).
const OPERATIONS_CHANNEL: &str = "jobstore_operations";

/// After a failed LISTEN, the next try comes this much later.
const LISTEN_RETRY: Duration = Duration::from_millis(250);

/// The application name of the LISTEN's connection: `jobstore-listen-PID`, so that an
/// operator (or a test) tells it from the request pool's in `pg_stat_activity`.
pub(crate) fn listen_application_name() -> String {
    format!("jobstore-listen-{}", std::process::id())
}

/// What the LISTEN task keeps up to date.
pub(crate) struct Listening {
    /// Bumped at each change of leader information (and after every reconnection, since
    /// notifications sent meanwhile are lost).
    pub(crate) leader_changes: Arc<watch::Sender<u64>>,
    /// Told of every changed completed operation; emptied and not live while the LISTEN is
    /// down. `None`: the cache is off, its channel not listened to.
    pub(crate) cache: Option<Arc<OperationCache>>,
}

impl Listening {
    fn up(&self) {
        if let Some(cache) = &self.cache {
            cache.set_live(true);
        }
        self.leader_changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    fn down(&self) {
        if let Some(cache) = &self.cache {
            cache.set_live(false);
        }
    }

    fn heard(&self, channel: &str, payload: &str) {
        match (channel, &self.cache) {
            (OPERATIONS_CHANNEL, Some(cache)) => match operation_key(payload) {
                Some(key) => cache.invalidate(&key),
                None => cache.invalidate_all(),
            },
            (OPERATIONS_CHANNEL, None) => {}
            _ => self.leader_changes.send_modify(|n| *n = n.wrapping_add(1)),
        }
    }
}

/// The operation a notification of [`OPERATIONS_CHANNEL`] names (`None`: every one, `*` or
/// a payload this version does not read).
fn operation_key(payload: &str) -> Option<OperationKey> {
    let mut parts = payload.splitn(3, ' ');
    let (job, request, cluster) = (parts.next()?, parts.next()?, parts.next()?);
    Some(OperationKey {
        cluster: cluster.parse().ok()?,
        job: job.parse::<OperationJob>().ok()?.into(),
        request: request.parse().ok()?,
    })
}

/// LISTENs for changes made by any writer (leader information, and completed operations
/// while the cache is on) until the pools close. Its connection is its own (outside the
/// request pool, on the server the link selected), so that it never holds a request's
/// connection; it is made again when lost, and when the link selects another server (a
/// connection left on the old one would hear nothing of the new one's writes). While it is
/// down the cache is off and empty.
pub(crate) fn listen(pg: PgDb, listening: Listening) {
    let pool = pg.listen_pool.clone();
    let mut channels = vec![LEADER_INFO_CHANNEL];
    if listening.cache.is_some() {
        channels.push(OPERATIONS_CHANNEL);
    }
    let mut link = pg.link.state.subscribe();
    tokio::spawn(async move {
        while !pool.is_closed() {
            link.borrow_and_update();
            match PgListener::connect_with(&pool).await {
                Ok(mut listener) => {
                    // A lost connection is answered at once (`Ok(None)`) and made again
                    // here, so that the cache is off exactly until the LISTEN is back.
                    listener.eager_reconnect(false);
                    match listener.listen_all(channels.iter().copied()).await {
                        Ok(()) => {
                            listening.up();
                            let lost = loop {
                                tokio::select! {
                                    got = listener.try_recv() => match got {
                                        Ok(Some(n)) => listening.heard(n.channel(), n.payload()),
                                        Ok(None) => break None,
                                        Err(_) if pool.is_closed() => break None,
                                        Err(e) => break Some(e),
                                    },
                                    changed = link.changed() => {
                                        if changed.is_err() {
                                            break None;
                                        }
                                        tracing::info!("the PostgreSQL server changed: LISTEN again");
                                        break None;
                                    }
                                }
                            };
                            listening.down();
                            drop(listener);
                            if pool.is_closed() {
                                return;
                            }
                            match lost {
                                None => {
                                    tracing::warn!("LISTEN connection lost: connecting again");
                                    continue;
                                }
                                Some(e) => {
                                    pg.link.saw(&e);
                                    tracing::warn!(error = %e, "LISTEN for changes failed");
                                }
                            }
                        }
                        Err(e) => {
                            listening.down();
                            pg.link.saw(&e);
                            tracing::warn!(error = %e, "LISTEN for changes failed")
                        }
                    }
                }
                Err(_) if pool.is_closed() => return,
                Err(e) => {
                    listening.down();
                    pg.link.saw(&e);
                    tracing::warn!(error = %e, "LISTEN for changes: no connection")
                }
            }
            tokio::time::sleep(LISTEN_RETRY).await;
        }
    });
}
