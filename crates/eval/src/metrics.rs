//! Recall and precision of identifiers against what the agent wrote later.

use abridge::model::{Conversation, Message, Role, encode, validate};
use abridge::summarize::{ToolKind, classify, identifiers, mentions, prose_identifiers};
use abridge::tokens::TokenizerKind;

use crate::strategy::{Applied, count};
use crate::{Strategy, StrategyResult};

/// What the agent went on to need after a cut.
#[derive(Debug, Clone)]
pub struct Targets {
    /// Identifiers from before the cut that the agent refers to after it
    /// (its prose and reference arguments).
    used: Vec<String>,
    /// The same with the names in the code it types after it (file
    /// bodies, edits) added.
    used_with_code: Vec<String>,
    /// Everything the agent wrote after the cut.
    written: String,
    /// The pre-cut history as text.
    pre_text: String,
    /// Violations the pre-cut history already had.
    pre_violations: Vec<(String, Option<String>)>,
}

/// An argument this long is a body the agent typed (a script, a payload),
/// not a reference.
const BODY_CHARS: usize = 400;

/// What the agent wrote, sorted: its prose, the arguments that refer to
/// things (paths, commands, ids, patterns), and the bodies it typed
/// (file contents, edits, long arguments). Names in bodies are as much the
/// language's vocabulary (`Map.get`, `_params`) as the task's, so they do
/// not count as needed; writing one later still shows a briefing's name
/// was of use.
struct Written {
    prose: String,
    references: String,
    bodies: String,
}

impl Written {
    fn of(messages: &[Message]) -> Written {
        let mut w = Written {
            prose: String::new(),
            references: String::new(),
            bodies: String::new(),
        };
        for m in messages.iter().filter(|m| m.role == Role::Assistant) {
            w.prose.push_str(&m.text_content());
            w.prose.push('\n');
            for c in m.tool_calls() {
                let args = c.arguments.to_value();
                let path = match classify(&c.name, &args) {
                    ToolKind::Write(p) | ToolKind::Edit(p) => Some(p.to_owned()),
                    _ => None,
                };
                let mut values = Vec::new();
                strings(&args, &mut values);
                for v in values {
                    let body = v.len() >= BODY_CHARS || path.as_ref().is_some_and(|p| *p != v);
                    let to = if body {
                        &mut w.bodies
                    } else {
                        &mut w.references
                    };
                    to.push_str(&v);
                    to.push('\n');
                }
            }
        }
        w
    }
}

/// Every scalar in `v` as text.
fn strings(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::String(s) => out.push(s.clone()),
        serde_json::Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
        serde_json::Value::Object(o) => o.values().for_each(|x| strings(x, out)),
        other => out.push(other.to_string()),
    }
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

/// Share of `ids` that `text` mentions (1 when there are none).
fn share_kept(ids: &[String], text: &str) -> f64 {
    if ids.is_empty() {
        return 1.0;
    }
    let kept = ids.iter().filter(|id| mentions(text, id)).count();
    kept as f64 / ids.len() as f64
}

impl Targets {
    /// The targets of a cut: `pre` is the history before it, `after` what follows.
    pub fn new(pre: &Conversation, after: &[Message]) -> Targets {
        let pre_text = text_of(pre);
        let w = Written::of(after);
        let before = |ids: Vec<String>| {
            let mut out: Vec<String> = Vec::new();
            for id in ids {
                if !out.contains(&id) && pre_text.contains(&id) {
                    out.push(id);
                }
            }
            out
        };
        // Names in the agent's prose, then in the arguments that refer to things.
        let mut referred = prose_identifiers(&w.prose);
        referred.extend(identifiers(&w.references));
        let used = before(referred.clone());
        referred.extend(identifiers(&w.bodies));
        Targets {
            used,
            used_with_code: before(referred),
            written: format!("{}\n{}\n{}", w.prose, w.references, w.bodies),
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
        share_kept(&self.used, text)
    }

    /// [`recall`](Self::recall) counting the names in the code the agent
    /// types after the cut too.
    pub fn recall_with_code(&self, text: &str) -> f64 {
        share_kept(&self.used_with_code, text)
    }

    /// The later-used identifiers `text` does not mention.
    pub fn missed(&self, text: &str) -> Vec<String> {
        self.used
            .iter()
            .filter(|id| !mentions(text, id))
            .cloned()
            .collect()
    }

    /// The identifiers `briefing` names that appear before the cut.
    fn named(&self, briefing: &str) -> Vec<String> {
        prose_identifiers(briefing)
            .into_iter()
            .filter(|id| self.pre_text.contains(id.as_str()))
            .collect()
    }

    /// Of the identifiers `briefing` names that appear before the cut, the
    /// share the agent writes after it.
    pub fn precision(&self, briefing: &str) -> f64 {
        let named = self.named(briefing).len();
        if named == 0 {
            return 0.0;
        }
        (named - self.unused(briefing).len()) as f64 / named as f64
    }

    /// The identifiers `briefing` names (from before the cut) that the
    /// agent never writes after it.
    pub fn unused(&self, briefing: &str) -> Vec<String> {
        self.named(briefing)
            .into_iter()
            .filter(|id| !mentions(&self.written, id))
            .collect()
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
                recall_with_code: 0.0,
                precision: None,
                missed: self.used.clone(),
                unused: Vec::new(),
                briefing: None,
                briefing_tokens: None,
                error: applied.error,
                probe_score: None,
            };
        };
        let tokens = count(&conv, kind);
        let text = text_of(&conv);
        let valid = violations(&conv)
            .iter()
            .all(|v| self.pre_violations.contains(v));
        StrategyResult {
            strategy,
            tokens,
            kept: tokens as f64 / tokens_before.max(1) as f64,
            valid,
            recall: self.recall(&text),
            recall_with_code: self.recall_with_code(&text),
            missed: self.missed(&text),
            unused: applied
                .briefing
                .as_deref()
                .map(|b| self.unused(b))
                .unwrap_or_default(),
            precision: applied.briefing.as_deref().map(|b| self.precision(b)),
            briefing_tokens: applied.briefing.as_deref().map(|b| kind.count(b) as u64),
            briefing: applied.briefing,
            error: applied.error,
            probe_score: None,
        }
    }
}
