//! The `summarize` step: the old region becomes one briefing.
//!
//! The briefing is built from the *original* messages of the region (not the
//! clipped ones the earlier steps left), absorbs an earlier briefing found in
//! the head (compactions chain, wrappers never nest), and goes right after
//! the head as a user message wrapped in the configured tag. Iterations
//! holding a pinned message are kept verbatim after it. Summarizers are tried
//! in order; an attempt that fails or returns an unusable briefing (empty,
//! too short, wrapper tags, not smaller than what it replaces, over budget)
//! falls through to the next. Error text never becomes briefing text.
//!
//! With recall on, the briefing ends with the index of what it replaced
//! (`recall::index`), which the engine writes whatever the summarizer:
//! the summarizer sees an earlier briefing without its index, and the
//! earlier index's lines are carried into the new one.

use std::borrow::{Borrow, Cow};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use abridge_model::{Message, Role, Usage, fingerprint, head_len, iterations};
use abridge_summarize::facts::{Facts, task_text};
use abridge_summarize::tasks;
use abridge_summarize::verify::{Evidence, verify};
use abridge_summarize::working;
use abridge_summarize::wrapper::{defuse, leaks_wrapper, unwrap, wrap};
use abridge_summarize::{
    Briefing, FactConfig, Request, Sheet, SummarizeError, Summarizer, Verification,
};
use abridge_tokens::{Counted, TokenizerKind};

use crate::cancel::Cancel;
use crate::config::RecallConfig;
use crate::placeholder;
use crate::recall::{HandleKey, Original, index};
use crate::region_facts::RegionFacts;
use crate::report::{Attempt, AttemptOutcome};

/// The result of a successful step.
pub(crate) struct Briefed {
    /// What goes before the kept tail: head, briefing, working set,
    /// pinned iterations.
    pub(crate) messages: Vec<Message>,
    /// Which of `messages` is the briefing (the head may hold another
    /// message marked as a summary: an agent's own, from before a resume).
    pub(crate) note: usize,
    /// Messages of the kept tail it was written beside, which follow it.
    pub(crate) tail_len: usize,
    pub(crate) summarizer: String,
    pub(crate) replaced_iterations: usize,
    /// Index of the summarizer that wrote it, when calling it again is free
    /// ([`Summarizer::is_instant`]).
    pub(crate) instant: Option<usize>,
    /// The briefing as data, when its summarizer keeps any.
    pub(crate) sheet: Option<Sheet>,
    /// What its index names.
    pub(crate) originals: Vec<Original>,
    /// Tokens of its working set.
    pub(crate) working: Counted,
}

/// What the step needs.
pub(crate) struct Inputs<'a> {
    pub(crate) original: &'a [Message],
    /// Token count of each original message (from the compactor's cache).
    pub(crate) original_tokens: &'a [Counted],
    pub(crate) pinned: &'a [bool],
    /// The kept tail as the steps left it.
    pub(crate) tail: &'a [Message],
    pub(crate) budget: Counted,
    pub(crate) tokenizer: TokenizerKind,
    pub(crate) facts: &'a FactConfig,
    pub(crate) focus: Option<&'a str>,
    /// The thread's last briefing as data: used when the earlier briefing
    /// in the head is that one.
    pub(crate) kept: Option<&'a KeptBriefing>,
    /// `[recall]`, when it is on: the briefing ends with an index of what
    /// it replaced.
    pub(crate) recall: Option<&'a RecallConfig>,
    /// The recall tool's name, when the model can call it: the index names
    /// each original by its handle; without, it is a list for a reader.
    pub(crate) tool: Option<&'a str>,
    pub(crate) error_prefixes: &'a [String],
    /// Share of `budget` the working set may take (0: none).
    pub(crate) working_share: f64,
    /// What the working set may take at least (what it took when the
    /// briefing was first written over a longer region).
    pub(crate) working_floor: Counted,
    /// The key the index's handles are derived with (a shared proxy's tenant).
    pub(crate) key: Option<&'a HandleKey>,
    /// Checked before each summarizer: once set, no briefing.
    pub(crate) cancel: &'a Cancel,
}

/// Shortest briefing accepted, in characters.
const MIN_CHARS: usize = 30;

/// What the briefing replaces and what stays around it.
struct Region<'a> {
    /// Messages before the region (system prompt, task, earlier briefing).
    head: usize,
    /// What an earlier compaction left in the head, absorbed by the new one.
    earlier: Earlier,
    /// Iterations the briefing replaces, in order: borrowed from the
    /// history when they are one run of it (nothing pinned among them).
    replaced: Cow<'a, [Message]>,
    /// Where the history holds them, when they are one run of it.
    run: Option<std::ops::Range<usize>>,
    replaced_iterations: usize,
    /// Their tokens.
    tokens: Counted,
    /// Pinned iterations, kept verbatim after the briefing.
    kept: Vec<Message>,
}

impl<'a> Region<'a> {
    fn of(inp: &Inputs<'a>) -> Option<Region<'a>> {
        let orig = inp.original;
        let head = head_len(orig);
        let end = orig.len().checked_sub(inp.tail.len())?;
        if end < head {
            return None;
        }
        let earlier = Earlier::find(orig, head, &inp.facts.wrapper);
        let mut r = Region {
            head,
            earlier,
            replaced: Cow::Borrowed(&[]),
            run: None,
            replaced_iterations: 0,
            tokens: Counted::ZERO,
            kept: Vec::new(),
        };
        // The replaced messages' run in `orig` while they form one.
        let mut run: Option<std::ops::Range<usize>> = None;
        for it in iterations(orig)
            .into_iter()
            .filter(|it| it.start >= head && it.end <= end)
        {
            if inp.pinned[it.range()].iter().any(|p| *p) {
                // Carry the pin: later steps must not touch these either.
                r.kept
                    .extend(it.range().map(|i| pinned(orig, inp.pinned, i)));
                continue;
            }
            run = match run {
                None if r.replaced.is_empty() => Some(it.range()),
                Some(run) if run.end == it.start => Some(run.start..it.end),
                run => {
                    // Not one run any more: copy what it held, then this.
                    let owned = r.replaced.to_mut();
                    if let Some(run) = run {
                        owned.extend_from_slice(&orig[run]);
                    }
                    owned.extend_from_slice(&orig[it.range()]);
                    None
                }
            };
            r.tokens += inp.original_tokens[it.range()].iter().sum::<Counted>();
            r.replaced_iterations += 1;
        }
        if let Some(run) = run {
            r.replaced = Cow::Borrowed(&orig[run.clone()]);
            r.run = Some(run);
        }
        // The new briefing replaces the earlier one too: with no iteration
        // to replace, it re-condenses that one alone.
        r.tokens += earlier.tokens(inp.original_tokens);
        (!r.replaced.is_empty() || earlier.briefing.is_some()).then_some(r)
    }

    /// Head (without the earlier briefing and working set), the briefing,
    /// the working set, pinned iterations, tail.
    fn assemble(
        self,
        inp: &Inputs<'_>,
        text: &str,
        working: Option<(String, Counted)>,
        summarizer: String,
        sheet: Option<Sheet>,
        originals: Vec<Original>,
    ) -> Briefed {
        let orig = inp.original;
        let mut note = Message::text(Role::User, wrap(&inp.facts.wrapper, text));
        note.meta.compact_summary = true;
        let mut messages = Vec::with_capacity(self.head + 2 + self.kept.len());
        messages.extend(
            (0..self.head)
                .filter(|i| !self.earlier.indexes().any(|e| e == *i))
                .map(|i| pinned(orig, inp.pinned, i)),
        );
        let note_at = messages.len();
        messages.push(note);
        let working_tokens = working.as_ref().map_or(Counted::ZERO, |w| w.1);
        messages.extend(working.map(|w| Message::text(Role::User, w.0)));
        messages.extend(self.kept);
        Briefed {
            messages,
            note: note_at,
            tail_len: inp.tail.len(),
            summarizer,
            replaced_iterations: self.replaced_iterations,
            instant: None,
            sheet,
            originals,
            working: working_tokens,
        }
    }
}

/// What an earlier compaction left among the first `head` messages: its
/// briefing (a user message that is one wrapped briefing) and its working
/// set. A new briefing replaces both.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Earlier {
    pub(crate) briefing: Option<usize>,
    pub(crate) working: Option<usize>,
}

impl Earlier {
    pub(crate) fn find<M: Borrow<Message>>(messages: &[M], head: usize, wrapper: &str) -> Earlier {
        let head = &messages[..head.min(messages.len())];
        let find = |is: &dyn Fn(&str) -> bool| {
            head.iter()
                .map(M::borrow)
                .position(|m| m.role == Role::User && is(&m.text_content()))
        };
        Earlier {
            briefing: find(&|t| unwrap(wrapper, t).is_some()),
            working: find(&working::is_working_set),
        }
    }

    /// Their indexes.
    pub(crate) fn indexes(self) -> impl Iterator<Item = usize> {
        self.briefing.into_iter().chain(self.working)
    }

    /// Their tokens, given each message's.
    pub(crate) fn tokens(self, tokens: &[Counted]) -> Counted {
        self.indexes().map(|i| tokens[i]).sum()
    }
}

/// The working set of the region: the newest copy of each file it read or
/// wrote, most recently touched first, then the earlier working set's
/// files not touched since; none the kept tail reads or writes again (it
/// holds a newer copy). Within `share` of the briefing's budget and half
/// of what the region held (the earlier set's tokens added whole).
fn working_set(inp: &Inputs<'_>, region: &Region<'_>) -> Option<(String, Counted)> {
    if inp.working_share <= 0.0 {
        return None;
    }
    // A placeholder or an excerpt of a read is not a copy of its file: it
    // neither stands for the file here nor makes the region's copy stale.
    let whole = |f: &working::WorkingFile<'_>| {
        !placeholder::is_result_placeholder(&f.text)
            && placeholder::excerpt_handle(&f.text).is_none()
    };
    let newer: Vec<String> = working::files(inp.tail, inp.error_prefixes)
        .into_iter()
        .filter(whole)
        .map(|f| f.path)
        .collect();
    let mut files = working::files(&region.replaced, inp.error_prefixes);
    files.retain(whole);
    if let Some(earlier) = region
        .earlier
        .working
        .and_then(|i| working::parse(&inp.original[i].text_content()))
    {
        let older: Vec<_> = earlier
            .into_iter()
            .filter(|e| !files.iter().any(|f| f.path == e.path))
            .collect();
        files.extend(older);
    }
    files.retain(|f| !newer.contains(&f.path));
    // The earlier set's files come from before the region: what they took
    // is theirs to keep, however little the region itself held.
    let carried = region
        .earlier
        .working
        .map_or(Counted::ZERO, |i| inp.original_tokens[i]);
    let budget = inp
        .budget
        .scaled(inp.working_share)
        .max(inp.working_floor)
        .min(inp.budget)
        .min(region.tokens.scaled(0.5) + carried);
    let (text, tokens) = working::render(&files, budget.get() as usize, inp.tokenizer)?;
    Some((text, Counted::of(tokens)))
}

/// Message `i` with its pin carried.
fn pinned(orig: &[Message], pins: &[bool], i: usize) -> Message {
    let mut m = orig[i].clone();
    m.meta.pinned |= pins[i];
    m
}

pub(crate) fn run(
    inp: &Inputs<'_>,
    summarizers: &[std::sync::Arc<dyn Summarizer>],
    attempts: &mut Vec<Attempt>,
    region_facts: &mut RegionFacts,
) -> Option<Briefed> {
    let region = Region::of(inp)?;
    let head = &inp.original[..region.head];
    let previous_text = region.earlier.briefing.map(|i| head[i].text_content());
    // The earlier briefing is the thread's own when its fingerprint says so.
    let previous_sheet = region
        .earlier
        .briefing
        .zip(inp.kept)
        .filter(|(i, k)| fingerprint(&head[*i..=*i]) == k.fingerprint)
        .map(|(_, k)| &k.sheet);
    let task = task_text(head, &inp.facts.wrapper);
    let (previous, previous_index) = previous_text
        .as_deref()
        .and_then(|t| unwrap(&inp.facts.wrapper, t))
        .map_or((None, None), |t| {
            let (text, index) = index::split(t);
            (Some(text), index)
        });
    let recent = inp.recall.map(|_| recent_text(inp, &task));
    let indexing = Indexing {
        previous: previous_index,
        recent: recent.as_deref().unwrap_or(""),
    };
    // The region's facts, once: the offline sheet, the check of an LLM
    // briefing and the index all read them.
    let facts = region_facts.of(
        inp.original,
        region.run.clone(),
        &region.replaced,
        inp.facts,
    );
    // The working set is kept first; the briefing has what it leaves.
    let mut working = working_set(inp, &region);
    let briefing_budget = inp
        .budget
        .saturating_sub(working.as_ref().map_or(Counted::ZERO, |w| w.1));
    let inp = &Inputs {
        budget: briefing_budget,
        ..*inp
    };
    let req = Request {
        task: &task,
        region: &region.replaced,
        previous,
        previous_sheet,
        tail: inp.tail,
        // The index's share is kept out of what the summarizer may fill.
        budget_tokens: inp
            .recall
            .map_or(briefing_budget, |r| {
                briefing_budget.scaled(1.0 - r.index_share)
            })
            .get() as usize,
        tokenizer: inp.tokenizer,
        focus: inp.focus,
        facts: inp.facts,
        region_facts: Some(&facts),
    };
    let (w, originals, summarizer, instant) = first_written(
        summarizers,
        &req,
        inp,
        (&region, &indexing, &facts),
        attempts,
    )?;
    let mut b = region.assemble(inp, &w.text, working.take(), summarizer, w.sheet, originals);
    b.instant = instant;
    Some(b)
}

/// The task, then the kept tail's text and tool arguments: where a mention
/// ranks an index line first.
fn recent_text(inp: &Inputs<'_>, task: &str) -> String {
    let mut recent = task.to_owned();
    for m in inp.tail {
        recent.push('\n');
        recent.push_str(&m.text_content());
        for c in m.tool_calls() {
            recent.push('\n');
            recent.push_str(&c.arguments.to_json_text());
        }
    }
    recent
}

/// The first summarizer's briefing that is written and passes its checks,
/// with its index appended, the originals it names, who wrote it and (an
/// instant summarizer's) its place in the chain; every attempt recorded.
fn first_written(
    summarizers: &[std::sync::Arc<dyn Summarizer>],
    req: &Request<'_>,
    inp: &Inputs<'_>,
    (region, indexing, facts): (&Region<'_>, &Indexing<'_>, &Facts),
    attempts: &mut Vec<Attempt>,
) -> Option<(Written, Vec<Original>, String, Option<usize>)> {
    for (i, s) in summarizers.iter().enumerate() {
        if inp.cancel.is_cancelled() {
            return None;
        }
        let start = Instant::now();
        let (result, usage) = attempt(s.as_ref(), req, inp, region, facts);
        let ms = start.elapsed().as_millis() as u64;
        let summarizer = s.name();
        match result {
            Ok(mut w) => {
                let originals = with_index(&mut w, inp, region, indexing, facts);
                attempts.push(Attempt {
                    summarizer: summarizer.clone(),
                    ms,
                    outcome: AttemptOutcome::Used {
                        verification: w.verification.take(),
                    },
                    usage,
                });
                return Some((w, originals, summarizer, s.is_instant().then_some(i)));
            }
            Err(error) => attempts.push(Attempt {
                summarizer,
                ms,
                outcome: AttemptOutcome::Failed { error },
                usage,
            }),
        }
    }
    None
}

/// What the index is built from besides the region.
struct Indexing<'a> {
    /// The earlier briefing's index.
    previous: Option<&'a str>,
    /// The task and the kept tail, where a mention ranks a line first.
    recent: &'a str,
}

/// Appends the index of what the briefing replaced to `text`, when recall
/// is on, in what is left of the budget and at most `index_share` of the
/// whole; returns the originals it names (without recall, those of the
/// replaced results, kept for the lines the briefing may quote alone).
fn with_index(
    w: &mut Written,
    inp: &Inputs<'_>,
    region: &Region,
    indexing: &Indexing<'_>,
    facts: &Facts,
) -> Vec<Original> {
    let Some(recall) = inp.recall else {
        return index::unindexed_results(&region.replaced, inp.key);
    };
    let tokens = w
        .tokens
        .unwrap_or_else(|| Counted::of(inp.tokenizer.count(&w.text)));
    let text = &mut w.text;
    let share = recall.index_share;
    let budget = tokens
        .scaled(share / (1.0 - share))
        .min(inp.budget.saturating_sub(tokens))
        .min(region.tokens.saturating_sub(tokens + Counted::new(1)));
    let built = index::build(&index::IndexInputs {
        replaced: &region.replaced,
        previous: indexing.previous,
        recent: indexing.recent,
        tool: inp.tool,
        briefing: text,
        referred: &facts.referred,
        error_prefixes: inp.error_prefixes,
        budget: budget.get() as usize,
        tokenizer: inp.tokenizer,
        key: inp.key,
    });
    if !built.text.is_empty() {
        text.push_str("\n\n");
        text.push_str(built.text.trim_end());
    }
    built.originals
}

/// A briefing that passed its checks.
struct Written {
    text: String,
    verification: Option<Verification>,
    sheet: Option<Sheet>,
    /// Its tokens, when the check's count of it still holds.
    tokens: Option<Counted>,
}

/// One summarizer's briefing, checked; an LLM briefing is also verified
/// against the facts of the same history (lost facts appended, unsupported
/// claims flagged).
/// The written briefing, or why there is none; and what the summarizer
/// reported writing it cost, whether it was used or not.
fn attempt(
    s: &dyn Summarizer,
    req: &Request<'_>,
    inp: &Inputs<'_>,
    region: &Region,
    facts: &Facts,
) -> (Result<Written, SummarizeError>, Option<Usage>) {
    let briefing = match s.brief(req) {
        Ok(b) => b,
        Err(e) => return (Err(e), None),
    };
    let usage = briefing.usage;
    (written(s, briefing, inp, region, facts), usage)
}

/// A briefing checked, and for an LLM's verified.
fn written(
    s: &dyn Summarizer,
    briefing: Briefing,
    inp: &Inputs<'_>,
    region: &Region,
    facts: &Facts,
) -> Result<Written, SummarizeError> {
    if let Some(why) = s.rejects(&briefing.text) {
        return Err(SummarizeError::Rejected(why));
    }
    let quotes = s.quotes_verbatim();
    let mut text = briefing.text;
    if quotes {
        text = defuse(&inp.facts.wrapper, &text);
    }
    let tokens = check(&text, inp, region.tokens, quotes)?;
    if quotes {
        return Ok(Written {
            text,
            verification: None,
            sheet: briefing.sheet,
            tokens: Some(tokens),
        });
    }
    // A task list written again after the briefing is the one that counts.
    let newer_list =
        inp.tail.iter().flat_map(|m| m.tool_calls()).any(|c| {
            tasks::change_of(&c.name, &c.arguments.fields(), &inp.facts.todo_tools).is_some()
        });
    let evidence = Evidence {
        tasks: facts.todo.as_ref().filter(|_| !newer_list),
        ..Evidence::of(facts)
    };
    let (text, v) = verify(&text, evidence, inp.budget.get() as usize, inp.tokenizer);
    // Verification rewrote the text: data that says otherwise is not kept.
    Ok(Written {
        text,
        verification: Some(v),
        sheet: None,
        tokens: None,
    })
}

/// Rejects briefings that cannot be used; the tokens of one that can.
fn check(
    text: &str,
    inp: &Inputs<'_>,
    region_tokens: Counted,
    quotes: bool,
) -> Result<Counted, SummarizeError> {
    let reject = |why: String| Err(SummarizeError::Rejected(why));
    let trimmed = text.trim();
    if trimmed.chars().count() < MIN_CHARS {
        return reject(format!("shorter than {MIN_CHARS} characters"));
    }
    if leaks_wrapper(&inp.facts.wrapper, trimmed) {
        return reject(format!("contains <{}> tags", inp.facts.wrapper));
    }
    const MARKUP: [&str; 4] = [
        "<tool_use",
        "<tool_call",
        "<function_call",
        "</tool_result>",
    ];
    if !quotes && MARKUP.iter().any(|t| trimmed.contains(t)) {
        return reject("contains tool-call markup".into());
    }
    let tokens = Counted::of(inp.tokenizer.count(trimmed));
    if tokens >= region_tokens {
        return reject(format!(
            "not smaller than what it replaces ({tokens} ≥ {region_tokens} tokens)"
        ));
    }
    if tokens > inp.budget + inp.budget.scaled(0.1) {
        return reject(format!("over budget ({tokens} > {} tokens)", inp.budget));
    }
    Ok(tokens)
}

/// A briefing kept as data, and the fingerprint of the message that holds
/// it (the compaction that finds that message in the head merges the data).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeptBriefing {
    /// [`fingerprint`](abridge_model::fingerprint) of the briefing message.
    pub fingerprint: u64,
    /// The sheet it renders.
    pub sheet: Sheet,
}
