//! The database of one backend's run: created fresh, removed at the end (also after an
//! error, a panic or Ctrl-C, through the registry that `drop_leftovers` empties).

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use sqlx::Connection;

use crate::cli::{Args, Backend};
use crate::payloads::Rng;

/// Databases created and not yet removed, for the removal after an interruption.
static CREATED: std::sync::Mutex<Vec<Database>> = std::sync::Mutex::new(Vec::new());

#[derive(Clone)]
pub struct Database {
    pub backend: Backend,
    pub url: String,
    /// PostgreSQL: the admin URL and the database's name; SQLite: the folder.
    pg: Option<(String, String)>,
    dir: Option<PathBuf>,
}

impl Database {
    pub async fn create(args: &Args, backend: Backend) -> anyhow::Result<Database> {
        let tag = format!("{:08x}", Rng::seed() as u32);
        match backend {
            Backend::Postgres => {
                let name = format!("jobstore_bench_{tag}");
                let mut conn = sqlx::PgConnection::connect(&args.pg_url)
                    .await
                    .with_context(|| format!("connecting to {}", redact(&args.pg_url)))?;
                let mut url = reqwest::Url::parse(&args.pg_url)?;
                url.set_path(&format!("/{name}"));
                sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
                    .execute(&mut conn)
                    .await?;
                // Registered before anything else can fail or panic, so that it is dropped.
                let db = Database {
                    backend,
                    url: url.to_string(),
                    pg: Some((args.pg_url.clone(), name.clone())),
                    dir: None,
                }
                .registered();
                let _ = conn.close().await;
                println!("database: {name}");
                Ok(db)
            }
            Backend::Sqlite => {
                let dir = std::env::temp_dir().join(format!("jobstore-bench-{tag}"));
                std::fs::create_dir_all(&dir)?;
                let path = dir.join("bench.db");
                let db = Database {
                    backend,
                    url: format!("sqlite://{}", path.display()),
                    pg: None,
                    dir: Some(dir),
                }
                .registered();
                println!("database: {}", path.display());
                Ok(db)
            }
        }
    }

    /// PostgreSQL: the database's name (its backends' process titles carry it).
    pub fn pg_name(&self) -> Option<&str> {
        self.pg.as_ref().map(|(_, name)| name.as_str())
    }

    fn registered(self) -> Database {
        CREATED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(self.clone());
        self
    }

    pub async fn drop_it(&self) {
        CREATED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|d| d.url != self.url);
        if let Some((admin, name)) = &self.pg {
            match sqlx::PgConnection::connect(admin).await {
                Ok(mut conn) => {
                    let sql = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
                    if let Err(e) = sqlx::query(sqlx::AssertSqlSafe(sql))
                        .execute(&mut conn)
                        .await
                    {
                        eprintln!("could not drop database {name}: {e}");
                    } else {
                        // Not println!: this also runs after stdout was closed (`| head`).
                        let _ = writeln!(std::io::stdout(), "dropped database {name}");
                    }
                    let _ = conn.close().await;
                }
                Err(e) => eprintln!("could not drop database {name}: {e}"),
            }
        }
        if let Some(dir) = &self.dir {
            match std::fs::remove_dir_all(dir) {
                Ok(()) => {
                    let _ = writeln!(std::io::stdout(), "removed {}", dir.display());
                }
                Err(e) => eprintln!("could not remove {}: {e}", dir.display()),
            }
        }
    }
}

/// Removes the databases still registered (after an interruption or a panic).
pub async fn drop_leftovers() {
    let left: Vec<Database> =
        std::mem::take(&mut *CREATED.lock().unwrap_or_else(|e| e.into_inner()));
    for db in left {
        db.drop_it().await;
    }
}

/// The URL with its password hidden, for messages.
fn redact(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("***"));
            u.to_string()
        }
        _ => url.to_owned(),
    }
}
