//! `abridge-soak`: agents of several tenants send growing histories through
//! `abridge serve` for a while; then throughput, latency, the proxy's RSS
//! over time and what its store kept (see [`abridge_testkit::soak`]).
//!
//! Usage: `abridge-soak [--abridge PATH] [--agents N] [--seconds S]
//! [--store sqlite|none|postgres] [--replicas N] [--apis chat,messages,responses,gemini]
//! [--check] [--sample S] [--config FILE] [--json]`
//!
//! Exits 1 when the run lost something (a failed request, a dropped write,
//! a compaction without its snapshot, a request without its row) or one
//! tenant's data reached another's requests.

use std::path::PathBuf;
use std::time::Duration;

use abridge_testkit::soak::{Api, SoakOptions, SoakStore, run};

fn usage(why: &str) -> ! {
    eprintln!("abridge-soak: {why}");
    eprintln!(
        "usage: abridge-soak [--abridge PATH] [--agents N] [--seconds S] [--store sqlite|none|postgres] \
         [--replicas N] [--apis chat,messages,responses,gemini] [--check] [--sample S] [--config FILE] [--json]"
    );
    std::process::exit(2)
}

fn main() {
    let mut options = SoakOptions::new(PathBuf::from("target/release/abridge"));
    let (mut json, mut replicas) = (false, 2);
    let mut store = "sqlite".to_owned();
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || {
            args.next()
                .unwrap_or_else(|| usage(&format!("{flag} needs a value")))
        };
        let number = |v: String| -> u64 {
            v.parse()
                .unwrap_or_else(|_| usage(&format!("not a number: {v}")))
        };
        match flag.as_str() {
            "--json" => json = true,
            "--check" => options.check = true,
            "--abridge" => options.abridge = PathBuf::from(value()),
            "--agents" => options.agents = number(value()) as usize,
            "--seconds" => options.duration = Duration::from_secs(number(value())),
            "--sample" => options.sample = Duration::from_secs(number(value())),
            "--replicas" => replicas = number(value()) as usize,
            "--store" => store = value(),
            "--config" => {
                let path = value();
                options.config = std::fs::read_to_string(&path)
                    .unwrap_or_else(|e| usage(&format!("{path}: {e}")));
            }
            "--apis" => {
                options.apis = value()
                    .split(',')
                    .map(|a| match a {
                        "chat" => Api::Chat,
                        "messages" => Api::Messages,
                        "responses" => Api::Responses,
                        "gemini" => Api::Gemini,
                        other => usage(&format!("unknown API {other}")),
                    })
                    .collect();
            }
            other => usage(&format!("unknown argument {other}")),
        }
    }
    options.store = match store.as_str() {
        "sqlite" => SoakStore::Sqlite,
        "none" => SoakStore::None,
        "postgres" => SoakStore::Postgres { replicas },
        other => usage(&format!("unknown store {other}")),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| usage(&e.to_string()));
    let report = runtime.block_on(run(&options, |line| eprintln!("{line}")));
    let report = report.unwrap_or_else(|e| {
        eprintln!("abridge-soak: {e}");
        std::process::exit(2)
    });
    match json {
        true => println!(
            "{}",
            serde_json::to_string_pretty(&report).unwrap_or_default()
        ),
        false => print!("{}", report.table()),
    }
    let losses = report.losses();
    for l in &losses {
        eprintln!("lost: {l}");
    }
    match losses.is_empty() {
        true => {
            if let Err(e) = report.remove_dir() {
                eprintln!("abridge-soak: {}: {e}", report.dir.display());
            }
        }
        false => eprintln!("logs and store kept in {}", report.dir.display()),
    }
    std::process::exit(i32::from(!losses.is_empty()));
}
