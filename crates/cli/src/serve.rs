//! `abridge serve`: the proxy for the OpenAI (Chat Completions, Responses) and Anthropic (Messages) APIs.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use abridge::model::Provider;
use abridge_proxy::{Proxy, ProxyConfig};
use abridge_store::{PgStore, SessionStore, Store};
use anyhow::{Context, Result};

use crate::snapshots::Location;
use clap::Args;

/// Arguments of `abridge serve`.
#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// Address to listen on (overrides `[serve] listen`; default 127.0.0.1:8787).
    #[arg(long, value_name = "ADDR")]
    listen: Option<SocketAddr>,
    #[command(flatten)]
    proxy: ProxyArgs,
    /// A name the proxy answers to besides IP addresses and localhost
    /// (repeat for several; added to `[serve] allowed_hosts`).
    #[arg(long = "allowed-host", value_name = "NAME")]
    allowed_hosts: Vec<String>,
}

/// What a proxy is made of: its config, its upstreams and its store
/// (`abridge serve`, and the one `abridge run` starts).
#[derive(Debug, Clone, Args)]
pub(crate) struct ProxyArgs {
    /// Config file: triggers, budgets, policies, `[[summarizers]]` and `[serve]`.
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// Start from a seed system's settings (the config file's keys still win).
    #[arg(long, value_name = "NAME", value_parser = crate::engine_args::preset_names())]
    pub(crate) preset: Option<String>,
    /// OpenAI-compatible upstream, ending in /v1 (default https://api.openai.com/v1).
    #[arg(long, value_name = "URL")]
    pub(crate) openai_upstream: Option<String>,
    /// Anthropic upstream, the host root (default https://api.anthropic.com).
    #[arg(long, value_name = "URL")]
    pub(crate) anthropic_upstream: Option<String>,
    /// Gemini API upstream, the host root (default
    /// https://generativelanguage.googleapis.com; empty: Gemini requests are refused).
    #[arg(long, value_name = "URL")]
    pub(crate) gemini_upstream: Option<String>,
    /// Where sessions and snapshots are kept: a SQLite file (default: the
    /// user's data directory), or postgres://user@host:port/db, shared by
    /// several replicas.
    #[arg(long, value_name = "PATH", conflicts_with = "no_store")]
    pub(crate) store: Option<String>,
    /// Keep sessions in memory only and record no snapshots.
    #[arg(long)]
    pub(crate) no_store: bool,
}

impl ProxyArgs {
    /// The config file's settings (or the defaults) with the upstreams given.
    pub(crate) fn config(&self) -> Result<ProxyConfig> {
        let mut config = match (&self.config, &self.preset) {
            (None, None) => ProxyConfig::default(),
            (path, preset) => {
                let text = match path {
                    Some(path) => std::fs::read_to_string(path)
                        .with_context(|| format!("cannot read {}", path.display()))?,
                    None => String::new(),
                };
                let text = abridge::preset::named(&text, preset.as_deref())?;
                ProxyConfig::from_toml(&text).with_context(|| match path {
                    Some(path) => path.display().to_string(),
                    None => "--preset".to_owned(),
                })?
            }
        };
        for p in Provider::ALL {
            if let Some(u) = self.upstream(p) {
                *config.serve.upstream_mut(p) = u.clone();
            }
        }
        Ok(config)
    }

    /// The upstream a flag names for `provider`.
    pub(crate) fn upstream(&self, provider: Provider) -> Option<&String> {
        match provider {
            Provider::OpenAi => self.openai_upstream.as_ref(),
            Provider::Anthropic => self.anthropic_upstream.as_ref(),
            Provider::Gemini => self.gemini_upstream.as_ref(),
        }
    }

    /// The store sessions and snapshots go to (`None`: in memory).
    pub(crate) async fn open_store(&self, source: &str) -> Result<Option<Box<dyn SessionStore>>> {
        if self.no_store {
            return Ok(None);
        }
        match Location::of(self.store.as_deref())
            .context("no data directory; pass --store PATH or --no-store")?
        {
            Location::Postgres(url) => Ok(Some(Box::new(PgStore::connect(&url).await?))),
            Location::File(path) => Ok(Some(Box::new(Store::open(&path)?.with_source(source)))),
        }
    }
}

pub(crate) fn run(args: &ServeArgs, out: &mut dyn Write) -> Result<ExitCode> {
    let mut config = args.proxy.config()?;
    let serve = &mut config.serve;
    if let Some(l) = args.listen {
        serve.listen = l;
    }
    serve
        .allowed_hosts
        .extend(args.allowed_hosts.iter().cloned());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the runtime")?;
    // Before anything listens: a dashboard beyond loopback needs its token.
    let token = match args.proxy.no_store {
        true => None,
        false => crate::ui::token(config.serve.ui_token.clone(), config.serve.listen)
            .context("abridge serve would show every conversation to anyone who can reach it (or pass --no-store: no dashboard)")?,
    };
    runtime.block_on(async {
        let addr = config.serve.listen;
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("cannot listen on {addr}"))?;
        let addr = listener.local_addr()?;
        let store = args.proxy.open_store("serve").await?;
        let dashboard = dashboard(args, token).await?;
        let proxy = Proxy::new(config, store)?;
        // "Listening" once a request is as fast as the next one.
        proxy.warm_up().await;
        writeln!(
            out,
            "abridge serve: listening on http://{addr} (OpenAI SDKs: base URL http://{addr}/v1; Anthropic SDKs: http://{addr})"
        )?;
        let extra = match dashboard {
            Some((ui, token)) => {
                writeln!(out, "abridge serve: dashboard at {}", crate::ui::address(addr, token.as_deref()))?;
                abridge_ui::router(ui)
            }
            None => axum::Router::new(),
        };
        out.flush()?;
        proxy
            .serve_with(listener, extra, crate::signal::shutdown())
            .await
            .context("the proxy stopped")?;
        Ok::<_, anyhow::Error>(())
    })?;
    Ok(ExitCode::SUCCESS)
}

/// The dashboard over the proxy's store (a connection of its own), when
/// there is a store; else `None`.
async fn dashboard(
    args: &ServeArgs,
    token: Option<String>,
) -> Result<Option<(abridge_ui::Ui, Option<String>)>> {
    if args.proxy.no_store {
        return Ok(None);
    }
    let store = crate::ui::open(args.proxy.store.as_deref()).await?;
    Ok(Some((abridge_ui::Ui::new(store, token.clone()), token)))
}
