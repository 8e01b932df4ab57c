//! Compaction quality on real transcripts, strategies side by side.
//!
//! A transcript is cut where its agent compacted (Claude Code's
//! `compact_boundary`, whose recorded summary becomes one more strategy) or
//! else at 50 % and 75 % of its turns. Each strategy compacts the history
//! before the cut to a budget; the history after the cut says what the
//! agent went on to need. Metrics:
//!
//! - **recall**: of the identifiers that appear before the cut and that the
//!   agent refers to after it — in its text and in the tool arguments that
//!   name things (paths, commands, ids, patterns) — the share still present
//!   in the compacted history. Names inside the code it types (a file's
//!   body, an edit) are the language's vocabulary as much as the task's
//!   and a briefing that listed them would be a dump, so they are left
//!   out; **recall with code** counts them too, for comparison. In prose,
//!   hyphenated English (`end-to-end`) is not an identifier, and neither is
//!   a quantity (`16-byte`, `200ms`);
//! - **recoverable recall** (strategies that keep originals): the same
//!   share, counting an identifier the compacted history lost as kept when
//!   one of its handles (in a placeholder or the briefing's index) leads
//!   to an original that holds it — what the model can get back with the
//!   recall tool; and the index's tokens beside the briefing's;
//! - **precision** (strategies that write a briefing; its index of
//!   recallable originals left out): of the identifiers
//!   the briefing names that appear before the cut, the share the agent
//!   writes after it;
//! - tokens kept (share of the pre-cut tokens), validity, briefing size.
//!
//! ```
//! use abridge::model::decode;
//! use abridge_eval::{EvalOptions, evaluate};
//!
//! let bytes = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/coding-agent.openai.json"))?;
//! let conv = decode(&bytes)?.remove(0);
//! let cuts = evaluate("coding-agent", &conv, &EvalOptions::default(), &|| Vec::new(), None);
//! assert_eq!(cuts.len(), 2); // at 50 % and 75 % of its turns
//! assert!(cuts[0].results.iter().any(|r| r.strategy == abridge_eval::Strategy::Offline));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod html;
mod metrics;
mod probes;
mod sources;
mod strategy;
mod sweep;

pub use html::html;
pub use metrics::Targets;
pub use probes::{Llm, Probe, ProbeKind};
pub use sources::{SourceFigures, Spread, StrategyFigures, by_source};
pub use strategy::Strategy;
pub use sweep::{SWEEP, SweepRow, sweep};

use abridge::Config;
use abridge::model::{Conversation, Role};
use abridge::summarize::Summarizer;
use abridge::tokens::TokenizerKind;
use serde::{Deserialize, Serialize};

/// How an evaluation runs.
#[derive(Debug, Clone)]
pub struct EvalOptions {
    /// Budget as a share of the pre-cut tokens.
    pub budget: f64,
    /// Tokenizer the budget and sizes are counted with.
    pub tokenizer: TokenizerKind,
    /// Engine settings (pipeline, summary size…); the target comes from `budget`.
    pub config: Config,
}

impl Default for EvalOptions {
    fn default() -> Self {
        EvalOptions {
            budget: 0.1,
            tokenizer: TokenizerKind::O200kBase,
            config: Config::default(),
        }
    }
}

/// Where a transcript was cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum CutKind {
    /// Where the agent compacted its own context.
    Recorded,
    /// At this percentage of the agent's turns.
    Fraction {
        /// 50 or 75.
        percent: u8,
    },
}

/// One cut of one transcript, every strategy's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CutReport {
    /// The transcript (file and run label).
    pub source: String,
    /// Where it was cut.
    pub cut: CutKind,
    /// Messages of the history before the cut.
    pub messages_before: usize,
    /// Tokens before the cut.
    pub tokens_before: u64,
    /// The budget every strategy compacted to.
    pub budget_tokens: u64,
    /// Identifiers from before the cut that the agent writes after it.
    pub later_used: usize,
    /// Where those were before the cut.
    #[serde(default)]
    pub later_used_from: Origins,
    /// The probe questions asked, when a model was given.
    pub probes: Vec<Probe>,
    /// Why there are no probes although a model was given.
    pub probe_error: Option<String>,
    /// One result per strategy.
    pub results: Vec<StrategyResult>,
}

/// Identifiers counted by where they were before the cut: the first of the
/// head, the user's messages and the agent's words that holds each, else
/// the tool results.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Origins {
    /// In the head: the system prompt and the task.
    pub head: usize,
    /// In the user's messages after it.
    pub user: usize,
    /// In the agent's prose or its calls' arguments.
    pub agent: usize,
    /// Only in tool results.
    pub results: usize,
}

impl Origins {
    /// All of them.
    pub fn total(&self) -> usize {
        self.head + self.user + self.agent + self.results
    }
}

impl std::iter::Sum for Origins {
    fn sum<I: Iterator<Item = Origins>>(all: I) -> Origins {
        all.fold(Origins::default(), |a, o| Origins {
            head: a.head + o.head,
            user: a.user + o.user,
            agent: a.agent + o.agent,
            results: a.results + o.results,
        })
    }
}

/// One section of a briefing: the identifiers it names and those of them
/// the agent used again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SectionScore {
    /// Its heading (`Files`), or `(before the first heading)`.
    pub section: String,
    /// Identifiers it names that only the briefing holds.
    pub named: usize,
    /// Those the agent writes after the cut.
    pub used: usize,
}

/// What one strategy made of the history before a cut.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StrategyResult {
    /// The strategy.
    pub strategy: Strategy,
    /// Tokens of the compacted history.
    pub tokens: u64,
    /// `tokens` over the pre-cut tokens.
    pub kept: f64,
    /// No violation the pre-cut history did not already have.
    pub valid: bool,
    /// Share of the later-used identifiers still present.
    pub recall: f64,
    /// The same, counting the names in the code the agent typed later too.
    #[serde(default)]
    pub recall_with_code: f64,
    /// Share of the later-used identifiers the compacted history holds or
    /// leads to: present, or in an original one of its handles recalls
    /// (strategies that keep originals).
    #[serde(default)]
    pub recoverable: Option<f64>,
    /// Of the later-used names the compacted history lost, the share a
    /// search of the recall tool (`{"query": name}`) finds in the originals
    /// the compactions kept (strategies that keep originals; `None` when
    /// nothing was lost).
    #[serde(default)]
    pub findable: Option<f64>,
    /// Tokens of the briefing's index of recallable originals.
    #[serde(default)]
    pub index_tokens: Option<u64>,
    /// Share of the briefing's identifiers the agent uses later (briefings only).
    pub precision: Option<f64>,
    /// Later-used identifiers the compacted history lost.
    #[serde(default)]
    pub missed: Vec<String>,
    /// Where those were before the cut: most losses are names the agent
    /// only ever saw in a tool result, which no briefing can name without
    /// naming many that are never used again.
    #[serde(default)]
    pub missed_from: Origins,
    /// The recall had nothing the head, the user or the agent wrote been
    /// lost — only what was in tool results alone: the most a briefing
    /// reaches without naming tool output.
    #[serde(default)]
    pub recall_if_said_kept: f64,
    /// Identifiers the briefing names (from before the cut) that the agent
    /// never writes after it.
    #[serde(default)]
    pub unused: Vec<String>,
    /// Precision by section of the briefing: each identifier it names (that
    /// the rest of the history does not hold) counted in the first section
    /// that names it.
    #[serde(default)]
    pub sections: Vec<SectionScore>,
    /// The briefing, when the strategy wrote one.
    pub briefing: Option<String>,
    /// Its tokens.
    pub briefing_tokens: Option<u64>,
    /// Why the strategy gave no history, when it failed.
    pub error: Option<String>,
    /// Why the history is over the budget, when the strategy could not
    /// reach it: the engine's smallest valid history is scored instead
    /// (what a proxy sends).
    #[serde(default)]
    pub over_budget: Option<String>,
    /// Mean grade (0–1) of its answers to the probe questions.
    pub probe_score: Option<f64>,
}

/// Every cut of `conv` with every strategy. `llm` builds the LLM
/// summarizers (none: the LLM strategy is left out); with a `judge`, each
/// strategy also answers probe questions.
pub fn evaluate(
    source: &str,
    conv: &Conversation,
    opts: &EvalOptions,
    llm: &dyn Fn() -> Vec<Box<dyn Summarizer>>,
    judge: Option<&dyn Llm>,
) -> Vec<CutReport> {
    let has_llm = !llm().is_empty();
    cuts(conv)
        .into_iter()
        .map(|cut| {
            let Cut {
                kind: cut,
                before,
                recorded,
                after,
            } = cut;
            let pre = Conversation {
                messages: before.iter().map(|&i| conv.messages[i].clone()).collect(),
                ..conv.clone_envelope()
            };
            let recorded = recorded.map(|view| recorded_view(conv, &view));
            let targets = Targets::new(&pre, &conv.messages[after.min(conv.messages.len())..]);
            let tokens_before = strategy::count(&pre, opts.tokenizer);
            let budget_tokens = ((tokens_before as f64) * opts.budget) as u64;
            let probes = judge.map(|j| probes::write(j, &pre, &conv.messages[after..]));
            let (probes, probe_error) = match probes {
                Some(Ok(p)) => (p, None),
                Some(Err(e)) => (Vec::new(), Some(e)),
                None => (Vec::new(), None),
            };
            let results = Strategy::ALL
                .into_iter()
                .filter(|s| match s {
                    Strategy::Recorded => recorded.is_some(),
                    Strategy::Llm => has_llm,
                    _ => true,
                })
                .map(|s| {
                    let run = strategy::Run {
                        pre: &pre,
                        budget: budget_tokens,
                        opts,
                        recorded: recorded.as_ref().map(|(c, t)| (c, t.as_str())),
                        llm,
                    };
                    let applied = run.apply(s);
                    let probe_score = match (judge, &applied.conversation) {
                        (Some(j), Some(c)) if !probes.is_empty() => {
                            probes::score(j, &probes, c).ok()
                        }
                        _ => None,
                    };
                    let mut r = targets.score(s, applied, tokens_before, opts.tokenizer);
                    r.probe_score = probe_score;
                    r
                })
                .collect();
            CutReport {
                source: source.to_owned(),
                cut,
                messages_before: pre.messages.len(),
                tokens_before,
                budget_tokens,
                later_used: targets.len(),
                later_used_from: targets.used_from(),
                probes,
                probe_error,
                results,
            }
        })
        .collect()
}

/// What the agent saw right after it compacted (messages `view` of
/// `conv`), and its summary.
fn recorded_view(conv: &Conversation, view: &[usize]) -> (Conversation, String) {
    let summary = view
        .iter()
        .map(|&i| &conv.messages[i])
        .find(|m| m.meta.compact_summary)
        .map(|m| m.text_content().into_owned())
        .unwrap_or_default();
    let kept = Conversation {
        messages: view.iter().map(|&i| conv.messages[i].clone()).collect(),
        ..conv.clone_envelope()
    };
    (kept, summary)
}

/// One place to cut a transcript.
struct Cut {
    kind: CutKind,
    /// The history the agent had, by message index.
    before: Vec<usize>,
    /// What it saw right after it compacted there, by message index (its
    /// summary among them), when it did.
    recorded: Option<Vec<usize>>,
    /// The first message it wrote after the cut.
    after: usize,
}

/// The recorded compactions (after an earlier one, the agent's history
/// began with what that one left it), else 50 % and 75 % of the assistant
/// turns.
fn cuts(conv: &Conversation) -> Vec<Cut> {
    if !conv.boundaries.is_empty() {
        let mut had: Vec<usize> = Vec::new();
        let mut next = 0;
        let mut out = Vec::new();
        for b in &conv.boundaries {
            if b.index >= conv.messages.len() || b.index < next {
                continue;
            }
            had.extend(next..b.index);
            if !had.is_empty() {
                out.push(Cut {
                    kind: CutKind::Recorded,
                    before: had.clone(),
                    recorded: Some(b.view.clone()),
                    after: b.index + 1,
                });
            }
            had = b.view.clone();
            next = b.index + 1;
        }
        return out;
    }
    let turns: Vec<usize> = conv
        .messages
        .iter()
        .enumerate()
        .filter(|(_, m)| m.role == Role::Assistant)
        .map(|(i, _)| i)
        .collect();
    [50u8, 75]
        .into_iter()
        .filter_map(|percent| {
            let at = *turns.get(turns.len() * usize::from(percent) / 100)?;
            (at > 0).then_some(Cut {
                kind: CutKind::Fraction { percent },
                before: (0..at).collect(),
                recorded: None,
                after: at,
            })
        })
        .collect()
}
