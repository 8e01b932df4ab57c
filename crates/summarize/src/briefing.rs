//! Summarizers and the request they get.

use abridge_model::{Message, Part, Usage};
use abridge_tokens::TokenizerKind;

use std::future::Future;
use std::pin::Pin;

use serde::{Deserialize, Serialize};

use crate::config::FactConfig;
use crate::facts::{Facts, extract};
use crate::progress::progress_of;
use crate::sheet::{FOCUS_NOTE, Previous, Sheet, render};
use crate::spec::{successful_commands, task_details};

/// What a summarizer is asked to condense.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// The task as the user gave it (the head's user messages).
    pub task: &'a str,
    /// The messages the briefing replaces.
    pub region: &'a [Message],
    /// The previous briefing's text (unwrapped), when compactions chain.
    pub previous: Option<&'a str>,
    /// The same briefing as data, when abridge kept it (an offline sheet
    /// of this conversation): merged as data rather than parsed back.
    pub previous_sheet: Option<&'a Sheet>,
    /// The kept tail, shown read-only so the briefing does not contradict it.
    pub tail: &'a [Message],
    /// Most tokens the briefing may take.
    pub budget_tokens: usize,
    /// Tokenizer the budget is counted with.
    pub tokenizer: TokenizerKind,
    /// What the agent asked the briefing to focus on, if it asked.
    pub focus: Option<&'a str>,
    /// What counts as a task list, a failure and an earlier briefing — the
    /// compactor's configuration, the same for every summarizer.
    pub facts: &'a FactConfig,
    /// The region's facts ([`extract`]), when the caller already took them
    /// (the engine does, once per briefing, for its checks and index): a
    /// summarizer that needs them uses these rather than extract again.
    pub region_facts: Option<&'a Facts>,
}

/// Why a summarizer gave no usable briefing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(tag = "kind", content = "detail", rename_all = "snake_case")]
#[non_exhaustive]
pub enum SummarizeError {
    /// The request could not be sent or the connection failed.
    #[error("transport error: {0}")]
    Transport(String),
    /// No answer within the time limit.
    #[error("timed out after {0} s")]
    Timeout(u64),
    /// The provider answered with an error status.
    #[error("HTTP {status}: {body}")]
    Status {
        /// HTTP status code.
        status: u16,
        /// Start of the response body.
        body: String,
    },
    /// The answer was not what the API documents.
    #[error("malformed response: {0}")]
    Malformed(String),
    /// The briefing failed a check (empty, too short, leaked tags, not smaller…).
    #[error("rejected briefing: {0}")]
    Rejected(String),
    /// The summarizer is not configured (no key, unknown provider).
    #[error("not configured: {0}")]
    NotConfigured(String),
}

/// A briefing: its text and, for the offline sheet, the same as data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Briefing {
    /// The text (no wrapper tags).
    pub text: String,
    /// The sheet it renders, when the summarizer writes one.
    pub sheet: Option<Sheet>,
    /// What writing it cost, as the summarizer's provider reported it.
    pub usage: Option<Usage>,
}

/// Turns the messages before a boundary into one briefing text.
pub trait Summarizer: Send + Sync {
    /// Name for reports (`offline`, `openai:gpt-4o-mini`…).
    fn name(&self) -> String;
    /// The briefing (plain text, no wrapper tags).
    fn summarize(&self, req: &Request<'_>) -> Result<String, SummarizeError>;

    /// The briefing with its data, when the summarizer keeps any (the
    /// compactor calls this one; by default it is the text alone).
    fn brief(&self, req: &Request<'_>) -> Result<Briefing, SummarizeError> {
        Ok(Briefing {
            text: self.summarize(req)?,
            sheet: None,
            usage: None,
        })
    }

    /// Why `text`, which this summarizer wrote, is no briefing (an LLM that
    /// copied a block of its prompt); `None` when nothing says so. The
    /// compactor asks before its own checks, with the attempt's usage kept.
    fn rejects(&self, _text: &str) -> Option<String> {
        None
    }

    /// True for a summarizer that only quotes the history (the offline fact
    /// sheet): markup in its output is the user's data, not a model leaking
    /// tool syntax, so it is escaped rather than rejected.
    fn quotes_verbatim(&self) -> bool {
        false
    }

    /// True for a summarizer that runs in-process in milliseconds (the
    /// offline fact sheet): the compactor may call it again over a shorter
    /// region to keep more of the recent history verbatim.
    fn is_instant(&self) -> bool {
        false
    }
}

/// A boxed future, as [`AsyncSummarizer`]s return (this crate needs no runtime).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A summarizer that waits on I/O (an LLM over HTTP). Front ends with a
/// runtime await it; `abridge_llm::Blocking` adapts it to [`Summarizer`]
/// for the compactor, which is synchronous.
pub trait AsyncSummarizer: Send + Sync {
    /// Name for reports (`openai:gpt-4o-mini`…).
    fn name(&self) -> String;
    /// The briefing (plain text, no wrapper tags).
    fn summarize<'a>(
        &'a self,
        req: &'a Request<'a>,
    ) -> BoxFuture<'a, Result<String, SummarizeError>>;

    /// See [`Summarizer::rejects`].
    fn rejects(&self, _text: &str) -> Option<String> {
        None
    }

    /// The briefing with what writing it cost, when the provider reports
    /// it (by default the text alone).
    fn brief<'a>(
        &'a self,
        req: &'a Request<'a>,
    ) -> BoxFuture<'a, Result<Briefing, SummarizeError>> {
        Box::pin(async move {
            Ok(Briefing {
                text: self.summarize(req).await?,
                sheet: None,
                usage: None,
            })
        })
    }
}

/// The deterministic fact sheet: no LLM, no network, same input → same text.
#[derive(Debug, Clone, Copy, Default)]
pub struct Offline;

/// Everything the kept tail shows the model: its text, tool arguments and
/// results.
fn tail_text(tail: &[Message]) -> String {
    let mut out = String::new();
    for m in tail {
        for p in &m.parts {
            match p {
                Part::Text(t) => out.push_str(&t.text),
                Part::ToolCall(c) => out.push_str(&c.arguments.to_json_text()),
                Part::ToolResult(r) => out.push_str(&r.text()),
                _ => {}
            }
            out.push('\n');
        }
    }
    out
}

impl Summarizer for Offline {
    fn name(&self) -> String {
        "offline".to_owned()
    }

    fn summarize(&self, req: &Request<'_>) -> Result<String, SummarizeError> {
        self.brief(req).map(|b| b.text)
    }

    fn brief(&self, req: &Request<'_>) -> Result<Briefing, SummarizeError> {
        let mut facts = match req.region_facts {
            Some(f) => f.clone(),
            None => extract(req.region, req.facts),
        };
        // What the kept tail holds verbatim needs no listing.
        let tail = tail_text(req.tail);
        facts.used_ids.retain(|id| !tail.contains(id.as_str()));
        // Progress the kept tail records counts too: a subtask closed there
        // needs no restating.
        let mut progress = facts.progress.clone();
        progress.extend(
            successful_commands(req.tail, req.facts)
                .iter()
                .filter_map(|(cmd, _)| progress_of(cmd)),
        );
        facts.details = task_details(req.region, req.task, req.facts, &progress);
        let previous = match (req.previous_sheet, req.previous) {
            (Some(sheet), _) => Some(Previous::Sheet(sheet)),
            (None, Some(text)) => Some(Previous::Text(text)),
            (None, None) => None,
        };
        let (text, sheet) = render(facts, previous, req.budget_tokens, req.tokenizer);
        Ok(Briefing {
            text: match req.focus {
                Some(f) => format!("{FOCUS_NOTE}{}\n\n{text}", f.trim()),
                None => text,
            },
            sheet: Some(sheet),
            usage: None,
        })
    }

    fn quotes_verbatim(&self) -> bool {
        true
    }

    fn is_instant(&self) -> bool {
        true
    }
}
