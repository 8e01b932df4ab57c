//! What `abridge run` says it did: the summary at the agent's exit, the
//! status of every run going on (`abridge run --status`, from another
//! terminal: nothing is ever written into the agent's own), and the files
//! by which a run is found.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use abridge_proxy::Summary;
use abridge_store::Totals;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

/// The path a running `abridge run` answers its status on.
pub(crate) const STATUS_PATH: &str = "/_abridge/run";

/// What a run's status says.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Status {
    /// The agent (a recipe's name, or the command).
    pub(crate) agent: String,
    /// The `abridge run` process.
    pub(crate) pid: u32,
    /// Where its proxy listens.
    pub(crate) proxy: String,
    /// Seconds it has run.
    pub(crate) seconds: f64,
    /// Its figures.
    pub(crate) summary: Summary,
}

/// Writes the summary of `s` to `out` (stderr, after the agent is done).
pub(crate) fn print(out: &mut dyn Write, s: &Status, exit: &str) -> std::io::Result<()> {
    let t = &s.summary.totals;
    writeln!(
        out,
        "abridge run: {} {exit} after {}",
        s.agent,
        duration(s.seconds)
    )?;
    writeln!(
        out,
        "  requests {} · compactions {} · recall rounds {}",
        n(t.requests),
        n(s.summary.compactions),
        n(s.summary.recall_rounds)
    )?;
    writeln!(
        out,
        "  tokens sent by the agent {} · forwarded {}{}",
        n(t.client_tokens),
        n(t.forwarded_tokens),
        share(t)
    )?;
    writeln!(out, "  {}", dollars(t))?;
    Ok(())
}

fn share(t: &Totals) -> String {
    match t.client_tokens {
        0 => String::new(),
        c => format!(
            " ({:.1}% not sent)",
            100.0 * t.tokens_saved() as f64 / c as f64
        ),
    }
}

fn dollars(t: &Totals) -> String {
    let over = match t.over_window {
        0 => String::new(),
        k => format!(
            "; {k} request(s) over the model's window, unanswerable without abridge, not priced"
        ),
    };
    match t.compared {
        0 if t.requests > 0 => format!(
            "cost: no request priced (a model the registry prices, and its usage, are needed){over}"
        ),
        0 => "cost: no request yet".to_owned(),
        _ => format!(
            "cost ${:.4} with abridge · ${:.4} without (estimated, cache-aware; {} of {} requests priced){over}",
            t.cost_compared, t.cost_without, t.compared, t.requests
        ),
    }
}

fn n(v: u64) -> String {
    abridge_model::text::thousands(v)
}

fn duration(secs: f64) -> String {
    let s = secs.round() as u64;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s / 60) % 60),
    }
}

/// The directory runs register in: this user's runtime directory.
fn registry() -> PathBuf {
    let base = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    base.join(format!("abridge-run-{}", user()))
}

#[cfg(unix)]
fn user() -> u32 {
    rustix::process::getuid().as_raw()
}

#[cfg(not(unix))]
fn user() -> u32 {
    0
}

/// Whether the run whose entry is `path` (named by its pid) is alive.
fn alive(path: &std::path::Path) -> bool {
    let pid = path
        .file_stem()
        .and_then(|s| s.to_str()?.parse::<i32>().ok());
    #[cfg(unix)]
    {
        pid.and_then(rustix::process::Pid::from_raw)
            .is_some_and(|p| rustix::process::test_kill_process(p).is_ok())
    }
    #[cfg(not(unix))]
    {
        pid.is_some()
    }
}

/// A run's entry in the registry, removed when dropped.
pub(crate) struct Registered(PathBuf);

/// Registers this run, whose status is at `url`.
pub(crate) fn register(url: &str) -> Result<Registered> {
    let dir = registry();
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let path = dir.join(format!("{}.url", std::process::id()));
    std::fs::write(&path, url).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(Registered(path))
}

impl Drop for Registered {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// `abridge run --status`: every run of this user going on, and its figures.
pub(crate) fn status(out: &mut dyn Write) -> Result<()> {
    let urls: Vec<(PathBuf, String)> = match std::fs::read_dir(registry()) {
        Ok(entries) => entries
            .flatten()
            .filter_map(|e| Some((e.path(), std::fs::read_to_string(e.path()).ok()?)))
            .collect(),
        Err(_) => Vec::new(),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the runtime")?;
    let http = abridge_llm::client_builder()
        .timeout(Duration::from_secs(2))
        .build()
        .context("cannot make an HTTP client")?;
    let mut shown = 0;
    for (path, url) in urls {
        let got = runtime.block_on(async {
            http.get(format!("{}{STATUS_PATH}", url.trim()))
                .send()
                .await?
                .json::<Status>()
                .await
        });
        match got {
            Ok(s) => {
                print(out, &s, "running")?;
                writeln!(out, "  proxy {} (pid {})", s.proxy, s.pid)?;
                shown += 1;
            }
            // Its process is gone (a crash leaves its entry): forget it.
            Err(_) if !alive(&path) => {
                let _ = std::fs::remove_file(path);
            }
            Err(e) => writeln!(out, "abridge run at {}: no answer ({e})", url.trim())?,
        }
    }
    if shown == 0 {
        writeln!(out, "abridge run: no run going on")?;
    }
    Ok(())
}
