//! `abridge replay ID --bundle DIR`: one stored compaction as a playground
//! bundle, stagewise's way — the system prompt, the user message the LLM
//! summarizer is sent (its budget hint and all), the serialized history,
//! what the stored compaction wrote, and metadata — to paste into a
//! provider's playground and diff against the stored output. Nothing is
//! sent anywhere: the messages are built by the summarizer's own code.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use abridge::summarize::{Request, SummarizeError, Summarizer};
use abridge::{Compactor, Config};
use abridge_llm::{DEFAULT_PROMPT, LlmSummarizer};
use abridge_store::Snapshot;
use anyhow::{Context, Result};
use serde_json::json;

/// The bundle's files, written.
#[derive(Debug)]
pub(crate) struct Written {
    pub(crate) dir: PathBuf,
    pub(crate) files: Vec<&'static str>,
}

/// Records the user message the first summarizer would be sent, and
/// declines: the compaction goes on without an LLM.
struct Capture {
    shaper: LlmSummarizer,
    seen: Arc<Mutex<Option<String>>>,
}

impl Summarizer for Capture {
    fn name(&self) -> String {
        "bundle".to_owned()
    }

    fn summarize(&self, req: &Request<'_>) -> Result<String, SummarizeError> {
        if let Ok(mut seen) = self.seen.lock() {
            seen.get_or_insert_with(|| self.shaper.user_message(req));
        }
        Err(SummarizeError::NotConfigured(
            "capturing the request for a bundle".into(),
        ))
    }
}

/// Writes snapshot `s`'s bundle under `dir` (its own directory,
/// `compression-<id>`), with `config` (the stored one, the command's
/// flags applied) and the system prompt `prompt` when given.
pub(crate) fn write(
    s: &Snapshot,
    config: Config,
    prompt: Option<String>,
    dir: &Path,
) -> Result<Written> {
    let conv = s.history()?;
    let prompt = prompt
        .or_else(|| config.summarizers.iter().find_map(|p| p.prompt.clone()))
        .unwrap_or_else(|| DEFAULT_PROMPT.to_owned());
    let shaper = match config.summarizers.first() {
        Some(spec) => LlmSummarizer::from_spec(spec),
        None => LlmSummarizer::new(abridge::model::Family::OpenAi, "playground"),
    }
    .prompt(prompt.clone());
    let seen = Arc::new(Mutex::new(None));
    let mut compactor = Compactor::new(config)?;
    compactor.set_summarizers(vec![Box::new(Capture {
        shaper,
        seen: seen.clone(),
    })]);
    // Whatever the fact sheet makes of it, the request is what counts here.
    let _ = compactor.compact(&conv);
    let user = seen
        .lock()
        .ok()
        .and_then(|mut s| s.take())
        .with_context(|| {
            format!(
                "snapshot {}: replayed, its compaction summarizes nothing (clipping was enough)",
                s.entry.id
            )
        })?;
    let history = between(&user, "<history>\n", "</history>")
        .unwrap_or_default()
        .to_owned();
    let actual = s.briefing.clone().unwrap_or_default();
    let metadata = json!({
        "id": s.entry.id,
        "source": s.entry.source,
        "summarizer": s.entry.summarizer,
        "tokens_before": s.entry.tokens_before,
        "tokens_after": s.entry.tokens_after,
        "messages": conv.messages.len(),
        "system_prompt_chars": prompt.chars().count(),
        "user_message_chars": user.chars().count(),
        "history_chars": history.chars().count(),
        "actual_output_chars": actual.chars().count(),
        "chained": user.contains("<previous-briefing>"),
        "actual_output_includes_previous_tag": actual.contains("<previous-briefing>"),
    });
    let dir = dir.join(format!("compression-{}", s.entry.id));
    std::fs::create_dir_all(&dir).with_context(|| format!("{}: cannot create", dir.display()))?;
    let files: [(&'static str, String); 5] = [
        ("system-prompt.md", prompt),
        ("user-message.md", user),
        ("compact-history.xml", history),
        ("actual-output.md", actual),
        ("metadata.json", serde_json::to_string_pretty(&metadata)?),
    ];
    for (name, text) in &files {
        let path = dir.join(name);
        std::fs::write(&path, text).with_context(|| format!("{}: cannot write", path.display()))?;
    }
    Ok(Written {
        dir,
        files: files.iter().map(|(n, _)| *n).collect(),
    })
}

/// The text between `open` and the last `close` after it.
fn between<'a>(text: &'a str, open: &str, close: &str) -> Option<&'a str> {
    let start = text.find(open)? + open.len();
    let end = text[start..].rfind(close)? + start;
    Some(&text[start..end])
}
