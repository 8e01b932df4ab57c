//! Reading conversations from files or stdin, with `FILE#N` selection.

use std::io::Read;
use std::path::{Path, PathBuf};

use abridge_model::{Conversation, Format, decode_as};
use anyhow::{Context, Result, bail};
use clap::Args;

/// Options about how inputs are read.
#[derive(Debug, Clone, Args)]
pub(crate) struct InputArgs {
    /// Input format (detected when not given).
    #[arg(long, value_parser = format_names())]
    pub(crate) format: Option<Format>,
}

/// Every format the model decodes, by its name: the command line takes
/// what the library does, with nothing to keep in step.
fn format_names() -> impl clap::builder::TypedValueParser<Value = Format> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(Format::ALL.map(Format::as_str))
        .try_map(|name| name.parse::<Format>())
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
    if let Some(events) = events_folder(Path::new(path)) {
        let conv = read_events(&events).with_context(|| format!("{path}: cannot decode"))?;
        return Ok(vec![(path.to_owned(), conv)]);
    }
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
    let convs = decode_as(&bytes, opts.format).with_context(|| format!("{name}: cannot decode"))?;
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

/// The folder of an OpenHands V1 conversation's events, when `dir` is
/// the conversation's folder (holding `event_service/events`) or its
/// `event_service` folder.
fn events_folder(dir: &Path) -> Option<PathBuf> {
    [dir.join("event_service").join("events"), dir.join("events")]
        .into_iter()
        .find(|p| p.is_dir())
}

/// An OpenHands conversation: its event files, in the order of their
/// names (`event-00042-…json`), as one array.
fn read_events(dir: &Path) -> Result<Conversation> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("{}: cannot list", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    let mut events = Vec::with_capacity(files.len());
    for f in &files {
        let text =
            std::fs::read_to_string(f).with_context(|| format!("{}: cannot read", f.display()))?;
        let event: serde_json::Value =
            serde_json::from_str(&text).with_context(|| format!("{}: not JSON", f.display()))?;
        events.push(event);
    }
    let mut convs =
        abridge_model::decode_value(serde_json::Value::Array(events), Format::OpenHands)?;
    let mut conv = convs.pop().context("no conversation in the events")?;
    conv.model = dir
        .parent()
        .and_then(|d| model_in_state(&d.join("base_state.json")));
    Ok(conv)
}

/// The model an OpenHands conversation's `base_state.json` names
/// (`agent.llm.model`), without its routing prefixes
/// (`litellm_proxy/anthropic/claude-sonnet-4-…` → `claude-sonnet-4-…`).
fn model_in_state(path: &Path) -> Option<String> {
    let state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()?;
    let model = state.pointer("/agent/llm/model")?.as_str()?;
    Some(model.rsplit('/').next().unwrap_or(model).to_owned())
}

/// The files named, and under the folders named the `.json`/`.jsonl`
/// files and OpenHands conversation folders, sorted.
pub(crate) fn expand(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() && events_folder(p).is_none() {
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
            // An OpenHands conversation is one input, not a tree of files.
            match events_folder(&p) {
                Some(_) => out.push(p),
                None => walk(&p, out)?,
            }
        } else if p.extension().is_some_and(|e| e == "json" || e == "jsonl") {
            out.push(p);
        }
    }
    Ok(())
}
