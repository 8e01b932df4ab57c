//! The `abridge` command line: argument parsing and the commands.

mod bundle;
mod calibrate;
mod compact;
mod engine_args;
mod eval;
mod input;
mod replay;
mod run;
mod savings;
mod serve;
mod signal;
mod simulate;
mod snapshots;
mod stats;
mod ui;

/// The book's chapters on the command line and on `abridge run`, as rustdoc.
pub mod book {
    #[doc = include_str!("../../../docs/src/cli.md")]
    pub mod cli {}
    #[doc = include_str!("../../../docs/src/run.md")]
    pub mod run {}
}

use std::io::Write;
use std::process::ExitCode;

use abridge_model::{Conversation, Wire, validate};
use abridge_tokens::{Registry, Resolved, TokenizerKind};
use anyhow::{Context, Result};
use clap::{Parser, Subcommand};

/// Keep LLM agents inside their context window.
#[derive(Debug, Parser)]
#[command(name = "abridge", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// Whether `args` (the program's name left out) parse as an `abridge`
/// command line, or what is wrong with them: for the tests that hold the
/// README's and the book's samples to the real command line.
#[doc(hidden)]
pub fn parses(args: impl IntoIterator<Item = String>) -> Result<(), String> {
    use clap::error::ErrorKind;
    match Cli::try_parse_from(std::iter::once("abridge".to_owned()).chain(args)) {
        Ok(_) => Ok(()),
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => Ok(()),
        Err(e) => Err(e.to_string()),
    }
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print messages, iterations, tool calls, tokens and validity of conversations.
    Stats(stats::StatsArgs),
    /// Check tool pairing and roles; exit 1 when a conversation is invalid.
    Validate {
        /// File to check (`-` for stdin; `FILE#N` picks the N-th conversation).
        file: String,
        #[command(flatten)]
        input: input::InputArgs,
    },
    /// Print a conversation as a Chat Completions, Responses or Anthropic request body, or as AI SDK messages.
    Convert {
        /// File to convert (`-` for stdin; `FILE#N` picks the N-th conversation).
        file: String,
        /// Target format: openai, anthropic, ai-sdk, responses or gemini.
        #[arg(long, value_name = "FORMAT")]
        to: Wire,
        /// Print compact JSON instead of pretty.
        #[arg(long)]
        compact: bool,
        #[command(flatten)]
        input: input::InputArgs,
    },
    /// Compact a conversation to a token budget and print the request body.
    Compact(compact::CompactArgs),
    /// Replay a recorded run turn by turn with and without compaction.
    Simulate(simulate::SimulateArgs),
    /// Compare token counts with what providers billed, on runs that recorded usage.
    Calibrate(calibrate::CalibrateArgs),
    /// Compaction quality on real transcripts: strategies side by side.
    Eval(eval::EvalArgs),
    /// List stored compaction snapshots, newest first.
    Log(snapshots::LogArgs),
    /// Print one snapshot: figures, summarizer attempts, briefing.
    Show(snapshots::ShowArgs),
    /// Print the history a snapshot was taken of, as a request body.
    Restore(snapshots::IdArgs),
    /// Print the original a handle (abr_…) names, as the recall tool answers it.
    Recall(snapshots::RecallArgs),
    /// Re-run a stored compaction with another summarizer or prompt and compare.
    Replay(replay::ReplayArgs),
    /// Remove old snapshots beyond the retention and give the space back.
    Prune(snapshots::PruneArgs),
    /// Tokens and dollars a proxy's requests added up to, with abridge and without, per day, tenant or model.
    Savings(savings::SavingsArgs),
    /// Run an agent behind abridge: a proxy for it alone, the agent pointed at it, what it saved on exit.
    Run(run::RunArgs),
    /// Run the proxy (OpenAI Chat Completions and Responses, Anthropic Messages) that keeps every agent behind it inside its window.
    Serve(serve::ServeArgs),
    /// The dashboard over a snapshot store: sessions, compactions, briefings, diffs.
    Ui(ui::UiArgs),
}

/// Runs the command line; returns the process exit code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        // A closed pipe (`abridge stats … | head`) is not a failure.
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("abridge: error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// Log lines on stderr: `RUST_LOG` filters (default: info for abridge).
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new("abridge=info,abridge_proxy=info,warn")
    });
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            || c.downcast_ref::<serde_json::Error>()
                .and_then(|j| j.io_error_kind())
                .is_some_and(|k| k == std::io::ErrorKind::BrokenPipe)
    })
}

fn run(cli: Cli) -> Result<ExitCode> {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match cli.command {
        Command::Stats(args) => stats::run(&args, &mut out),
        Command::Validate { file, input } => {
            let (label, conv) = input::one(&file, &input)?;
            let violations = validate(&conv);
            if violations.is_empty() {
                writeln!(out, "{label}: valid ({} messages)", conv.messages.len())?;
                return Ok(ExitCode::SUCCESS);
            }
            writeln!(out, "{label}: invalid, {} violation(s):", violations.len())?;
            for v in &violations {
                writeln!(out, "  {v}")?;
            }
            Ok(ExitCode::from(1))
        }
        Command::Convert {
            file,
            to,
            compact,
            input,
        } => {
            let (label, conv) = input::one(&file, &input)?;
            let violations = validate(&conv);
            if !violations.is_empty() {
                eprintln!(
                    "abridge: {label}: warning: the input breaks {} rule(s) of its API (abridge validate {file} lists them); converted as it is",
                    violations.len()
                );
            }
            write_body(&label, &conv, to, compact, &mut out)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Compact(args) => compact::run(&args, &mut out),
        Command::Simulate(args) => simulate::run(&args, &mut out),
        Command::Calibrate(args) => calibrate::run(&args, &mut out),
        Command::Eval(args) => eval::run(&args, &mut out),
        Command::Log(args) => snapshots::log(&args, &mut out),
        Command::Show(args) => snapshots::show(&args, &mut out),
        Command::Restore(args) => snapshots::restore(&args, &mut out),
        Command::Recall(args) => snapshots::recall(&args, &mut out),
        Command::Replay(args) => replay::replay(&args, &mut out),
        Command::Prune(args) => snapshots::prune(&args, &mut out),
        Command::Savings(args) => savings::run(&args, &mut out),
        Command::Run(args) => run::run(&args, &mut out),
        Command::Ui(args) => ui::run(&args, &mut out),
        Command::Serve(args) => {
            init_logging();
            serve::run(&args, &mut out)
        }
    }
}

/// Converts to `to` (adding `max_tokens` where Anthropic requires it),
/// reports what was dropped on stderr, and writes the request body.
pub(crate) fn write_body(
    label: &str,
    conv: &Conversation,
    to: Wire,
    compact: bool,
    out: &mut dyn Write,
) -> Result<()> {
    let mut converted = abridge_model::convert_to(conv, to)
        .with_context(|| format!("{label}: cannot convert to {to}"))?;
    let conv = &mut converted.conversation;
    if to == Wire::Anthropic && !conv.extra.contains_key("max_tokens") {
        // Anthropic requires max_tokens; take the model's output limit.
        let max = conv
            .model
            .as_deref()
            .and_then(|m| Registry::new().lookup(m))
            .map_or(8_192, |i| i.max_output.min(32_000));
        conv.extra.insert("max_tokens".into(), max.into());
        converted
            .warnings
            .push(format!("added max_tokens = {max} (Anthropic requires it)"));
    }
    for w in &converted.warnings {
        eprintln!("abridge: {label}: {w}");
    }
    let cannot = || format!("{label}: cannot encode");
    if compact {
        // A message at a time: a long history never becomes one JSON tree.
        let text = abridge_model::encode_text(&converted.conversation).with_context(cannot)?;
        out.write_all(text.as_bytes())?;
        writeln!(out)?;
        return Ok(());
    }
    let body = abridge_model::encode(&converted.conversation).with_context(cannot)?;
    write_json(out, &body, true)
}

/// Writes `value` as JSON (indented when `pretty`) and a newline, through
/// a buffer: serde writes a token at a time, which to a file (unbuffered)
/// or stdout (flushed at each newline) was a system call per token or per
/// line — 38,000 of them for an 8 MB body.
pub(crate) fn write_json(
    out: &mut dyn Write,
    value: &impl serde::Serialize,
    pretty: bool,
) -> Result<()> {
    let mut out = std::io::BufWriter::with_capacity(1 << 16, out);
    match pretty {
        true => serde_json::to_writer_pretty(&mut out, value)?,
        false => serde_json::to_writer(&mut out, value)?,
    }
    writeln!(out)?;
    out.flush()?;
    Ok(())
}

/// Says once per model name, on stderr, when a model is known only by its
/// family (or not at all), and what that means for its window and count.
pub(crate) fn note_model(registry: &Registry, model: Option<&str>) {
    use std::collections::HashSet;
    use std::sync::Mutex;
    static SAID: Mutex<Option<HashSet<String>>> = Mutex::new(None);
    let Some(model) = model else {
        return;
    };
    let note = match registry.resolve(model) {
        Resolved::Known(_) => return,
        Resolved::Family(family, i) => format!(
            "model {model} is not in the registry; using the {family} defaults (window {}, tokenizer {})",
            stats::thousands(i.context_window),
            i.tokenizer
        ),
        Resolved::Unknown => format!(
            "model {model} is unknown: no window (only token triggers apply), tokenizer o200k_base; add it under [models] in the config"
        ),
    };
    let mut said = SAID
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if said
        .get_or_insert_with(HashSet::new)
        .insert(model.to_owned())
    {
        eprintln!("abridge: {note}");
    }
}

/// Parses a tokenizer name for clap.
fn parse_tokenizer(s: &str) -> Result<TokenizerChoice, String> {
    if s == "auto" {
        return Ok(TokenizerChoice::Auto);
    }
    s.parse::<TokenizerKind>()
        .map(TokenizerChoice::Fixed)
        .map_err(|e| format!("{e}, or auto"))
}

/// Which tokenizer to count with.
#[derive(Debug, Clone, Copy)]
enum TokenizerChoice {
    /// The model's tokenizer from the registry (o200k_base when unknown).
    Auto,
    /// This one.
    Fixed(TokenizerKind),
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer that counts the calls it gets, as a file or a pipe would
    /// count system calls.
    #[derive(Default)]
    struct Calls {
        bytes: Vec<u8>,
        writes: usize,
    }

    impl Write for Calls {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.writes += 1;
            self.bytes.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_body_is_written_in_large_pieces_pretty_or_compact() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../examples/coding-agent.openai.json"
        );
        let bytes = std::fs::read(path).expect("the example is in the repository");
        let conv = abridge_model::decode(&bytes)
            .expect("the example decodes")
            .remove(0);
        for compact in [false, true] {
            let mut out = Calls::default();
            write_body("example", &conv, Wire::Chat, compact, &mut out).expect("it writes");
            let written: serde_json::Value =
                serde_json::from_slice(&out.bytes).expect("what it wrote is JSON");
            assert_eq!(
                written["messages"].as_array().map(Vec::len),
                Some(conv.messages.len())
            );
            // Pretty JSON went out a token at a time: hundreds of calls here.
            let most = out.bytes.len() / (1 << 16) + 2;
            assert!(
                out.writes <= most,
                "{} writes for {} bytes (compact: {compact})",
                out.writes,
                out.bytes.len()
            );
        }
    }
}
