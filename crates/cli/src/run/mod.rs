//! `abridge run <agent>`: the agent behind abridge in one command. A proxy
//! starts in this process on a free loopback port (or a running one is
//! used, `--proxy URL`), the agent is pointed at it the way it documents
//! (see `recipes`), runs with the terminal, and the proxy stops after it;
//! what the run sent, forwarded and cost is said on exit.

mod child;
mod recipes;
mod report;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use abridge_proxy::{Proxy, ProxyConfig};
use anyhow::{Context, Result, bail};
use clap::Args;

use crate::serve::ProxyArgs;
use abridge::model::Provider;
use recipes::{Environment, Launch, ProcessEnv};

/// Arguments of `abridge run`.
#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// The agent: a recipe's name (`--list` shows them). With `--api`,
    /// leave it out and give the command after `--`.
    agent: Option<String>,
    /// The agent's own arguments, after `--`.
    #[arg(last = true, value_name = "ARGS")]
    args: Vec<String>,
    /// The recipes, and which agents are installed.
    #[arg(long, conflicts_with_all = ["agent", "status", "api"])]
    list: bool,
    /// Every run going on, with its figures so far (from another terminal).
    #[arg(long, conflicts_with_all = ["agent", "api"])]
    status: bool,
    /// Any other agent: set the variables SDKs read for this API
    /// (openai: OPENAI_BASE_URL and OPENAI_API_BASE; anthropic:
    /// ANTHROPIC_BASE_URL; gemini: GOOGLE_GEMINI_BASE_URL) and run the
    /// command after `--`.
    #[arg(long, value_name = "API", value_parser = provider_names(), conflicts_with = "agent")]
    api: Option<Provider>,
    /// Use the proxy running at this address (a team's `abridge serve`)
    /// instead of starting one.
    #[arg(long = "proxy", value_name = "URL")]
    proxy_url: Option<String>,
    /// Also write the exit summary as JSON to this file.
    #[arg(long, value_name = "FILE")]
    summary: Option<PathBuf>,
    /// The proxy's log lines go to this file (with RUST_LOG set and no
    /// file: to stderr, the agent's terminal).
    #[arg(long, value_name = "FILE")]
    log: Option<PathBuf>,
    #[command(flatten)]
    proxy: ProxyArgs,
}

/// What to start: its name, its program and its arguments, and how it is
/// pointed at a proxy.
struct Target {
    name: String,
    program: PathBuf,
    args: Vec<String>,
    how: How,
}

/// How a target is pointed at a proxy.
enum How {
    Recipe(&'static recipes::Recipe),
    Generic(Provider),
}

impl Target {
    /// Its launch for a proxy at `root`.
    fn launch(&self, root: &str) -> Result<Launch> {
        match self.how {
            How::Recipe(r) => r.launch(root, &ProcessEnv),
            How::Generic(api) => Ok(recipes::launch_generic(api, root, &ProcessEnv)),
        }
    }
}

impl Target {
    fn of(args: &RunArgs, env: &dyn Environment) -> Result<Target> {
        if let Some(api) = args.api {
            let Some((command, rest)) = args.args.split_first() else {
                bail!(
                    "abridge run --api {api:?}: give the command after --, e.g. abridge run --api openai -- python agent.py"
                );
            };
            return Ok(Target {
                name: command.clone(),
                program: program(command, env)?,
                args: rest.to_vec(),
                how: How::Generic(api),
            });
        }
        let Some(name) = &args.agent else {
            bail!(
                "abridge run: name an agent (abridge run --list shows them), or give --api and a command after --"
            );
        };
        let Some(recipe) = recipes::find(name) else {
            bail!(
                "abridge run: no recipe for {name:?} (abridge run --list shows them); for any other agent, abridge run --api openai|anthropic|gemini -- COMMAND"
            );
        };
        let program = recipes::on_path(recipe.program, env)
            .with_context(|| format!("{} ({}) is not on PATH", recipe.title, recipe.program))?;
        Ok(Target {
            name: recipe.name.to_owned(),
            program,
            args: args.args.clone(),
            how: How::Recipe(recipe),
        })
    }
}

/// `command` as given when it has a slash, else found on `PATH`.
fn program(command: &str, env: &dyn Environment) -> Result<PathBuf> {
    if command.contains(std::path::MAIN_SEPARATOR) || command.contains('/') {
        return Ok(PathBuf::from(command));
    }
    recipes::on_path(command, env).with_context(|| format!("{command} is not on PATH"))
}

pub(crate) fn run(args: &RunArgs, out: &mut dyn Write) -> Result<ExitCode> {
    if args.list {
        return list(out);
    }
    if args.status {
        report::status(out)?;
        return Ok(ExitCode::SUCCESS);
    }
    init_logging(args.log.as_deref())?;
    let target = Target::of(args, &ProcessEnv)?;
    match &args.proxy_url {
        Some(url) => through(args, &target, url.trim_end_matches('/')),
        None => in_process(args, &target),
    }
}

fn list(out: &mut dyn Write) -> Result<ExitCode> {
    for r in recipes::RECIPES {
        let installed = recipes::on_path(r.program, &ProcessEnv)
            .map_or_else(|| "not installed".to_owned(), |p| p.display().to_string());
        writeln!(out, "{:<10}{} ({installed})", r.name, r.title)?;
        writeln!(out, "{:<10}pointed with {}", "", r.how)?;
        if let Some(v) = r.tested {
            writeln!(out, "{:<10}tested with {v}", "")?;
        }
    }
    writeln!(
        out,
        "any other agent: abridge run --api openai|anthropic|gemini -- COMMAND [ARGS]"
    )?;
    Ok(ExitCode::SUCCESS)
}

/// Log lines to `file`, or to stderr when `RUST_LOG` asks for them: by
/// default the proxy says nothing into the agent's terminal.
fn init_logging(file: Option<&std::path::Path>) -> Result<()> {
    let filter = || {
        tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
            tracing_subscriber::EnvFilter::new("abridge=info,abridge_proxy=info,warn")
        })
    };
    match file {
        Some(path) => {
            let f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("cannot open {}", path.display()))?;
            let _ = tracing_subscriber::fmt()
                .with_env_filter(filter())
                .with_ansi(false)
                .with_writer(std::sync::Mutex::new(f))
                .try_init();
        }
        None if std::env::var_os("RUST_LOG").is_some() => {
            let _ = tracing_subscriber::fmt()
                .with_env_filter(filter())
                .with_writer(std::io::stderr)
                .try_init();
        }
        None => {}
    }
    Ok(())
}

/// The providers by name, for `--api`.
fn provider_names() -> impl clap::builder::TypedValueParser<Value = Provider> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(Provider::ALL.map(Provider::as_str))
        .try_map(|name| name.parse::<Provider>())
}

/// The proxy's config: the file's (or the defaults), with the upstreams
/// the user's own settings named where no flag names one.
fn config(args: &RunArgs, launch: &Launch) -> Result<ProxyConfig> {
    let mut config = args.proxy.config()?;
    for (api, url) in &launch.upstreams {
        if args.proxy.upstream(*api).is_none() {
            *config.serve.upstream_mut(*api) = url.clone();
        }
    }
    Ok(config)
}

/// Runs the agent behind a proxy started here.
fn in_process(args: &RunArgs, target: &Target) -> Result<ExitCode> {
    let started = Instant::now();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the runtime")?;
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .context("cannot listen on 127.0.0.1")?;
    let root = format!("http://{}", listener.local_addr()?);
    let launch = target.launch(&root)?;
    let config = config(args, &launch)?;
    let source = format!("run {}", target.name);
    let proxy = runtime.block_on(async {
        let store = args.proxy.open_store(&source).await?;
        let proxy = Proxy::new(config, store)?;
        proxy.warm_up().await;
        Ok::<_, anyhow::Error>(proxy)
    })?;
    let totals = proxy.totals();
    let status = {
        let (totals, agent, root) = (totals.clone(), target.name.clone(), root.clone());
        move || report::Status {
            agent: agent.clone(),
            pid: std::process::id(),
            proxy: root.clone(),
            seconds: started.elapsed().as_secs_f64(),
            summary: totals.sum(),
        }
    };
    let routes = {
        let status = status.clone();
        axum::Router::new().route(
            report::STATUS_PATH,
            axum::routing::get(move || {
                let body = serde_json::to_string(&status()).unwrap_or_default();
                async move { ([("content-type", "application/json")], body) }
            }),
        )
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = runtime.spawn(proxy.serve_with(listener, routes, async {
        let _ = stopped.await;
    }));
    let registered = report::register(&root);
    let mut pre = launch.args.clone();
    pre.extend(target.args.iter().cloned());
    let exit = child::run(&target.program, &pre, &launch.env);
    // The agent is done (or never started): the proxy finishes what it
    // holds and stops.
    let _ = stop.send(());
    match runtime.block_on(served) {
        Ok(Err(e)) => eprintln!("abridge run: the proxy stopped with an error: {e}"),
        Err(e) => eprintln!("abridge run: the proxy stopped with an error: {e}"),
        Ok(Ok(())) => {}
    }
    drop(registered);
    drop(launch);
    let exit = exit?;
    finish(args, &status(), &exit)?;
    Ok(ExitCode::from(child::code(exit)))
}

/// The summary on stderr, and as JSON where asked.
fn finish(args: &RunArgs, s: &report::Status, exit: &std::process::ExitStatus) -> Result<()> {
    let how = match exit.code() {
        Some(c) => format!("exited with {c}"),
        None => format!("ended by a signal (exit code {})", child::code(*exit)),
    };
    report::print(&mut std::io::stderr().lock(), s, &how)?;
    if let Some(path) = &args.summary {
        let text = serde_json::to_string_pretty(s)?;
        std::fs::write(path, text + "\n")
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

/// Runs the agent through a proxy already running at `url`: the figures
/// are what its `/metrics` gained during the run (every client's).
fn through(args: &RunArgs, target: &Target, url: &str) -> Result<ExitCode> {
    let started = Instant::now();
    let launch = target.launch(url)?;
    for (api, theirs) in &launch.upstreams {
        eprintln!(
            "abridge run: the proxy at {url} forwards {api} requests to its own upstream, not to {theirs}"
        );
    }
    let before =
        remote::totals(url).with_context(|| format!("no abridge proxy answers at {url}"))?;
    let mut pre = launch.args.clone();
    pre.extend(target.args.iter().cloned());
    let exit = child::run(&target.program, &pre, &launch.env)?;
    let after = remote::totals(url).unwrap_or_else(|_| before.clone());
    let s = report::Status {
        agent: format!(
            "{} (the figures are every client's of {url} during the run)",
            target.name
        ),
        pid: std::process::id(),
        proxy: url.to_owned(),
        seconds: started.elapsed().as_secs_f64(),
        summary: remote::difference(&before, &after),
    };
    drop(launch);
    finish(args, &s, &exit)?;
    Ok(ExitCode::from(child::code(exit)))
}

mod remote {
    //! A running proxy's figures, from its `/metrics`.

    use std::time::Duration;

    use abridge_proxy::Summary;
    use abridge_store::Totals;
    use anyhow::{Context, Result};

    /// The sums `/metrics` at `url` shows now.
    pub(super) fn totals(url: &str) -> Result<Summary> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("cannot start the runtime")?;
        let http = abridge_llm::client_builder()
            .timeout(Duration::from_secs(5))
            .build()?;
        let text = runtime.block_on(async {
            http.get(format!("{url}/metrics"))
                .send()
                .await?
                .error_for_status()?
                .text()
                .await
        })?;
        let sum = |name: &str, skip: Option<&str>| -> f64 {
            text.lines()
                .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
                .filter(|l| skip.is_none_or(|s| !l.contains(s)))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum()
        };
        let int = |name: &str| sum(name, None).max(0.0) as u64;
        Ok(Summary {
            totals: Totals {
                requests: int("abridge_accounted_requests_total"),
                compared: int("abridge_compared_requests_total"),
                client_tokens: int("abridge_client_tokens_total"),
                forwarded_tokens: int("abridge_forwarded_tokens_total"),
                cost: sum("abridge_cost_dollars_total", None),
                cost_compared: sum("abridge_cost_compared_dollars_total", None),
                cost_without: sum("abridge_cost_without_dollars_total", None),
                over_window: int("abridge_over_window_requests_total"),
                ..Totals::default()
            },
            compactions: sum("abridge_compactions_total", Some("reason=\"continued\"")) as u64,
            recall_rounds: int("abridge_recall_rounds_total"),
        })
    }

    /// What `after` gained over `before`.
    pub(super) fn difference(before: &Summary, after: &Summary) -> Summary {
        let (b, a) = (&before.totals, &after.totals);
        Summary {
            totals: Totals {
                requests: a.requests.saturating_sub(b.requests),
                client_tokens: a.client_tokens.saturating_sub(b.client_tokens),
                forwarded_tokens: a.forwarded_tokens.saturating_sub(b.forwarded_tokens),
                cost: a.cost - b.cost,
                compared: a.compared.saturating_sub(b.compared),
                cost_compared: a.cost_compared - b.cost_compared,
                cost_without: a.cost_without - b.cost_without,
                over_window: a.over_window.saturating_sub(b.over_window),
                ..Totals::default()
            },
            compactions: after.compactions.saturating_sub(before.compactions),
            recall_rounds: after.recall_rounds.saturating_sub(before.recall_rounds),
        }
    }
}
