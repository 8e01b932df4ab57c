//! `abridge-fake-provider`: the fake OpenAI/Anthropic API as a process, for
//! the Python and Node tests. Prints its base URL on the first line of
//! stdout; `GET /_report` returns what it checked.
//!
//! Usage: `abridge-fake-provider [--listen ADDR] [--max-tokens N] [--window N] [--no-check] [--script STEPS] [--recall MODE]`
//!
//! `--script STEPS` plays a model that has the client run STEPS shell
//! commands with 8–20 KB outputs through its own shell tool, then answers.
//! `--recall alone` has that model call the recall tool a proxy declares,
//! once before each step, with the first handle it reads.

use std::io::Write;

use abridge_testkit::{Provider, ProviderOptions, ShellScript};

#[tokio::main]
async fn main() {
    let mut options = ProviderOptions::default();
    let mut listen = "127.0.0.1:0".to_owned();
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        if flag == "--no-check" {
            options.check = false;
            continue;
        }
        let value = args.next().unwrap_or_default();
        match flag.as_str() {
            "--listen" => listen = value,
            "--max-tokens" => options.max_tokens = value.parse().ok(),
            "--window" => options.window = value.parse().ok(),
            "--recall" => match value.parse() {
                Ok(mode) => options.recall = Some(mode),
                Err(e) => {
                    eprintln!("abridge-fake-provider: --recall: {e}");
                    std::process::exit(2);
                }
            },
            "--script" => {
                options.script = value.parse().ok().map(|steps| ShellScript { steps });
            }
            other => {
                eprintln!("abridge-fake-provider: unknown flag {other}");
                std::process::exit(2);
            }
        }
    }
    let provider = Provider::bind(&listen, options).await;
    println!("{}", provider.url);
    let _ = std::io::stdout().flush();
    std::future::pending::<()>().await;
}
