//! `abridge ui`, and the dashboard `abridge serve` mounts at `/ui`.

use std::io::Write;
use std::net::SocketAddr;
use std::process::ExitCode;

use abridge_store::{PgStore, SnapshotStore, Store};
use abridge_ui::Ui;
use anyhow::{Context, Result, bail};
use clap::Args;

use crate::snapshots::Location;

/// Arguments of `abridge ui`.
#[derive(Debug, Args)]
pub(crate) struct UiArgs {
    /// The snapshot store: a SQLite file (default: the user's data
    /// directory) or postgres://user@host:port/db.
    #[arg(long, value_name = "PATH")]
    store: Option<String>,
    /// Address to listen on; beyond loopback it needs ABRIDGE_UI_TOKEN.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8788")]
    listen: SocketAddr,
    /// A name the dashboard answers to besides IP addresses and localhost
    /// (repeat for several): requests naming any other host get 421.
    #[arg(long = "allowed-host", value_name = "NAME")]
    allowed_hosts: Vec<String>,
}

/// Opens a store for reading, SQLite or PostgreSQL (inside a runtime).
pub(crate) async fn open(store: Option<&str>) -> Result<Box<dyn SnapshotStore + Send>> {
    Ok(
        match Location::of(store).context("no data directory; pass --store PATH")? {
            Location::Postgres(url) => Box::new(PgStore::connect(&url).await?),
            Location::File(path) => Box::new(Store::open(&path)?),
        },
    )
}

/// The token to ask for: `configured`, else `ABRIDGE_UI_TOKEN`; an error
/// when `addr` is beyond loopback and there is none.
pub(crate) fn token(configured: Option<String>, addr: SocketAddr) -> Result<Option<String>> {
    let token = configured
        .or_else(|| std::env::var("ABRIDGE_UI_TOKEN").ok())
        .filter(|t| !t.is_empty());
    if token.is_none() && !addr.ip().is_loopback() {
        bail!(
            "the dashboard on {addr} would be reachable beyond this machine: set ABRIDGE_UI_TOKEN (or [serve] ui_token), or listen on 127.0.0.1"
        );
    }
    Ok(token)
}

/// The address to open, with the token when there is one.
pub(crate) fn address(addr: SocketAddr, token: Option<&str>) -> String {
    match token {
        Some(_) => format!("http://{addr}/ui?token=…"),
        None => format!("http://{addr}/ui"),
    }
}

pub(crate) fn run(args: &UiArgs, out: &mut dyn Write) -> Result<ExitCode> {
    let token = token(None, args.listen)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the runtime")?;
    runtime.block_on(async {
        let store = open(args.store.as_deref()).await?;
        let listener = tokio::net::TcpListener::bind(args.listen)
            .await
            .with_context(|| format!("cannot listen on {}", args.listen))?;
        let addr = listener.local_addr()?;
        writeln!(out, "abridge ui: {}", address(addr, token.as_deref()))?;
        out.flush()?;
        let app = abridge_proxy::guard_host(
            abridge_ui::router(Ui::new(store, token)),
            &args.allowed_hosts,
        );
        axum::serve(listener, app)
            .with_graceful_shutdown(crate::signal::shutdown())
            .await
            .context("the dashboard stopped")?;
        Ok::<_, anyhow::Error>(())
    })?;
    Ok(ExitCode::SUCCESS)
}
