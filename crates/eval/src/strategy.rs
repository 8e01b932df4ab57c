//! The strategies compared: none, the common peers' ways, and abridge's.

use abridge::model::{Conversation, Part, encode};
use abridge::summarize::Summarizer;
use abridge::tokens::{TokenCounter, TokenizerKind};
use std::collections::HashSet;

use abridge::recall::{Handle, Piece};
use abridge::{Compactor, Engine, PolicyKind};
use serde::{Deserialize, Serialize};

use crate::EvalOptions;

/// A way to shorten the history before a cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    /// The history as it was.
    None,
    /// The oldest iterations dropped to the budget, as `trim_messages` does.
    DropOldest,
    /// Every tool output but the last 10 replaced by a placeholder (the
    /// "observation masking" of the Complexity Trap study).
    ObservationMasking,
    /// abridge's deterministic clipping only.
    ClipOnly,
    /// abridge's configured pipeline: clipping first, a briefing when
    /// clipping is not enough.
    Pipeline,
    /// The old region becomes the offline briefing (the kept tail stays).
    Offline,
    /// The old region becomes an LLM briefing from `[[summarizers]]`.
    Llm,
    /// What the agent itself kept at the cut: its summary (Claude Code),
    /// or its summary among the first and latest events (OpenHands).
    Recorded,
}

impl Strategy {
    /// Every strategy, in report order.
    pub const ALL: [Strategy; 8] = [
        Strategy::None,
        Strategy::DropOldest,
        Strategy::ObservationMasking,
        Strategy::ClipOnly,
        Strategy::Pipeline,
        Strategy::Offline,
        Strategy::Llm,
        Strategy::Recorded,
    ];

    /// Its name in tables.
    pub fn label(self) -> &'static str {
        match self {
            Strategy::None => "none",
            Strategy::DropOldest => "drop oldest",
            Strategy::ObservationMasking => "observation masking",
            Strategy::ClipOnly => "abridge clip only",
            Strategy::Pipeline => "abridge pipeline",
            Strategy::Offline => "abridge offline briefing",
            Strategy::Llm => "abridge LLM briefing",
            Strategy::Recorded => "agent's own summary",
        }
    }
}

/// A strategy's output: the history (or why there is none) and its briefing.
pub(crate) struct Applied {
    pub(crate) conversation: Option<Conversation>,
    pub(crate) briefing: Option<String>,
    pub(crate) error: Option<String>,
    /// The text of every original the compacted history's handles lead to
    /// (and the handles in those, in turn), when the strategy keeps any.
    pub(crate) recallable: Option<String>,
    /// Why the history is over the budget: the engine's smallest, when it
    /// could not reach the budget.
    pub(crate) over_budget: Option<String>,
    /// The text of every original the compaction kept (what the recall
    /// tool's search reads), when the strategy keeps any.
    pub(crate) searchable: Option<String>,
}

/// Tokens of a history with `kind`.
pub(crate) fn count(conv: &Conversation, kind: TokenizerKind) -> u64 {
    TokenCounter::new(kind).count_conversation(conv).get()
}

/// The briefing strategies' pipeline: the old region becomes one briefing
/// (iterations are dropped only if no briefing fits).
const BRIEFING: [PolicyKind; 2] = [PolicyKind::Summarize, PolicyKind::DropIterations];

/// Tool outputs kept verbatim by observation masking.
const MASK_KEEP: usize = 10;

/// What each strategy needs.
pub(crate) struct Run<'a> {
    pub(crate) pre: &'a Conversation,
    pub(crate) budget: u64,
    pub(crate) opts: &'a EvalOptions,
    /// What the agent saw right after it compacted, and its summary.
    pub(crate) recorded: Option<(&'a Conversation, &'a str)>,
    pub(crate) llm: &'a dyn Fn() -> Vec<Box<dyn Summarizer>>,
}

impl Run<'_> {
    pub(crate) fn apply(&self, s: Strategy) -> Applied {
        match s {
            Strategy::None => self.done(self.pre.clone(), None),
            Strategy::ObservationMasking => self.done(mask(self.pre), None),
            Strategy::Recorded => match self.recorded {
                Some((kept, summary)) => self.done(kept.clone(), Some(summary.to_owned())),
                None => self.done(self.pre.clone_envelope(), None),
            },
            Strategy::DropOldest => self.engine(Some(vec![PolicyKind::DropIterations]), Vec::new()),
            Strategy::ClipOnly => {
                let clip: Vec<PolicyKind> = self
                    .opts
                    .config
                    .policies
                    .pipeline
                    .iter()
                    .copied()
                    .filter(|k| !matches!(k, PolicyKind::Summarize | PolicyKind::DropIterations))
                    .collect();
                self.engine(Some(clip), Vec::new())
            }
            Strategy::Pipeline => self.engine(None, Vec::new()),
            Strategy::Offline => self.engine(Some(BRIEFING.to_vec()), Vec::new()),
            Strategy::Llm => self.engine(Some(BRIEFING.to_vec()), (self.llm)()),
        }
    }

    fn done(&self, conv: Conversation, briefing: Option<String>) -> Applied {
        Applied {
            conversation: Some(conv),
            briefing,
            error: None,
            recallable: None,
            over_budget: None,
            searchable: None,
        }
    }

    /// The engine to the budget, with `pipeline` (the configured one when
    /// `None`) and `summarizers` before the offline sheet.
    fn engine(
        &self,
        pipeline: Option<Vec<PolicyKind>>,
        summarizers: Vec<Box<dyn Summarizer>>,
    ) -> Applied {
        let mut cfg = self.opts.config.clone();
        cfg.tokenizer = Some(self.opts.tokenizer);
        cfg.budget.target_tokens = Some(self.budget.max(1));
        cfg.budget.min_iterations = 1;
        if let Some(p) = pipeline {
            cfg.policies.pipeline = p;
        }
        let wrapper = cfg.summary.wrapper.clone();
        let recall = cfg.recall.enabled;
        let failed = |e: abridge::Error| Applied {
            conversation: None,
            briefing: None,
            error: Some(e.to_string()),
            recallable: None,
            over_budget: None,
            searchable: None,
        };
        let mut c = match Compactor::new(cfg) {
            Ok(c) => c,
            Err(e) => return failed(e),
        };
        c.set_summarizers(summarizers);
        let (conv, briefing, over_budget) = match c.compact(self.pre) {
            Ok(o) => {
                let conv = o.conversation.into_owned();
                let briefing = o.report.briefing_text(&conv, &wrapper);
                (conv, briefing, None)
            }
            // What the engine cannot fit it still shrinks as far as it
            // goes: that smallest history is what a proxy sends, so it is
            // what is measured, marked as over the budget.
            Err(e) => {
                let why = e.to_string();
                let abridge::Error::CannotShrink {
                    smallest: Some(conv),
                    ..
                } = e
                else {
                    return failed(e);
                };
                let conv = *conv;
                let briefing = abridge::briefing_in(&conv, &wrapper);
                (conv, briefing, Some(why))
            }
        };
        let recallable = recall.then(|| recallable(c.engine(), &conv));
        let searchable = recall.then(|| searchable(c.engine(), &c.thread().state().handles));
        Applied {
            recallable,
            over_budget,
            searchable,
            ..self.done(conv, briefing)
        }
    }
}

/// The text of every original a handle in `conv` leads to, following the
/// handles inside recalled originals too (the model can recall those).
fn recallable(engine: &Engine, conv: &Conversation) -> String {
    let mut seen = HashSet::new();
    let mut todo: Vec<Handle> = Handle::find_all(&text_of(conv)).collect();
    let mut out = String::new();
    while let Some(h) = todo.pop() {
        if !seen.insert(h.clone()) {
            continue;
        }
        let Some(o) = engine.original(&h) else {
            continue;
        };
        for p in &o.pieces {
            if let Piece::Text { text } = p {
                todo.extend(Handle::find_all(text));
                out.push_str(text);
                out.push('\n');
            }
        }
    }
    out
}

/// The text of the originals of `handles`: what a search of the recall
/// tool reads.
fn searchable(engine: &Engine, handles: &[Handle]) -> String {
    let mut out = String::new();
    for o in handles.iter().filter_map(|h| engine.original(h)) {
        for p in &o.pieces {
            if let Piece::Text { text } = p {
                out.push_str(text);
                out.push('\n');
            }
        }
    }
    out
}

/// Every tool output but the last [`MASK_KEEP`] replaced by a placeholder.
fn mask(pre: &Conversation) -> Conversation {
    let mut conv = pre.clone();
    let mut seen = 0;
    for m in conv.messages.iter_mut().rev() {
        for p in m.parts.iter_mut().rev() {
            if let Part::ToolResult(r) = p {
                seen += 1;
                if seen > MASK_KEEP {
                    r.parts = vec![Part::text("[old tool output omitted]")];
                }
            }
        }
    }
    conv
}

/// A history as the JSON its wire format would send (what the metrics
/// search for identifiers and handles).
pub(crate) fn text_of(conv: &Conversation) -> String {
    encode(conv).map(|v| v.to_string()).unwrap_or_default()
}
