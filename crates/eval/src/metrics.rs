//! Recall and precision of identifiers against what the agent wrote later.

use abridge::model::{Conversation, Message, Role, encode, validate};
use abridge::summarize::{identifiers, mentions};
use abridge::tokens::TokenizerKind;

use crate::strategy::{Applied, count};
use crate::{Strategy, StrategyResult};

/// What the agent went on to need after a cut.
#[derive(Debug, Clone)]
pub struct Targets {
    /// Identifiers from before the cut that the agent writes after it.
    used: Vec<String>,
    /// Everything the agent wrote after the cut.
    written: String,
    /// The pre-cut history as text.
    pre_text: String,
    /// Violations the pre-cut history already had.
    pre_violations: Vec<(String, Option<String>)>,
}

/// What the agent itself wrote in `messages`: its text and the values of
/// its tool arguments.
pub fn later_used(messages: &[Message]) -> String {
    let mut out = String::new();
    for m in messages.iter().filter(|m| m.role == Role::Assistant) {
        out.push_str(&m.text_content());
        for c in m.tool_calls() {
            match c.arguments.to_value() {
                serde_json::Value::Object(o) => {
                    for v in o.values() {
                        out.push(' ');
                        out.push_str(v.as_str().map_or(v.to_string(), str::to_owned).as_str());
                    }
                }
                other => {
                    out.push(' ');
                    out.push_str(&other.to_string());
                }
            }
        }
        out.push('\n');
    }
    out
}

fn text_of(conv: &Conversation) -> String {
    encode(conv).map(|v| v.to_string()).unwrap_or_default()
}

fn violations(conv: &Conversation) -> Vec<(String, Option<String>)> {
    validate(conv)
        .into_iter()
        .map(|v| (v.rule.code().to_owned(), v.id))
        .collect()
}

impl Targets {
    /// The targets of a cut: `pre` is the history before it, `after` what follows.
    pub fn new(pre: &Conversation, after: &[Message]) -> Targets {
        let pre_text = text_of(pre);
        let written = later_used(after);
        let mut used: Vec<String> = Vec::new();
        for id in identifiers(&written) {
            if !used.contains(&id) && pre_text.contains(&id) {
                used.push(id);
            }
        }
        Targets {
            used,
            written,
            pre_text,
            pre_violations: violations(pre),
        }
    }

    /// How many identifiers the agent used later.
    pub fn len(&self) -> usize {
        self.used.len()
    }

    /// True when the agent used none.
    pub fn is_empty(&self) -> bool {
        self.used.is_empty()
    }

    /// Share of the later-used identifiers that `text` mentions.
    pub fn recall(&self, text: &str) -> f64 {
        if self.used.is_empty() {
            return 1.0;
        }
        let kept = self.used.iter().filter(|id| mentions(text, id)).count();
        kept as f64 / self.used.len() as f64
    }

    /// Of the identifiers `briefing` names that appear before the cut, the
    /// share the agent writes after it.
    pub fn precision(&self, briefing: &str) -> f64 {
        let named: Vec<String> = identifiers(briefing)
            .into_iter()
            .filter(|id| self.pre_text.contains(id.as_str()))
            .collect();
        if named.is_empty() {
            return 0.0;
        }
        let used = named
            .iter()
            .filter(|id| mentions(&self.written, id))
            .count();
        used as f64 / named.len() as f64
    }

    pub(crate) fn score(
        &self,
        strategy: Strategy,
        applied: Applied,
        tokens_before: u64,
        kind: TokenizerKind,
    ) -> StrategyResult {
        let Some(conv) = applied.conversation else {
            return StrategyResult {
                strategy,
                tokens: 0,
                kept: 0.0,
                valid: false,
                recall: 0.0,
                precision: None,
                briefing: None,
                briefing_tokens: None,
                error: applied.error,
                probe_score: None,
            };
        };
        let tokens = count(&conv, kind);
        let valid = violations(&conv)
            .iter()
            .all(|v| self.pre_violations.contains(v));
        StrategyResult {
            strategy,
            tokens,
            kept: tokens as f64 / tokens_before.max(1) as f64,
            valid,
            recall: self.recall(&text_of(&conv)),
            precision: applied.briefing.as_deref().map(|b| self.precision(b)),
            briefing_tokens: applied.briefing.as_deref().map(|b| kind.count(b) as u64),
            briefing: applied.briefing,
            error: applied.error,
            probe_score: None,
        }
    }
}
