//! The facts of the region a briefing replaces, read once per rewrite: a
//! briefing written again over a shorter region of the same history (the
//! tail grown into it, see `Rewriter::grow_tail`) or a longer one (a
//! shorter tail) resumes from a copy of the extraction kept part way,
//! instead of reading the whole region again.
//!
//! Regions are read from the history as it came in, which does not change
//! during a rewrite, so a copy is named by where it started and how many
//! messages it read.

use std::ops::Range;

use abridge_model::Message;
use abridge_summarize::FactConfig;
use abridge_summarize::facts::{Extraction, Facts, extract};

#[derive(Default)]
pub(crate) struct RegionFacts {
    /// Where the next extraction keeps its copy, in messages from the
    /// history's end (as `tail_len` counts): where a later region may end
    /// at the earliest.
    pub(crate) keep_at_tail: Option<usize>,
    /// The copy: the history index it started at, and the extraction.
    kept: Option<(usize, Extraction<'static>)>,
}

impl RegionFacts {
    /// The facts of `region`; `run` says where the history holds it as one
    /// run (nothing pinned in it), which is when a copy can serve.
    pub(crate) fn of(
        &mut self,
        history: &[Message],
        run: Option<Range<usize>>,
        region: &[Message],
        cfg: &FactConfig,
    ) -> Facts {
        let keep_at_tail = self.keep_at_tail.take();
        let Some(run) = run else {
            return extract(region, cfg);
        };
        let mut e = match &self.kept {
            Some((start, kept)) if *start == run.start && start + kept.fed() <= run.end => {
                kept.clone()
            }
            _ => Extraction::default(),
        };
        let at = run.start + e.fed();
        let keep = keep_at_tail
            .and_then(|tail| history.len().checked_sub(tail))
            .filter(|k| (at + 1..run.end).contains(k));
        if let Some(k) = keep {
            e.feed(&history[at..k], cfg);
            self.kept = Some((run.start, e.detached()));
            e.feed(&history[k..run.end], cfg);
        } else {
            e.feed(&history[at..run.end], cfg);
        }
        e.finish()
    }
}

#[cfg(test)]
mod tests {
    use abridge_model::decode;
    use serde_json::{Value, json};

    use super::*;

    /// A system prompt, a task, then rounds of the agent saying what it
    /// does, calling a tool and reading its result (every third fails),
    /// with a user correction now and then.
    fn history() -> Vec<Message> {
        let mut messages: Vec<Value> = vec![
            json!({"role": "system", "content": "You are a coding agent."}),
            json!({"role": "user", "content": "Fix the parser in src/parse.rs."}),
        ];
        for round in 0..14 {
            let id = format!("call_{round}");
            let (name, args) = match round % 3 {
                0 => ("read_file", json!({"path": format!("src/mod_{round}.rs")})),
                1 => (
                    "edit_file",
                    json!({"path": "src/parse.rs", "old_string": "a", "new_string": format!("b{round}")}),
                ),
                _ => (
                    "shell",
                    json!({"command": format!("cargo test parse_{round}")}),
                ),
            };
            messages.push(json!({"role": "assistant",
                "content": format!("Next I look at `parse_{round}` in src/parse.rs. Then on."),
                "tool_calls": [{"id": id, "type": "function",
                    "function": {"name": name, "arguments": args.to_string()}}]}));
            let out = if round % 3 == 2 {
                format!("error[E0425]: cannot find value `tok_{round}`\nexit code 101")
            } else {
                format!("fn parse_{round}() {{}}\n")
            };
            messages.push(json!({"role": "tool", "tool_call_id": id, "content": out}));
            if round % 5 == 4 {
                messages.push(json!({"role": "user", "content": "Don't touch src/lex.rs, use Token::Ident instead."}));
            }
        }
        let body = json!({"model": "gpt-4o", "messages": messages});
        decode(body.to_string().as_bytes())
            .unwrap()
            .remove(0)
            .messages
    }

    /// Whatever copy was kept, and wherever, the facts of a region are
    /// those a fresh extraction of it gives.
    #[test]
    fn resumed_facts_are_fresh_facts() {
        let h = history();
        let cfg = FactConfig::default();
        let start = 2;
        let mut resumed = 0;
        for first_end in (start + 1..=h.len()).step_by(4) {
            for keep in (start..=h.len()).step_by(3) {
                let mut memo = RegionFacts {
                    keep_at_tail: Some(h.len() - keep),
                    ..RegionFacts::default()
                };
                let first = memo.of(&h, Some(start..first_end), &h[start..first_end], &cfg);
                assert_eq!(first, extract(&h[start..first_end], &cfg));
                for end in start..=h.len() {
                    let kept = memo.kept.as_ref().map(|(_, e)| start + e.fed());
                    resumed += usize::from(kept.is_some_and(|k| k <= end));
                    let facts = memo.of(&h, Some(start..end), &h[start..end], &cfg);
                    assert_eq!(
                        facts,
                        extract(&h[start..end], &cfg),
                        "first {first_end}, copy at {keep}, region to {end}"
                    );
                }
            }
        }
        assert!(resumed > 100, "the copies served {resumed} times");
    }

    /// A region that starts elsewhere, or is not one run of the history,
    /// is read afresh.
    #[test]
    fn another_start_reads_afresh() {
        let h = history();
        let cfg = FactConfig::default();
        let mut memo = RegionFacts {
            keep_at_tail: Some(10),
            ..RegionFacts::default()
        };
        memo.of(&h, Some(2..h.len() - 2), &h[2..h.len() - 2], &cfg);
        assert!(memo.kept.is_some());
        assert_eq!(
            memo.of(&h, Some(4..h.len()), &h[4..], &cfg),
            extract(&h[4..], &cfg)
        );
        let picked: Vec<Message> = h[2..6].iter().chain(&h[8..12]).cloned().collect();
        assert_eq!(memo.of(&h, None, &picked, &cfg), extract(&picked, &cfg));
    }
}
