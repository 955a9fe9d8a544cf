//! `jobstore serve` (the HTTP API and the savepoint executor until SIGTERM/SIGINT) and
//! `jobstore gc` (the retention, once).

use std::net::SocketAddr;
use std::time::Duration;

use clap::Args;
use tokio_util::sync::CancellationToken;

use crate::config::{DatabaseArgs, LogFormat};
use crate::executor::{self, ExecutorConfig};
use crate::flink::AllowedHosts;
use crate::http::auth::Tokens;
use crate::http::{AppState, HttpConfig};
use crate::http_server::ServerLimits;
use crate::ids::{ClusterId, FlinkRestUrl};
use crate::store::{self, ClusterConfig, ConfiguredBy};

#[derive(Args, Debug, Clone)]
pub struct GcArgs {
    #[command(flatten)]
    pub db: DatabaseArgs,
    /// Remove clean job and application results cleaned longer ago than this.
    #[arg(long, env = "JOBSTORE_CLEAN_RETENTION", value_parser = humantime::parse_duration)]
    pub clean_retention: Option<Duration>,
    /// Remove completed savepoint operations completed longer ago than this.
    #[arg(long, env = "JOBSTORE_OPERATION_RETENTION", default_value = "7d", value_parser = humantime::parse_duration)]
    pub operation_retention: Duration,
}

#[derive(Args, Debug, Clone)]
pub struct ServeArgs {
    #[command(flatten)]
    pub db: DatabaseArgs,
    /// Address to listen on.
    #[arg(long, env = "JOBSTORE_LISTEN", default_value = "127.0.0.1:8090")]
    pub listen: SocketAddr,
    /// One more listener whose un-prefixed Flink routes (`/jobs/...`, `/v1/jobs/...`,
    /// `/savepoint-disposal`) act on CLUSTER instead of --cluster-id: `CLUSTER=ADDRESS`
    /// (`prod-eu=0.0.0.0:8091`), repeatable (comma-separated in the environment). Flink's own
    /// CLI (`flink savepoint -m HOST:PORT`) then reaches any cluster.
    #[arg(long, env = "JOBSTORE_CLUSTER_LISTEN", value_delimiter = ',', value_parser = parse_cluster_listen)]
    pub cluster_listen: Vec<(ClusterId, SocketAddr)>,
    /// The cluster the un-prefixed Flink routes (`/jobs/...`) act on.
    #[arg(long, env = "JOBSTORE_CLUSTER_ID", default_value = "default")]
    pub cluster_id: String,
    /// Mark-clean deletes the entry instead of keeping it clean (Flink's delete-on-commit).
    #[arg(long, env = "JOBSTORE_DELETE_ON_COMMIT")]
    pub delete_on_commit: bool,
    /// Largest request body, in bytes (413 beyond).
    #[arg(long, env = "JOBSTORE_BODY_LIMIT", default_value_t = 1024 * 1024)]
    pub body_limit: usize,
    /// A connection that has not delivered a whole first request head this long after it was
    /// accepted is closed (whether it sent a byte or not); a later HTTP/1 request head must
    /// be complete this long after the previous answer.
    #[arg(long, env = "JOBSTORE_HEADER_READ_TIMEOUT", default_value = "10s", value_parser = humantime::parse_duration)]
    pub header_read_timeout: Duration,
    /// A connection with no request in flight this long after its last answer is closed
    /// (HTTP/1 keep-alive and HTTP/2; HTTP/2 connections are also pinged every 20s).
    #[arg(long, env = "JOBSTORE_IDLE_TIMEOUT", default_value = "60s", value_parser = humantime::parse_duration)]
    pub idle_timeout: Duration,
    /// On SIGTERM/SIGINT, requests in flight have this long to finish; connections still
    /// open then are dropped, and the process exits 0.
    #[arg(long, env = "JOBSTORE_SHUTDOWN_TIMEOUT", default_value = "30s", value_parser = humantime::parse_duration)]
    pub shutdown_timeout: Duration,
    /// Open client connections at most; new ones past it are closed at once.
    #[arg(long, env = "JOBSTORE_MAX_CONNECTIONS", default_value_t = 4096)]
    pub max_connections: usize,
    /// A request that takes longer is answered 408.
    #[arg(long, env = "JOBSTORE_REQUEST_TIMEOUT", default_value = "30s", value_parser = humantime::parse_duration)]
    pub request_timeout: Duration,
    /// Default savepoint directory of the default cluster (unless set with PUT /v1/clusters/{cluster}).
    #[arg(long, env = "JOBSTORE_SAVEPOINT_DIR")]
    pub savepoint_dir: Option<String>,
    /// Flink REST URL of the default cluster: this service then drives its savepoints there.
    #[arg(long, env = "JOBSTORE_FLINK_REST_URL")]
    pub flink_rest_url: Option<String>,
    /// Completed savepoint operations are removed this long after completion.
    #[arg(long, env = "JOBSTORE_OPERATION_RETENTION", default_value = "7d", value_parser = humantime::parse_duration)]
    pub operation_retention: Duration,
    /// Remove clean job and application results this long after they were cleaned (off by
    /// default: entries are kept for inspection).
    #[arg(long, env = "JOBSTORE_CLEAN_RETENTION", value_parser = humantime::parse_duration)]
    pub clean_retention: Option<Duration>,
    /// An operation not completed this long after its trigger fails as timed out.
    #[arg(long, env = "JOBSTORE_OPERATION_TIMEOUT", default_value = "1h", value_parser = humantime::parse_duration)]
    pub operation_timeout: Duration,
    /// First pause before a failed scheduled savepoint (or checkpoint) or a failed
    /// disposal is tried again; doubled at each retry, 8 retries at most.
    #[arg(long, env = "JOBSTORE_RETRY_BACKOFF", default_value = "30s", value_parser = humantime::parse_duration)]
    pub retry_backoff: Duration,
    /// Pause between polls of Flink's savepoint status.
    #[arg(long, env = "JOBSTORE_POLL_INTERVAL", default_value = "500ms", value_parser = humantime::parse_duration)]
    pub poll_interval: Duration,
    /// How long an executor holds an operation without renewing its lease.
    #[arg(long, env = "JOBSTORE_LEASE", default_value = "30s", value_parser = humantime::parse_duration)]
    pub lease: Duration,
    /// Timeout of one request to Flink.
    #[arg(long, env = "JOBSTORE_FLINK_TIMEOUT", default_value = "10s", value_parser = humantime::parse_duration)]
    pub flink_timeout: Duration,
    /// The hosts Flink REST URLs may name, comma-separated host names, IP addresses and CIDR
    /// networks (e.g. `jobmanager,10.0.0.0/8,127.0.0.1`); a host name not listed is allowed
    /// when every address it resolves to is. Checked at PUT /v1/clusters/{cluster} and at
    /// every request to Flink. Empty: any host (a warning is logged at start).
    #[arg(long, env = "JOBSTORE_FLINK_ALLOWED_HOSTS", default_value = "", value_parser = parse_allowed_hosts)]
    pub flink_allowed_hosts: AllowedHosts,
    /// Largest answer read from Flink, in bytes; a larger one completes the operation with
    /// a failure-cause that says so.
    #[arg(long, env = "JOBSTORE_FLINK_MAX_ANSWER", default_value_t = crate::flink::DEFAULT_MAX_ANSWER)]
    pub flink_max_answer: usize,
    /// Do not drive savepoints on Flink from this process (another replica or an outside
    /// executor does).
    #[arg(long, env = "JOBSTORE_NO_EXECUTOR")]
    pub no_executor: bool,
    /// Bearer tokens, one `SCOPE TOKEN` or `SCOPE CLUSTERS TOKEN` per line (scope `read`,
    /// `write` or `admin`; CLUSTERS: comma-separated cluster-id patterns, `*` any run of
    /// characters). Tokens may also come from
    /// JOBSTORE_TOKENS="read:TOKEN,write:prod-*|stage-*:TOKEN". None: auth is off.
    #[arg(long, env = "JOBSTORE_TOKENS_FILE")]
    pub tokens_file: Option<std::path::PathBuf>,
    /// Log format: readable text or one JSON object per line.
    #[arg(long, env = "JOBSTORE_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// How often to ask PostgreSQL whether a standby confirms commits synchronously
    /// (`/readyz`'s `database`, the `jobstore_db_*` metrics); also checked at start.
    #[arg(long, env = "JOBSTORE_REPLICATION_CHECK_INTERVAL", default_value = "2s", value_parser = humantime::parse_duration)]
    pub replication_check_interval: Duration,
    /// Most completed savepoint operations kept in memory for status polls, per process
    /// (least recently used go first; 0: every poll reads the database). Kept coherent
    /// across replicas by PostgreSQL LISTEN/NOTIFY.
    #[arg(long, env = "JOBSTORE_OPERATION_CACHE_SIZE", default_value_t = store::DEFAULT_OPERATION_CACHE_SIZE as u32, value_parser = clap::value_parser!(u32).range(0..=10_000_000))]
    pub operation_cache_size: u32,
    /// Refuse HA writes (non-GET requests under /v1/clusters/{cluster}/ha) with 503 while no
    /// synchronous standby confirms commits; reads go on. PostgreSQL only.
    #[arg(long, env = "JOBSTORE_REQUIRE_SYNCHRONOUS_REPLICATION")]
    pub require_synchronous_replication: bool,
}

fn parse_cluster_listen(text: &str) -> Result<(ClusterId, SocketAddr), String> {
    let (cluster, address) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?} is not CLUSTER=ADDRESS"))?;
    let cluster = cluster
        .parse()
        .map_err(|e| format!("cluster id {cluster:?}: it {e}"))?;
    let address = address
        .parse()
        .map_err(|e| format!("address {address:?}: {e}"))?;
    Ok((cluster, address))
}

fn parse_allowed_hosts(list: &str) -> Result<AllowedHosts, String> {
    AllowedHosts::parse(list)
}

/// How long closing the database pools may take after the server stopped.
const STORE_CLOSE_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs the service until SIGTERM or SIGINT, then finishes the requests in flight.
pub async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    // Before the store: a malformed tokens line stops the start without touching anything.
    let tokens = load_tokens(args.tokens_file.as_deref())?;
    let store_config = store::StoreConfig {
        operation_cache: args.operation_cache_size as usize,
        ..args.db.store_config(true)
    };
    tracing::info!(database = %store::redact_url(&store_config.url), "opening the store");
    let (store, database) = store::open_watched(&store_config).await?;
    if args.require_synchronous_replication && !database.is_postgres() {
        anyhow::bail!(
            "--require-synchronous-replication needs PostgreSQL: a SQLite database has no standby"
        );
    }
    if args.replication_check_interval.is_zero() {
        anyhow::bail!("--replication-check-interval must be longer than 0");
    }
    // What the database promises, before the first request (warns when standbys exist
    // and none is synchronous).
    let status = database.check().await;
    if args.require_synchronous_replication && !status.is_synchronous() {
        tracing::warn!(
            replication = status.replication.as_str(),
            detail = %status.detail,
            "--require-synchronous-replication: HA writes are answered 503 until a synchronous standby confirms commits"
        );
    }
    let default_cluster: ClusterId = args
        .cluster_id
        .parse()
        .map_err(|e| anyhow::anyhow!("--cluster-id {:?}: it {e}", args.cluster_id))?;
    let flink_rest_url = match &args.flink_rest_url {
        Some(url) => {
            let url: FlinkRestUrl = url
                .parse()
                .map_err(|e| anyhow::anyhow!("--flink-rest-url {e}"))?;
            args.flink_allowed_hosts
                .check_url(url.as_str())
                .await
                .map_err(|e| anyhow::anyhow!("--flink-rest-url: {e}"))?;
            Some(url)
        }
        None => None,
    };
    if args.flink_allowed_hosts.is_empty() && !args.no_executor {
        tracing::warn!(
            "--flink-allowed-hosts is empty: the executor sends requests to whatever host a cluster's flink-rest-url names, so every write-token holder can make this process send HTTP requests to any address it reaches (list Flink's hosts or networks)"
        );
    }
    // The default cluster follows the flags, unless a PUT configured it.
    let flags = ClusterConfig {
        cluster_id: default_cluster.clone(),
        flink_rest_url,
        savepoint_directory: args.savepoint_dir.clone().filter(|d| !d.is_empty()),
    };
    // Replicas started with other flags take turns: the last one started wins (a rolling
    // restart with new flags converges); each one that overrides says so.
    let stored = store.get_cluster(&default_cluster).await?;
    if let Some(applied) = store.put_cluster(&flags, ConfiguredBy::Flags).await? {
        warn_flags_override(stored.as_ref(), &applied);
    } else {
        tracing::info!(cluster = %default_cluster, "the default cluster was configured through PUT; --flink-rest-url and --savepoint-dir are not applied");
    }
    if tokens.is_empty() {
        if !args.listen.ip().is_loopback() {
            tracing::warn!(listen = %args.listen, "no tokens configured: every client that reaches this address can read and write (set --tokens-file or JOBSTORE_TOKENS)");
        }
    } else {
        tracing::info!(
            tokens = tokens.len(),
            cluster_limited = tokens.limited(),
            "bearer-token auth is on"
        );
    }
    let state = AppState::new(
        store.clone(),
        HttpConfig {
            delete_on_commit: args.delete_on_commit,
            body_limit: args.body_limit,
            request_timeout: args.request_timeout,
            default_cluster,
            tokens,
            flink_allowed_hosts: args.flink_allowed_hosts.clone(),
            require_synchronous_replication: args.require_synchronous_replication,
        },
    )
    .with_database(database.clone());
    for collector in store.collectors() {
        state.metrics.registry.register(collector)?;
    }
    let shutdown = CancellationToken::new();
    if database.is_postgres() {
        let metrics = state.metrics.clone();
        tokio::spawn(store::replication::check_periodically(
            database,
            args.replication_check_interval,
            shutdown.clone(),
            move |status| metrics.observe_database(status),
        ));
    }
    let executor = (!args.no_executor).then(|| {
        let config = ExecutorConfig {
            poll_interval: args.poll_interval,
            lease: args.lease,
            operation_timeout: args.operation_timeout,
            retention: args.operation_retention,
            clean_retention: args.clean_retention,
            metrics: state.metrics.clone(),
            flink_timeout: args.flink_timeout,
            flink_allowed_hosts: args.flink_allowed_hosts.clone(),
            flink_max_answer: args.flink_max_answer,
            retry_backoff: args.retry_backoff,
            ..ExecutorConfig::default()
        };
        tokio::spawn(executor::run(
            store.clone(),
            config,
            state.executor_wakeup.clone(),
            shutdown.clone(),
        ))
    });
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", args.listen))?;
    tracing::info!(listen = %listener.local_addr()?, "jobstore is serving");
    let stop = shutdown.clone();
    let limits = ServerLimits {
        header_read_timeout: args.header_read_timeout,
        idle_timeout: args.idle_timeout,
        shutdown_timeout: args.shutdown_timeout,
        max_connections: args.max_connections,
    };
    // The clusters' own listeners: the same service, another default cluster each.
    let mut cluster_servers = Vec::new();
    for (cluster, address) in &args.cluster_listen {
        let listener = tokio::net::TcpListener::bind(address).await.map_err(|e| {
            anyhow::anyhow!("cannot listen on {address} for cluster {cluster}: {e}")
        })?;
        tracing::info!(listen = %listener.local_addr()?, %cluster, "serving the Flink routes of a cluster");
        let mut config = (*state.config).clone();
        config.default_cluster = cluster.clone();
        let state = AppState {
            config: std::sync::Arc::new(config),
            ..state.clone()
        };
        let done = shutdown.clone();
        cluster_servers.push(tokio::spawn(crate::http_server::serve(
            listener,
            crate::http::router(state),
            limits,
            async move { done.cancelled().await },
        )));
    }
    crate::http_server::serve(listener, crate::http::router(state), limits, async move {
        shutdown_signal().await;
        stop.cancel();
    })
    .await?;
    shutdown.cancel();
    for server in cluster_servers {
        let _ = server.await;
    }
    if let Some(executor) = executor {
        let _ = executor.await;
    }
    // Closing the pools writes SQLite's WAL back into the database file, so that the file
    // alone holds every entry after a clean stop. Bounded: a request dropped at the shutdown
    // deadline may still hold a connection.
    if tokio::time::timeout(STORE_CLOSE_TIMEOUT, store.close())
        .await
        .is_err()
    {
        tracing::warn!(timeout = ?STORE_CLOSE_TIMEOUT, "the database connections did not close in time");
    }
    tracing::info!("stopped");
    Ok(())
}

/// Warns when this process's `--flink-rest-url`/`--savepoint-dir` replaced other values
/// that flags (another replica's, or an earlier start's) had stored for the default cluster.
fn warn_flags_override(stored: Option<&ClusterConfig>, applied: &ClusterConfig) {
    let Some(stored) = stored else { return };
    if (&stored.flink_rest_url, &stored.savepoint_directory)
        == (&applied.flink_rest_url, &applied.savepoint_directory)
    {
        return;
    }
    fn shown(v: Option<&impl ToString>) -> String {
        v.map_or_else(|| "(none)".to_owned(), ToString::to_string)
    }
    tracing::warn!(
        cluster = %applied.cluster_id,
        stored_flink_rest_url = %shown(stored.flink_rest_url.as_ref()),
        stored_savepoint_dir = %shown(stored.savepoint_directory.as_ref()),
        flink_rest_url = %shown(applied.flink_rest_url.as_ref()),
        savepoint_dir = %shown(applied.savepoint_directory.as_ref()),
        "the default cluster's settings stored by flags differ from this process's \
         --flink-rest-url/--savepoint-dir: this process's flags replace them (the last replica \
         started wins); start every replica with the same flags, or configure the cluster \
         with PUT /v1/clusters/{{cluster}}"
    );
}

/// The tokens of `--tokens-file` and `JOBSTORE_TOKENS`.
fn load_tokens(file: Option<&std::path::Path>) -> anyhow::Result<Tokens> {
    let mut tokens = Tokens::default();
    if let Some(path) = file {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("--tokens-file {}: {e}", path.display()))?;
        tokens = tokens.merge(
            Tokens::parse_file(&text, &path.display().to_string()).map_err(anyhow::Error::msg)?,
        );
    }
    if let Ok(text) = std::env::var("JOBSTORE_TOKENS") {
        tokens = tokens.merge(Tokens::parse_env(&text).map_err(anyhow::Error::msg)?);
    }
    Ok(tokens)
}

/// `jobstore gc`: the retention of `serve`, once.
pub async fn gc(args: GcArgs) -> anyhow::Result<()> {
    let store = store::open(&args.db.store_config(true)).await?;
    let report = executor::apply_retention(
        store.as_ref(),
        args.clean_retention,
        args.operation_retention,
    )
    .await;
    // SQLite: the write-ahead log back into the database file, also after a failure.
    store.close().await;
    let report = report?;
    println!(
        "removed {} clean job results, {} clean application results, {} completed savepoint operations",
        report.job_results, report.application_results, report.operations
    );
    Ok(())
}

async fn shutdown_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {},
        _ = term => {},
    }
    tracing::info!("shutting down: finishing requests in flight");
}
