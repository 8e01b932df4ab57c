//! The soak: agents of several tenants over several APIs send growing
//! histories through `abridge serve` (one process, or replicas sharing a
//! PostgreSQL store) for a while; then what the proxy kept is checked
//! against what it was sent. Reports throughput, latency, the proxy's RSS
//! over time (and its slope over the second half), and the store's
//! completeness: a `requests` row per request, a snapshot per compaction,
//! every session the client saw compacted stored, no write dropped; and the
//! upstream's view: no tenant's text or handle in another tenant's request.

mod agent;
mod proxy;
mod store;
mod upstream;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;

use agent::Agent;
use proxy::ServeProcess;
pub use store::StoreCounts;
pub use upstream::UpstreamReport;

/// An API the agents speak.
pub use crate::reply::Api;

/// Where the proxy keeps what it keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SoakStore {
    /// `--no-store`.
    None,
    /// A SQLite file (the default store).
    Sqlite,
    /// A PostgreSQL server started for the run, shared by `replicas` proxies.
    Postgres {
        /// Proxies sharing it; the agents' requests go to each in turn.
        replicas: usize,
    },
}

/// What to run.
#[derive(Debug, Clone)]
pub struct SoakOptions {
    /// The `abridge` binary.
    pub abridge: PathBuf,
    /// Agents, each a tenant of its own.
    pub agents: usize,
    /// How long they send.
    pub duration: Duration,
    /// The store.
    pub store: SoakStore,
    /// The APIs, taken by the agents in turn.
    pub apis: Vec<Api>,
    /// Decode, validate and count every request upstream (costs the
    /// machine's CPU: off to measure throughput).
    pub check: bool,
    /// How often the proxy's RSS is read.
    pub sample: Duration,
    /// A session's body size past which its agent starts a new one.
    pub session_bytes: usize,
    /// The proxy's config (TOML).
    pub config: String,
}

impl SoakOptions {
    /// Issue 51's load: twelve agents over Chat Completions, Messages and
    /// Responses, a 30,000-token trigger and an 18,000 target, SQLite.
    pub fn new(abridge: PathBuf) -> SoakOptions {
        SoakOptions {
            abridge,
            agents: 12,
            duration: Duration::from_secs(480),
            store: SoakStore::Sqlite,
            apis: vec![Api::Chat, Api::Messages, Api::Responses],
            check: false,
            sample: Duration::from_secs(10),
            session_bytes: 250_000,
            config: "[trigger]\nmax_tokens = 30000\n[budget]\ntarget_tokens = 18000\n".into(),
        }
    }
}

/// What the soak measured.
#[derive(Debug, Clone, Serialize)]
pub struct SoakReport {
    /// Seconds the agents sent.
    pub seconds: f64,
    /// Requests sent.
    pub requests: u64,
    /// Of those, not answered with success.
    pub failed: u64,
    /// Requests answered per second.
    pub per_second: f64,
    /// Latency through the proxy (the upstream answers at once), median.
    pub latency_p50_ms: f64,
    /// The same, 99th percentile.
    pub latency_p99_ms: f64,
    /// Responses that said the proxy compacted.
    pub compacted_responses: u64,
    /// Sessions the client saw compacted.
    pub compacted_sessions: usize,
    /// The proxies' RSS (MB) over time: seconds since the start, and one
    /// reading per proxy.
    pub rss: Vec<(f64, Vec<f64>)>,
    /// Each proxy's RSS slope over the second half, MB per minute.
    pub rss_slope_mb_per_min: Vec<f64>,
    /// Compactions, by the proxies' metrics.
    pub compactions: f64,
    /// Writes the store dropped, by the proxies' metrics.
    pub store_dropped: f64,
    /// Store reads and writes that did not answer in time.
    pub store_timeouts: f64,
    /// What the store holds after the proxies stopped.
    pub store: Option<StoreCounts>,
    /// Sessions the client saw compacted that the store does not hold,
    /// though the retention (which removes the least recently saved first)
    /// kept older ones.
    pub compacted_sessions_missing: usize,
    /// Sessions the client saw compacted that the retention removed (last
    /// compacted before the oldest session it kept was saved).
    pub compacted_sessions_retired: usize,
    /// What the upstream saw.
    pub upstream: UpstreamReport,
    /// Lines of the proxies' logs that warn (at most the first 20), and how many.
    pub warnings: (usize, Vec<String>),
    /// Where the proxies' logs and store are: kept for whoever reads a
    /// failed run, removed by [`remove_dir`](Self::remove_dir) once it passed.
    pub dir: std::path::PathBuf,
}

impl SoakReport {
    /// Removes the run's directory (logs, SQLite store): for a caller that
    /// found nothing wrong in it.
    pub fn remove_dir(&self) -> std::io::Result<()> {
        std::fs::remove_dir_all(&self.dir)
    }

    /// Every way the run lost or leaked something, said; empty when none.
    pub fn losses(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut say = |bad: bool, what: String| {
            if bad {
                out.push(what);
            }
        };
        say(self.failed > 0, format!("{} requests failed", self.failed));
        say(
            self.store_dropped > 0.0,
            format!("{} store writes dropped", self.store_dropped),
        );
        say(
            self.compacted_sessions_missing > 0,
            format!(
                "{} compacted sessions not stored",
                self.compacted_sessions_missing
            ),
        );
        if let Some(s) = &self.store {
            say(
                s.requests < self.requests - self.failed,
                format!(
                    "{} requests rows for {} requests",
                    s.requests,
                    self.requests - self.failed
                ),
            );
            say(
                (s.snapshots as f64) < self.compactions,
                format!(
                    "{} snapshots for {} compactions",
                    s.snapshots, self.compactions
                ),
            );
        }
        let u = &self.upstream;
        say(
            u.foreign_text + u.foreign_handles + u.unknown_key > 0,
            format!(
                "cross-tenant: {} requests with another tenant's text, {} with its handles, {} with no known key",
                u.foreign_text, u.foreign_handles, u.unknown_key
            ),
        );
        say(
            u.invalid > 0,
            format!("{} invalid requests upstream", u.invalid),
        );
        out
    }
}

/// Shared tallies of the agents.
#[derive(Default)]
struct Tally {
    requests: u64,
    failed: u64,
    compacted: u64,
    latencies_us: Vec<u32>,
    /// Each session the client saw compacted, and when last (seconds since
    /// the Unix epoch).
    compacted_sessions: BTreeMap<String, f64>,
}

/// An HTTP client (plain HTTP on loopback; rustls only because reqwest
/// is built with it).
pub(crate) fn client() -> reqwest::Client {
    static TLS: std::sync::Once = std::sync::Once::new();
    TLS.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
    reqwest::Client::builder()
        .pool_max_idle_per_host(64)
        .build()
        .unwrap()
}

/// What the agents share.
pub(crate) struct Load {
    session_bytes: usize,
}

/// Runs the soak; `progress` hears a line now and then.
pub async fn run(
    options: &SoakOptions,
    mut progress: impl FnMut(&str),
) -> Result<SoakReport, String> {
    // The trigger fires on the proxy's calibrated estimate: a request may
    // pass it by a little in the provider's own count.
    let bound = bound_of(&options.config).saturating_mul(105) / 100;
    let upstream = upstream::Upstream::start(options.check, bound).await;
    // One directory per run: runs in one process (tests) do not share it.
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("abridge-soak-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let (store, proxies) = start_proxies(options, &dir, &upstream.url).await?;
    let replicas = proxies.len();
    let tally = Arc::new(Mutex::new(Tally::default()));
    let start = Instant::now();
    let deadline = start + options.duration;
    let tasks = spawn_agents(options, &proxies, &tally, deadline);
    let mut rss = watch(
        &proxies,
        &tally,
        (start, deadline),
        options.sample,
        &mut progress,
    )
    .await;
    for t in tasks {
        let _ = t.await;
    }
    let seconds = start.elapsed().as_secs_f64();
    rss.push((seconds, proxies.iter().map(ServeProcess::rss_mb).collect()));
    let sum = |name: &'static str| {
        let proxies = &proxies;
        async move {
            let mut total = 0.0;
            for p in proxies {
                total += p.metric(name).await;
            }
            total
        }
    };
    let compactions = sum("abridge_compactions_total").await;
    let store_dropped = sum("abridge_store_dropped_total").await;
    let store_timeouts = sum("abridge_store_timeouts_total").await;
    progress("stopping the proxies (SIGTERM)");
    let mut logs = Vec::new();
    for p in proxies {
        logs.push(p.log.clone());
        let status = p.stop()?;
        if !status.success() {
            return Err(format!("abridge serve exited with {status}"));
        }
    }
    let warnings = warnings(&logs);
    let t = std::mem::take(&mut *tally.lock().unwrap());
    let stored = store.counts(&t.compacted_sessions)?;
    let (counts, missing, retired) = match stored {
        Some((c, m, r)) => (Some(c), m, r),
        None => (None, 0, 0),
    };
    let mut latencies = t.latencies_us;
    latencies.sort_unstable();
    let slopes = (0..replicas)
        .map(|i| slope_second_half(&rss, i, seconds))
        .collect();
    Ok(SoakReport {
        seconds,
        requests: t.requests,
        failed: t.failed,
        per_second: (t.requests - t.failed) as f64 / seconds,
        latency_p50_ms: percentile_ms(&latencies, 0.5),
        latency_p99_ms: percentile_ms(&latencies, 0.99),
        compacted_responses: t.compacted,
        compacted_sessions: t.compacted_sessions.len(),
        rss,
        rss_slope_mb_per_min: slopes,
        compactions,
        store_dropped,
        store_timeouts,
        store: counts,
        compacted_sessions_missing: missing,
        compacted_sessions_retired: retired,
        upstream: upstream.report(),
        warnings,
        dir,
    })
}

/// The store and `abridge serve` (one per replica) against `upstream`,
/// with the soak's config written into `dir`.
async fn start_proxies(
    options: &SoakOptions,
    dir: &std::path::Path,
    upstream: &str,
) -> Result<(store::Backend, Vec<ServeProcess>), String> {
    let config = dir.join("abridge.toml");
    std::fs::write(&config, &options.config).map_err(|e| e.to_string())?;
    let (store, store_arg) = store::Backend::start(options.store, dir)?;
    let mut args = vec![
        "--config".to_owned(),
        config.display().to_string(),
        "--openai-upstream".to_owned(),
        format!("{upstream}/v1"),
        "--anthropic-upstream".to_owned(),
        upstream.to_owned(),
        "--gemini-upstream".to_owned(),
        upstream.to_owned(),
    ];
    args.extend(store_arg);
    let replicas = match options.store {
        SoakStore::Postgres { replicas } => replicas.max(1),
        _ => 1,
    };
    let mut proxies = Vec::new();
    for i in 0..replicas {
        let log = dir.join(format!("serve-{i}.log"));
        proxies.push(ServeProcess::start(&options.abridge, &args, log).await?);
    }
    Ok((store, proxies))
}

/// The agents, each sending to the replicas in turn until `deadline` and
/// adding what it saw to `tally`.
fn spawn_agents(
    options: &SoakOptions,
    proxies: &[ServeProcess],
    tally: &Arc<Mutex<Tally>>,
    deadline: Instant,
) -> Vec<tokio::task::JoinHandle<()>> {
    let urls: Arc<Vec<String>> = Arc::new(proxies.iter().map(|p| p.url.clone()).collect());
    let load = Arc::new(Load {
        session_bytes: options.session_bytes,
    });
    let mut tasks = Vec::new();
    for k in 0..options.agents {
        let api = options.apis[k % options.apis.len().max(1)];
        let (urls, tally, load) = (urls.clone(), tally.clone(), load.clone());
        tasks.push(tokio::spawn(async move {
            let http = client();
            let mut agent = Agent::new(k, api);
            let mut n = k;
            while Instant::now() < deadline {
                let url = &urls[n % urls.len()];
                n += 1;
                // Before the request: its session's save lands after this.
                let asked = store::now();
                let sent = agent.send(&http, url, &load).await;
                let mut t = tally.lock().unwrap();
                t.requests += 1;
                t.failed += u64::from(!sent.ok);
                t.compacted += u64::from(sent.compacted);
                t.latencies_us
                    .push(sent.latency.as_micros().min(u32::MAX as u128) as u32);
                if let (true, Some(s)) = (sent.compacted, sent.session) {
                    t.compacted_sessions.insert(s, asked);
                }
            }
        }));
    }
    tasks
}

/// Samples each replica's memory every `every` until the deadline, saying
/// it on `progress`: (seconds since the start, RSS in MB per replica).
async fn watch(
    proxies: &[ServeProcess],
    tally: &Mutex<Tally>,
    (start, deadline): (Instant, Instant),
    every: Duration,
    progress: &mut impl FnMut(&str),
) -> Vec<(f64, Vec<f64>)> {
    let mut rss = Vec::new();
    while Instant::now() < deadline {
        let at = start.elapsed().as_secs_f64();
        let readings: Vec<f64> = proxies.iter().map(ServeProcess::rss_mb).collect();
        let done = tally.lock().unwrap().requests;
        progress(&format!(
            "{at:6.0} s  {done:7} requests  {}",
            memory_line(proxies, &readings).await
        ));
        rss.push((at, readings));
        let left = deadline.saturating_duration_since(Instant::now());
        tokio::time::sleep(every.min(left)).await;
    }
    rss
}

/// The `p` percentile of sorted latencies in microseconds, in milliseconds.
fn percentile_ms(sorted_us: &[u32], p: f64) -> f64 {
    sorted_us
        .get(((sorted_us.len() as f64 - 1.0) * p).round() as usize)
        .map_or(0.0, |us| f64::from(*us) / 1000.0)
}

/// Each replica's memory now, as the progress line says it.
async fn memory_line(proxies: &[ServeProcess], readings: &[f64]) -> String {
    let mut said = Vec::new();
    for (p, rss) in proxies.iter().zip(readings) {
        let mb = |name| async move { p.metric(name).await / 1e6 };
        said.push(format!(
            "RSS {rss:.0} MB (sessions {:.0}, originals {:.0}), {} store jobs waiting",
            mb("abridge_session_memory_bytes").await,
            mb("abridge_recall_memory_bytes").await,
            p.metric("abridge_store_queued").await
        ));
    }
    said.join(" | ")
}

/// The trigger of a config.
fn bound_of(config: &str) -> u64 {
    config
        .lines()
        .find_map(|l| l.trim().strip_prefix("max_tokens"))
        .and_then(|v| v.trim_start_matches([' ', '=']).trim().parse().ok())
        .unwrap_or(u64::MAX)
}

/// The least-squares slope of proxy `i`'s RSS over the run's second half, MB/min.
fn slope_second_half(rss: &[(f64, Vec<f64>)], i: usize, seconds: f64) -> f64 {
    let points: Vec<(f64, f64)> = rss
        .iter()
        .filter(|(t, _)| *t >= seconds / 2.0)
        .filter_map(|(t, r)| Some((*t, *r.get(i)?)))
        .collect();
    let n = points.len() as f64;
    if n < 2.0 {
        return 0.0;
    }
    let (mt, mr) = (
        points.iter().map(|p| p.0).sum::<f64>() / n,
        points.iter().map(|p| p.1).sum::<f64>() / n,
    );
    let num: f64 = points.iter().map(|(t, r)| (t - mt) * (r - mr)).sum();
    let den: f64 = points.iter().map(|(t, _)| (t - mt).powi(2)).sum();
    match den > 0.0 {
        true => num / den * 60.0,
        false => 0.0,
    }
}

/// The log lines that warn, and how many there were.
fn warnings(logs: &[PathBuf]) -> (usize, Vec<String>) {
    let mut count = 0;
    let mut first = Vec::new();
    for log in logs {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        for line in text
            .lines()
            .filter(|l| l.contains("WARN") || l.contains("ERROR"))
        {
            count += 1;
            if first.len() < 20 {
                first.push(line.to_owned());
            }
        }
    }
    (count, first)
}

impl SoakReport {
    /// The report as a few lines for a terminal.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let mut line = |k: &str, v: String| out.push_str(&format!("{k:36} {v}\n"));
        line(
            "requests",
            format!(
                "{} in {:.0} s ({:.1}/s), {} failed",
                self.requests, self.seconds, self.per_second, self.failed
            ),
        );
        line(
            "latency through the proxy",
            format!(
                "p50 {:.1} ms, p99 {:.1} ms",
                self.latency_p50_ms, self.latency_p99_ms
            ),
        );
        line(
            "compactions",
            format!(
                "{} ({} responses said so, {} sessions)",
                self.compactions, self.compacted_responses, self.compacted_sessions
            ),
        );
        let first = self.rss.first().map(|r| r.1.clone()).unwrap_or_default();
        let last = self.rss.last().map(|r| r.1.clone()).unwrap_or_default();
        line(
            "RSS, start -> end (MB)",
            format!("{first:.0?} -> {last:.0?}"),
        );
        line(
            "RSS slope, second half (MB/min)",
            format!("{:.2?}", self.rss_slope_mb_per_min),
        );
        line(
            "store",
            format!(
                "dropped {}, timeouts {}",
                self.store_dropped, self.store_timeouts
            ),
        );
        if let Some(s) = &self.store {
            line(
                "  kept",
                format!(
                    "{} sessions, {} snapshots ({} kept), {} requests rows, {:.1} MB on disk",
                    s.sessions,
                    s.snapshots,
                    s.snapshots_kept,
                    s.requests,
                    s.bytes as f64 / 1e6
                ),
            );
            line(
                "  compacted sessions not stored",
                format!(
                    "{} (and {} the retention removed)",
                    self.compacted_sessions_missing, self.compacted_sessions_retired
                ),
            );
        }
        let u = &self.upstream;
        line(
            "upstream",
            format!(
                "{} requests, {} invalid, {} over the bound (largest {} tokens), cross-tenant {}",
                u.requests,
                u.invalid,
                u.over_bound,
                u.max_tokens,
                u.foreign_text + u.foreign_handles + u.unknown_key
            ),
        );
        line("warnings in the log", self.warnings.0.to_string());
        out
    }
}
