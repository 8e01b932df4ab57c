//! Recall and precision of identifiers against what the agent wrote later.

use std::collections::HashSet;

use abridge::model::{Conversation, Message, Role, fingerprint, head_len, validate};
use abridge::recall::split_index;
use abridge::summarize::ident::{identifiers, mentions, prose_identifiers};
use abridge::summarize::tools::split_arguments;
use abridge::tokens::TokenizerKind;

use crate::strategy::{Applied, count, text_of};
use crate::{Origins, SectionScore, Strategy, StrategyResult};

/// What the agent went on to need after a cut.
#[derive(Debug, Clone)]
pub struct Targets {
    /// Identifiers from before the cut that the agent refers to after it
    /// (its prose and reference arguments).
    used: Vec<String>,
    /// Where each of `used` was before the cut.
    origins: Vec<Origin>,
    /// The same with the names in the code it types after it (file
    /// bodies, edits) added.
    used_with_code: Vec<String>,
    /// Everything the agent wrote after the cut.
    written: String,
    /// The pre-cut history as text.
    pre_text: String,
    /// Violations the pre-cut history already had.
    pre_violations: Vec<(String, Option<String>)>,
    /// Fingerprints of the summaries the history held before the cut (an
    /// agent's own, from an earlier compaction): what a strategy keeps of
    /// them is the rest of the history, not its briefing.
    summaries_before: HashSet<u64>,
}

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
                let args = c.arguments.fields();
                let (references, bodies) = split_arguments(&c.name, &args);
                for (to, values) in [(&mut w.references, references), (&mut w.bodies, bodies)] {
                    for v in values {
                        to.push_str(v);
                        to.push('\n');
                    }
                }
            }
        }
        w
    }
}

/// Where an identifier was before the cut: the first of these that holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Origin {
    /// The head (system prompt and task), which every abridge strategy keeps.
    Head,
    /// The user's messages after the head.
    User,
    /// The agent's prose or its calls' arguments.
    Agent,
    /// Only the tool results.
    Results,
}

/// The pre-cut history's text by who wrote it.
struct Authored {
    head: String,
    user: String,
    agent: String,
}

impl Authored {
    fn of(pre: &Conversation) -> Authored {
        let head = head_len(&pre.messages);
        let mut a = Authored {
            head: String::new(),
            user: String::new(),
            agent: String::new(),
        };
        for (i, m) in pre.messages.iter().enumerate() {
            let to = match m.role {
                _ if i < head => &mut a.head,
                Role::Assistant => &mut a.agent,
                _ => &mut a.user,
            };
            to.push_str(&m.text_content());
            to.push('\n');
            for c in m.tool_calls() {
                a.agent.push_str(&c.arguments.to_json_text());
                a.agent.push('\n');
            }
        }
        a
    }

    fn origin(&self, id: &str) -> Origin {
        if self.head.contains(id) {
            Origin::Head
        } else if self.user.contains(id) {
            Origin::User
        } else if self.agent.contains(id) {
            Origin::Agent
        } else {
            Origin::Results
        }
    }
}

impl Origins {
    fn count(origins: impl Iterator<Item = Origin>) -> Origins {
        let mut o = Origins::default();
        for x in origins {
            *match x {
                Origin::Head => &mut o.head,
                Origin::User => &mut o.user,
                Origin::Agent => &mut o.agent,
                Origin::Results => &mut o.results,
            } += 1;
        }
        o
    }
}

fn violations(conv: &Conversation) -> Vec<(String, Option<String>)> {
    validate(conv)
        .into_iter()
        .map(|v| (v.rule.code().to_owned(), v.id))
        .collect()
}

/// Precision from [`Targets::judge`]'s count and unused names (0 when the
/// briefing names none).
fn share_of_named(named: usize, unused: &[String]) -> f64 {
    if named == 0 {
        return 0.0;
    }
    (named - unused.len()) as f64 / named as f64
}

/// What the briefing heading before no section is called.
const BEFORE_HEADINGS: &str = "(before the first heading)";

/// `briefing`'s sections (split at `## ` headings) with the identifiers of
/// `named` each is the first to name, and how many of those are not in
/// `unused`. Sections that name none are left out.
fn by_section(briefing: &str, named: &[String], unused: &[String]) -> Vec<SectionScore> {
    let mut sections: Vec<(String, String)> = vec![(BEFORE_HEADINGS.to_owned(), String::new())];
    for line in briefing.lines() {
        match line.strip_prefix("## ") {
            Some(heading) => sections.push((heading.trim().to_owned(), String::new())),
            None => {
                if let Some((_, text)) = sections.last_mut() {
                    text.push_str(line);
                    text.push('\n');
                }
            }
        }
    }
    let mut scores: Vec<SectionScore> = Vec::new();
    for id in named {
        let Some((title, _)) = sections.iter().find(|(_, text)| mentions(text, id)) else {
            continue;
        };
        let used = usize::from(!unused.contains(id));
        match scores.iter_mut().find(|s| &s.section == title) {
            Some(s) => {
                s.named += 1;
                s.used += used;
            }
            None => scores.push(SectionScore {
                section: title.clone(),
                named: 1,
                used,
            }),
        }
    }
    scores
}

/// What tells a summary message from another.
fn summary_print(m: &Message) -> u64 {
    fingerprint(std::slice::from_ref(m))
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
        let authored = Authored::of(pre);
        Targets {
            origins: used.iter().map(|id| authored.origin(id)).collect(),
            used,
            used_with_code: before(referred),
            written: format!("{}\n{}\n{}", w.prose, w.references, w.bodies),
            pre_text,
            pre_violations: violations(pre),
            summaries_before: pre
                .messages
                .iter()
                .filter(|m| m.meta.compact_summary)
                .map(summary_print)
                .collect(),
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
        self.recall_missing(self.missed(text).len())
    }

    /// Recall when `missed` of the later-used identifiers are missing.
    fn recall_missing(&self, missed: usize) -> f64 {
        if self.used.is_empty() {
            return 1.0;
        }
        (self.used.len() - missed) as f64 / self.used.len() as f64
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

    /// Where the later-used identifiers were before the cut.
    pub fn used_from(&self) -> Origins {
        Origins::count(self.origins.iter().copied())
    }

    /// The later-used identifiers `text` does not mention, and where they
    /// were (one look per identifier).
    fn lost(&self, text: &str) -> (Vec<String>, Origins) {
        let lost: Vec<(&String, Origin)> = self
            .used
            .iter()
            .zip(self.origins.iter().copied())
            .filter(|(id, _)| !mentions(text, id))
            .collect();
        let origins = Origins::count(lost.iter().map(|(_, o)| *o));
        (
            lost.into_iter().map(|(id, _)| id.clone()).collect(),
            origins,
        )
    }

    /// The identifiers `briefing` names that appear before the cut
    /// and that `kept` (the rest of the compacted history) does not hold
    /// verbatim — what only the briefing carries —, and those of them the
    /// agent never writes after it.
    fn judge(&self, briefing: &str, kept: &str) -> (Vec<String>, Vec<String>) {
        let named: Vec<String> = prose_identifiers(briefing)
            .into_iter()
            .filter(|id| self.pre_text.contains(id.as_str()) && !kept.contains(id.as_str()))
            .collect();
        let unused = named
            .iter()
            .filter(|id| !mentions(&self.written, id))
            .cloned()
            .collect();
        (named, unused)
    }

    /// Of the identifiers `briefing` names that appear before the cut and
    /// that `kept` does not hold, the share the agent writes after it.
    pub fn precision(&self, briefing: &str, kept: &str) -> f64 {
        let (named, unused) = self.judge(briefing, kept);
        share_of_named(named.len(), &unused)
    }

    /// The identifiers `briefing` names (from before the cut, not held by
    /// `kept`) that the agent never writes after it.
    pub fn unused(&self, briefing: &str, kept: &str) -> Vec<String> {
        self.judge(briefing, kept).1
    }

    /// The result of a strategy that gave no history: everything missed.
    fn failed(&self, strategy: Strategy, error: Option<String>) -> StrategyResult {
        StrategyResult {
            strategy,
            tokens: 0,
            kept: 0.0,
            valid: false,
            recall: 0.0,
            recall_with_code: 0.0,
            recoverable: None,
            findable: None,
            index_tokens: None,
            precision: None,
            missed: self.used.clone(),
            missed_from: self.used_from(),
            recall_if_said_kept: self.recall_missing(self.used_from().results),
            unused: Vec::new(),
            sections: Vec::new(),
            briefing: None,
            briefing_tokens: None,
            error,
            over_budget: None,
            probe_score: None,
        }
    }

    pub(crate) fn score(
        &self,
        strategy: Strategy,
        applied: Applied,
        tokens_before: u64,
        kind: TokenizerKind,
    ) -> StrategyResult {
        let Some(mut conv) = applied.conversation else {
            return self.failed(strategy, applied.error);
        };
        let tokens = count(&conv, kind);
        let text = text_of(&conv);
        let (missed, missed_from) = self.lost(&text);
        let valid = violations(&conv)
            .iter()
            .all(|v| self.pre_violations.contains(v));
        // Precision judges what the briefing says, not its index of
        // recallable originals (a catalog, whose cost is its tokens), and
        // only what the rest of the history does not already hold.
        let judged = applied.briefing.as_deref().map(|b| {
            conv.messages.retain(|m| {
                !m.meta.compact_summary || self.summaries_before.contains(&summary_print(m))
            });
            let said = split_index(b).0;
            let (named, unused) = self.judge(said, &text_of(&conv));
            let sections = by_section(said, &named, &unused);
            (named.len(), unused, sections)
        });
        StrategyResult {
            strategy,
            tokens,
            kept: tokens as f64 / tokens_before.max(1) as f64,
            valid,
            recall: self.recall_missing(missed.len()),
            recall_with_code: self.recall_with_code(&text),
            recoverable: applied.recallable.as_deref().map(|more| {
                let lost = missed.iter().filter(|id| !mentions(more, id)).count();
                self.recall_missing(lost)
            }),
            findable: applied
                .searchable
                .as_deref()
                .filter(|_| !missed.is_empty())
                .map(|all| {
                    let found = missed.iter().filter(|id| mentions(all, id)).count();
                    found as f64 / missed.len() as f64
                }),
            index_tokens: applied
                .briefing
                .as_deref()
                .and_then(|b| split_index(b).1)
                .map(|index| kind.count(index) as u64),
            missed_from,
            recall_if_said_kept: self.recall_missing(missed_from.results),
            missed,
            precision: judged
                .as_ref()
                .map(|(n, unused, _)| share_of_named(*n, unused)),
            sections: judged
                .as_ref()
                .map(|(_, _, sections)| sections.clone())
                .unwrap_or_default(),
            unused: judged.map(|(_, unused, _)| unused).unwrap_or_default(),
            briefing_tokens: applied.briefing.as_deref().map(|b| kind.count(b) as u64),
            briefing: applied.briefing,
            error: applied.error,
            over_budget: applied.over_budget,
            probe_score: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use abridge::model::decode;

    #[test]
    fn each_later_used_name_is_counted_where_it_was_before_the_cut() {
        let body = serde_json::json!({"messages": [
            {"role": "system", "content": "You are a coding agent."},
            {"role": "user", "content": "Fix parse_header."},
            {"role": "assistant", "content": "Reading it first, then `helper_fn`.", "tool_calls": [
                {"id": "c1", "type": "function",
                 "function": {"name": "read", "arguments": "{\"path\": \"src/util.rs\"}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "fn hidden_name() {}"},
            {"role": "user", "content": "Keep MAX_LEN as it is."},
            {"role": "assistant", "content": "Noted."},
            {"role": "assistant", "content": "`parse_header` calls `helper_fn` in `src/util.rs`, \
                next to `hidden_name`; `MAX_LEN` stays."}
        ]});
        let conv = decode(body.to_string().as_bytes()).unwrap().remove(0);
        let (pre, after) = conv.messages.split_at(6);
        let pre = Conversation {
            messages: pre.to_vec(),
            ..conv.clone()
        };
        let t = Targets::new(&pre, after);
        let all = Origins {
            head: 1,
            user: 1,
            agent: 2,
            results: 1,
        };
        assert_eq!(t.used_from(), all);
        assert_eq!(t.lost("nothing kept").1, all);
        let kept = "parse_header helper_fn src/util.rs";
        let lost = Origins {
            user: 1,
            results: 1,
            ..Origins::default()
        };
        let (missed, from) = t.lost(kept);
        assert_eq!(from, lost);
        assert_eq!(missed, ["hidden_name", "MAX_LEN"]);
        assert_eq!(t.missed(kept), missed);
        // Had nothing said been lost, only the result's name would be.
        assert!((t.recall_missing(lost.results) - 0.8).abs() < 1e-9);
    }

    /// Precision judges what only the briefing carries: an agent's own
    /// summary from before the cut, kept in the compacted history, is part
    /// of the rest of the history, like any message the strategy kept.
    #[test]
    fn an_agents_earlier_summary_is_the_rest_of_the_history_for_precision() {
        let body = serde_json::json!({"messages": [
            {"role": "system", "content": "You are a coding agent."},
            {"role": "user", "content": "Earlier work: `agent_kept_name` was renamed."},
            {"role": "user", "content": "Fix `parse_header` in `briefed_name`."},
            {"role": "assistant", "content": "Done with `agent_kept_name` and `briefed_name`."}
        ]});
        let mut conv = decode(body.to_string().as_bytes()).unwrap().remove(0);
        conv.messages[1].meta.compact_summary = true;
        let (pre, after) = conv.messages.split_at(3);
        let pre = Conversation {
            messages: pre.to_vec(),
            ..conv.clone()
        };
        let t = Targets::new(&pre, after);
        let briefing = "## Identifiers used\n`agent_kept_name`, `briefed_name`";
        let mut note = Message::text(Role::User, briefing.to_owned());
        note.meta.compact_summary = true;
        let compacted = Conversation {
            messages: vec![pre.messages[0].clone(), pre.messages[1].clone(), note],
            ..conv.clone()
        };
        let applied = Applied {
            conversation: Some(compacted),
            briefing: Some(briefing.to_owned()),
            error: None,
            recallable: None,
            over_budget: None,
            searchable: None,
        };
        let r = t.score(Strategy::Pipeline, applied, 100, TokenizerKind::O200kBase);
        let named: usize = r.sections.iter().map(|s| s.named).sum();
        assert_eq!(
            named, 1,
            "only `briefed_name` is the briefing's alone: {:?}",
            r.sections
        );
    }

    #[test]
    fn each_name_counts_in_the_first_section_that_names_it() {
        let briefing = "Paths below are relative to `src`.\n\
            ## Files\n- edited · `lib.rs` (`parse_header`)\n\
            ## Identifiers used\n`parse_header`, `MAX_LEN`, `old_helper`\n";
        let named: Vec<String> = ["lib.rs", "parse_header", "MAX_LEN", "old_helper"]
            .map(String::from)
            .into();
        let unused = vec!["old_helper".to_owned(), "lib.rs".to_owned()];
        let got = by_section(briefing, &named, &unused);
        assert_eq!(
            got,
            [
                SectionScore {
                    section: "Files".into(),
                    named: 2,
                    used: 1
                },
                SectionScore {
                    section: "Identifiers used".into(),
                    named: 2,
                    used: 1
                },
            ]
        );
        // A name before any heading has a section of its own.
        let got = by_section("`src` first\n## Files\n", &["src".to_owned()], &[]);
        assert_eq!(got[0].section, BEFORE_HEADINGS);
        assert_eq!((got[0].named, got[0].used), (1, 1));
    }
}
