//! Reading conversations from files or stdin, with `FILE#N` selection.

use std::io::Read;
use std::path::{Path, PathBuf};

use abridge_model::{Conversation, Format, decode_as};
use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};

/// Options about how inputs are read.
#[derive(Debug, Clone, Args)]
pub(crate) struct InputArgs {
    /// Input format (detected when not given).
    #[arg(long, value_enum)]
    pub(crate) format: Option<InputFormat>,
}

/// An input format named on the command line.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum InputFormat {
    Openai,
    Anthropic,
    ClaudeCode,
    MiniSweAgent,
    TauBench,
    AiSdk,
    Responses,
}

impl From<InputFormat> for Format {
    fn from(f: InputFormat) -> Self {
        match f {
            InputFormat::Openai => Format::OpenAi,
            InputFormat::Anthropic => Format::Anthropic,
            InputFormat::ClaudeCode => Format::ClaudeCode,
            InputFormat::MiniSweAgent => Format::MiniSweAgent,
            InputFormat::TauBench => Format::TauBench,
            InputFormat::AiSdk => Format::AiSdk,
            InputFormat::Responses => Format::Responses,
        }
    }
}

/// A file argument split into the path and an optional `#N` selector.
fn split_selector(arg: &str) -> (&str, Option<usize>) {
    if arg != "-"
        && !Path::new(arg).exists()
        && let Some((path, n)) = arg.rsplit_once('#')
        && let Ok(n) = n.parse::<usize>()
    {
        return (path, Some(n));
    }
    (arg, None)
}

/// Every conversation named by `arg`, each with a display label.
pub(crate) fn all(arg: &str, opts: &InputArgs) -> Result<Vec<(String, Conversation)>> {
    let (path, selector) = split_selector(arg);
    let bytes = if path == "-" {
        let mut buf = Vec::new();
        std::io::stdin()
            .read_to_end(&mut buf)
            .context("reading stdin")?;
        buf
    } else {
        std::fs::read(path).with_context(|| format!("{path}: cannot read"))?
    };
    let name = if path == "-" { "<stdin>" } else { path };
    if bytes.iter().all(u8::is_ascii_whitespace) {
        bail!("{name}: empty: no conversation in it");
    }
    let convs = decode_as(&bytes, opts.format.map(Format::from))
        .with_context(|| format!("{name}: cannot decode"))?;
    let many = convs.len() > 1;
    let mut labelled: Vec<(String, Conversation)> = convs
        .into_iter()
        .enumerate()
        .map(|(i, c)| {
            let label = if many {
                format!("{name}#{i}")
            } else {
                name.to_owned()
            };
            (label, c)
        })
        .collect();
    if let Some(n) = selector {
        if n >= labelled.len() {
            bail!(
                "{name}: conversation #{n} does not exist (the file holds {})",
                labelled.len()
            );
        }
        labelled = vec![labelled.swap_remove(n)];
    }
    Ok(labelled)
}

/// One conversation: the selected one, or the first.
pub(crate) fn one(arg: &str, opts: &InputArgs) -> Result<(String, Conversation)> {
    let mut convs = all(arg, opts)?;
    if convs.is_empty() {
        bail!("{arg}: no conversation found");
    }
    Ok(convs.swap_remove(0))
}

/// The files named, and the `.json`/`.jsonl` files under the folders named, sorted.
pub(crate) fn expand(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            walk(p, &mut out)?;
        } else {
            out.push(p.clone());
        }
    }
    Ok(out)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("{}: cannot list", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            walk(&p, out)?;
        } else if p.extension().is_some_and(|e| e == "json" || e == "jsonl") {
            out.push(p);
        }
    }
    Ok(())
}
