//! The `summarize` step: the old region becomes one briefing.
//!
//! The briefing is built from the *original* messages of the region (not the
//! clipped ones the earlier steps left), absorbs an earlier briefing found in
//! the head (compactions chain, wrappers never nest), and goes right after
//! the head as a user message wrapped in `<compacted-history>`. Iterations
//! holding a pinned message are kept verbatim after it. Summarizers are tried
//! in order; an attempt that fails or returns an unusable briefing (empty,
//! too short, wrapper tags, not smaller than what it replaces, over budget)
//! falls through to the next. Error text never becomes briefing text.

use std::time::Instant;

use abridge_model::{Message, Role, head_len, iterations};
use abridge_summarize::{
    FactConfig, Request, SummarizeError, Summarizer, Verification, defuse, extract, leaks_wrapper,
    task_text, unwrap, verify, wrap,
};
use abridge_tokens::TokenizerKind;
use serde::Serialize;

/// One summarizer attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Attempt {
    /// Summarizer name.
    pub summarizer: String,
    /// Whether its briefing was used.
    pub ok: bool,
    /// Why not, when it was not.
    pub error: Option<String>,
    /// Wall time in milliseconds.
    pub ms: u64,
    /// For an LLM briefing that was used: what verification repaired.
    pub verification: Option<Verification>,
}

/// The result of a successful step.
pub(crate) struct Briefed {
    pub(crate) messages: Vec<Message>,
    pub(crate) summarizer: String,
    pub(crate) replaced_iterations: usize,
}

/// What the step needs.
pub(crate) struct Step<'a> {
    pub(crate) original: &'a [Message],
    /// Token count of each original message (from the compactor's cache).
    pub(crate) original_tokens: &'a [u64],
    pub(crate) pinned: &'a [bool],
    pub(crate) work: &'a [Message],
    pub(crate) tail_len: usize,
    pub(crate) budget: usize,
    pub(crate) wrapper: &'a str,
    pub(crate) tokenizer: TokenizerKind,
    pub(crate) facts: &'a FactConfig,
    pub(crate) focus: Option<&'a str>,
}

/// Shortest briefing accepted, in characters.
const MIN_CHARS: usize = 30;

pub(crate) fn run(
    step: &Step<'_>,
    summarizers: &[Box<dyn Summarizer>],
    attempts: &mut Vec<Attempt>,
) -> Option<Briefed> {
    let orig = step.original;
    let head = head_len(orig);
    let end = orig.len().checked_sub(step.tail_len)?;
    if end <= head {
        return None;
    }
    let previous_at = orig[..head]
        .iter()
        .position(|m| m.role == Role::User && unwrap(step.wrapper, &m.text_content()).is_some());
    let previous_text = previous_at.map(|i| orig[i].text_content());
    let previous = previous_text
        .as_deref()
        .and_then(|t| unwrap(step.wrapper, t));
    let mut replaced: Vec<Message> = Vec::new();
    let mut kept: Vec<Message> = Vec::new();
    let mut replaced_iterations = 0;
    let mut region_tokens = 0;
    for it in iterations(orig)
        .into_iter()
        .filter(|it| it.start >= head && it.end <= end)
    {
        if step.pinned[it.range()].iter().any(|p| *p) {
            // Carry the pin: later steps must not touch these either.
            kept.extend(it.range().map(|i| {
                let mut m = orig[i].clone();
                m.meta.pinned |= step.pinned[i];
                m
            }));
        } else {
            replaced.extend_from_slice(&orig[it.range()]);
            region_tokens += step.original_tokens[it.range()].iter().sum::<u64>() as usize;
            replaced_iterations += 1;
        }
    }
    if replaced.is_empty() {
        return None;
    }
    let task = task_text(&orig[..head], step.wrapper);
    let req = Request {
        task: &task,
        region: &replaced,
        previous,
        tail: &step.work[step.work.len() - step.tail_len..],
        budget_tokens: step.budget,
        tokenizer: step.tokenizer,
        focus: step.focus,
    };
    for s in summarizers {
        let start = Instant::now();
        let result = s
            .summarize(&req)
            .map(|text| {
                if s.quotes_verbatim() {
                    defuse(step.wrapper, &text)
                } else {
                    text
                }
            })
            .and_then(|text| check(&text, step, region_tokens, s.quotes_verbatim()).map(|()| text));
        let ms = start.elapsed().as_millis() as u64;
        match result {
            Ok(text) => {
                // An LLM briefing is checked against the facts of the same
                // history: lost facts are appended, unsupported claims flagged.
                let (text, verification) = if s.quotes_verbatim() {
                    (text, None)
                } else {
                    let facts = extract(&replaced, step.facts);
                    let (t, v) = verify(&text, &facts, step.budget, step.tokenizer);
                    (t, Some(v))
                };
                attempts.push(Attempt {
                    summarizer: s.name(),
                    ok: true,
                    error: None,
                    ms,
                    verification,
                });
                let mut note = Message::text(Role::User, wrap(step.wrapper, &text));
                note.meta.compact_summary = true;
                let mut messages = Vec::with_capacity(head + 1 + kept.len() + step.tail_len);
                messages.extend(
                    orig[..head]
                        .iter()
                        .enumerate()
                        .filter(|(i, _)| Some(*i) != previous_at)
                        .map(|(i, m)| {
                            let mut m = m.clone();
                            m.meta.pinned |= step.pinned[i];
                            m
                        }),
                );
                messages.push(note);
                messages.append(&mut kept);
                messages.extend_from_slice(&step.work[step.work.len() - step.tail_len..]);
                return Some(Briefed {
                    messages,
                    summarizer: s.name(),
                    replaced_iterations,
                });
            }
            Err(e) => attempts.push(Attempt {
                summarizer: s.name(),
                ok: false,
                error: Some(e.to_string()),
                ms,
                verification: None,
            }),
        }
    }
    None
}

/// Rejects briefings that cannot be used.
fn check(
    text: &str,
    step: &Step<'_>,
    region_tokens: usize,
    quotes: bool,
) -> Result<(), SummarizeError> {
    let reject = |why: String| Err(SummarizeError::Rejected(why));
    let trimmed = text.trim();
    if trimmed.chars().count() < MIN_CHARS {
        return reject(format!("shorter than {MIN_CHARS} characters"));
    }
    if leaks_wrapper(step.wrapper, trimmed) {
        return reject(format!("contains <{}> tags", step.wrapper));
    }
    if !quotes
        && [
            "<tool_use",
            "<tool_call",
            "<function_call",
            "</tool_result>",
        ]
        .iter()
        .any(|t| trimmed.contains(t))
    {
        return reject("contains tool-call markup".into());
    }
    let tokens = step.tokenizer.count(trimmed);
    if tokens >= region_tokens {
        return reject(format!(
            "not smaller than what it replaces ({tokens} ≥ {region_tokens} tokens)"
        ));
    }
    if tokens > step.budget + step.budget / 10 {
        return reject(format!("over budget ({tokens} > {} tokens)", step.budget));
    }
    Ok(())
}
