//! `abridge serve` as a process of its own: started on a free port, its
//! RSS read from `/proc`, its metrics scraped, stopped with SIGTERM (its
//! graceful shutdown) and its log read.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running `abridge serve`.
pub(super) struct ServeProcess {
    pub(super) url: String,
    child: Child,
    pub(super) log: PathBuf,
}

impl ServeProcess {
    /// Starts `abridge serve` with `args`, logging to `log`; waits until it
    /// answers `/readyz`.
    pub(super) async fn start(
        binary: &Path,
        args: &[String],
        log: PathBuf,
    ) -> Result<ServeProcess, String> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| e.to_string())?
            .port();
        let out = std::fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        let err = out.try_clone().map_err(|e| e.to_string())?;
        let child = Command::new(binary)
            .arg("serve")
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(args)
            .env("RUST_LOG", "info")
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .spawn()
            .map_err(|e| format!("{}: {e}", binary.display()))?;
        let process = ServeProcess {
            url: format!("http://127.0.0.1:{port}"),
            child,
            log,
        };
        let http = super::client();
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(30) {
            let ready = http.get(format!("{}/readyz", process.url)).send().await;
            if ready.is_ok_and(|r| r.status().is_success()) {
                return Ok(process);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Err(format!(
            "abridge serve did not get ready in 30 s; its log: {}",
            process.log.display()
        ))
    }

    /// Its resident memory, in MB.
    pub(super) fn rss_mb(&self) -> f64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()));
        status
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("VmRSS:"))
                    .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
            })
            .map_or(0.0, |kb| kb / 1024.0)
    }

    /// The sum of every sample of a metric (all its labels).
    pub(super) async fn metric(&self, name: &str) -> f64 {
        let Ok(resp) = super::client()
            .get(format!("{}/metrics", self.url))
            .send()
            .await
        else {
            return f64::NAN;
        };
        let text = resp.text().await.unwrap_or_default();
        sum_metric(&text, name)
    }

    /// Stops it as an operator would (SIGTERM: it drains and flushes), and
    /// waits for it to exit.
    pub(super) fn stop(mut self) -> Result<std::process::ExitStatus, String> {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().map_err(|e| e.to_string())? {
                return Ok(status);
            }
            if start.elapsed() > Duration::from_secs(60) {
                let _ = self.child.kill();
                return Err("abridge serve did not stop within 60 s of SIGTERM".into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for ServeProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The sum of every sample of `name` in Prometheus text.
pub(super) fn sum_metric(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with(' ') || rest.starts_with('{'))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_metric_sums_its_labels_and_not_its_neighbours() {
        let text = "# HELP x\nabridge_compactions_total{reason=\"tokens\"} 3\n\
            abridge_compactions_total{reason=\"window\"} 2\nabridge_compactions_total_other 9\n\
            abridge_store_dropped_total 1\n";
        assert_eq!(sum_metric(text, "abridge_compactions_total"), 5.0);
        assert_eq!(sum_metric(text, "abridge_store_dropped_total"), 1.0);
    }
}
