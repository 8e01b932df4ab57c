//! Facts extracted deterministically from the messages a briefing replaces.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

use abridge_model::text::clip;
use abridge_model::{Message, Part, Role, ToolCall, ToolResult};
use serde_json::Value;

use crate::config::FactConfig;
use crate::ident::{clip_keeping_names, identifier_refs, prose_identifier_refs};
use crate::outcome::{CallOutcome, answers_with_one, outcome};
pub use crate::progress::CommandFact;
use crate::progress::first_sentence;
use crate::tasks::{self, Change, TaskList};
use crate::tools::{ToolKind, classify, split_arguments};
use crate::wrapper::unwrap;

mod record;
use record::{Places, record_call};

/// What happened to one file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileFact {
    /// Path as the agent wrote it.
    pub path: String,
    /// Successful reads.
    pub read: usize,
    /// Successful writes (creations or overwrites).
    pub written: usize,
    /// Successful edits.
    pub edited: usize,
    /// Operations whose result shows failure.
    pub failed: usize,
    /// Index of the last tool result that touched it (among all results).
    pub last_touch: usize,
    /// Names defined in the file that the agent's edits define, replace or
    /// call (`def enqueue`, `fn parse`): where in the file it worked, latest
    /// last.
    pub symbols: Vec<String>,
    /// Names the file defines, as the agent read or wrote it (working state
    /// for `symbols`).
    pub(crate) defined: Vec<String>,
}

impl FileFact {
    /// Changed (written or edited) or failed: not only looked at.
    pub fn changed(&self) -> bool {
        self.edited + self.written + self.failed > 0
    }
}

/// Facts of a region, in order of appearance.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Facts {
    /// The latest task list the agent wrote.
    pub todo: Option<TaskList>,
    /// Files touched.
    pub files: Vec<FileFact>,
    /// Each command once, most recently run last, with its runs and what
    /// came of its failures. Successful exploration (`ls`, `grep`…) is left out.
    pub commands: Vec<CommandFact>,
    /// Progress commands recorded (commits, closed tasks, pushes), in order.
    pub progress: Vec<String>,
    /// The first sentence of each thing the agent said, deduplicated.
    pub narrative: Vec<String>,
    /// Each command run (first line) and whether its result showed success.
    pub command_runs: Vec<(String, bool)>,
    /// Other tool calls with a short argument and outcome.
    pub other_calls: Vec<String>,
    /// Calls that created something, with the ids they returned
    /// (`create_entity `ticket` → 3f2b8c1e-…`), oldest first.
    pub created: Vec<String>,
    /// The ids of [`created`](Self::created), each once (once finished).
    pub created_ids: Vec<String>,
    /// Failed calls other than commands (`Edit src/a.rs: …`), oldest first;
    /// failed commands are under [`commands`](Self::commands).
    pub errors: Vec<String>,
    /// The latest failed result, verbatim: its first and last lines (see
    /// `error_excerpt`).
    pub latest_error: Option<String>,
    /// Identifiers the agent referred to (its prose, arguments that name
    /// things), each once, least worth keeping first (see `Weights::rank`).
    pub used_ids: Vec<String>,
    /// Every name the agent referred to (its prose, arguments that name
    /// things), each once, most worth keeping first — referred to most
    /// often over how long ago —, none left out: what an index of the
    /// region lists beyond the briefing.
    pub referred: Vec<String>,
    /// User messages (short ones verbatim, long ones head … tail).
    pub user_messages: Vec<String>,
    /// User decisions and corrections, and answers to questions the agent asked.
    pub decisions: Vec<String>,
    /// The last thing the assistant said before the boundary.
    pub last_state: Option<String>,
    /// Output of the commands the task named (see `task_details`).
    pub details: Vec<crate::spec::Detail>,
}

const DECISION_MARKERS: [&str; 12] = [
    "don't", "do not", "instead", "should", "must", "prefer", "always", "never", "actually",
    "stop", "skip", "rather",
];

/// Extracts the facts of `messages`.
pub fn extract(messages: &[Message], cfg: &FactConfig) -> Facts {
    let mut e = Extraction::default();
    e.feed(messages, cfg);
    e.finish()
}

/// The facts of a run of messages, gathered a message at a time. A copy
/// taken part way ([`detached`](Self::detached)) resumes there: a briefing
/// written again over a shorter region of the same history reads only
/// what follows the copy instead of the whole region again.
#[derive(Clone, Default)]
pub struct Extraction<'a> {
    f: Facts,
    /// Where `f.files` holds each path, and the commands run (`f.commands`
    /// once finished).
    places: Places,
    /// Each call by its id, until its result comes: its tool and
    /// arguments. (Calls whose results were read are let go: a copy of the
    /// extraction held every call of a long run.)
    calls: HashMap<Cow<'a, str>, (Cow<'a, str>, Value)>,
    /// Calls that change the task list, until their results come, by
    /// call id: with the change when it waits for the result (a created
    /// task's id).
    task_changes: HashMap<String, Option<Change>>,
    weight: Weights,
    /// Tool results read so far.
    results: usize,
    /// The latest failed result's text.
    latest_error: Option<Cow<'a, str>>,
    /// What `narrative` holds, to keep each sentence once in linear time.
    said: HashSet<String>,
    /// The latest thing the assistant said.
    last_said: Option<Cow<'a, str>>,
    /// Messages read.
    fed: usize,
}

impl<'a> Extraction<'a> {
    /// Reads `messages`, the next ones of the run: what each says on its
    /// own is read a block at a time on every core (`Reading`), then
    /// folded into the facts in order.
    pub fn feed(&mut self, messages: &'a [Message], cfg: &FactConfig) {
        self.feed_on(messages, cfg, abridge_model::shares::threads(MAX_THREADS));
    }

    /// [`feed`](Self::feed), reading on at most `threads` threads.
    fn feed_on(&mut self, messages: &'a [Message], cfg: &FactConfig, threads: usize) {
        for block in messages.chunks(BLOCK) {
            for (m, reading) in block.iter().zip(read_all(block, cfg, threads)) {
                self.fold(m, reading, cfg);
            }
        }
    }

    /// Folds message `m`, read as `reading`, into the facts.
    fn fold(&mut self, m: &'a Message, reading: Reading<'a>, cfg: &FactConfig) {
        self.fed += 1;
        for (p, r) in m.parts.iter().zip(reading.parts) {
            match (p, r) {
                (Part::Text(t), PartReading::Said { ids, sentence }) => {
                    self.weight.add_found(&mut self.f.used_ids, ids);
                    self.last_said = Some(Cow::Borrowed(&t.text));
                    if let Some(s) = sentence
                        && self.said.insert(s.clone())
                    {
                        self.f.narrative.push(s);
                    }
                }
                (Part::ToolCall(c), PartReading::Called(args)) => self.call(c, args, cfg),
                (Part::ToolResult(r), PartReading::Answered { text, outcome }) => {
                    self.result(r, text, outcome)
                }
                (Part::Text(t), PartReading::Other) if m.role == Role::User && !m.meta.injected => {
                    user_text(&mut self.f, &t.text, &cfg.wrapper)
                }
                _ => {}
            }
        }
    }

    fn call(&mut self, c: &'a ToolCall, args: Value, cfg: &FactConfig) {
        let f = &mut self.f;
        // What it refers to counts, not the code it typed.
        let (references, _bodies) = split_arguments(&c.name, &args);
        for r in references {
            self.weight.add(&mut f.used_ids, r);
        }
        if let Some(change) = tasks::change_of(&c.name, &args, &cfg.todo_tools) {
            // A whole list or a status counts as written; a created task
            // waits for the id its result names.
            let waiting = match change.needs_result() {
                true => Some(change),
                false => {
                    change.apply(&mut f.todo, "");
                    None
                }
            };
            self.task_changes.insert(c.id.clone(), waiting);
        }
        self.calls
            .insert(Cow::Borrowed(&c.id), (Cow::Borrowed(&c.name), args));
    }

    fn result(&mut self, r: &'a ToolResult, text: Cow<'a, str>, mut ok: CallOutcome) {
        let at = self.results;
        self.results += 1;
        let task = self.task_changes.remove(r.call_id.as_str());
        if let Some(change) = task.filter(|_| ok == CallOutcome::Ok) {
            // The task list holds it: not listed among the other calls.
            self.calls.remove(r.call_id.as_str());
            if let Some(change) = change {
                change.apply(&mut self.f.todo, &text);
            }
            return;
        }
        if let Some((name, args)) = self.calls.remove(r.call_id.as_str()) {
            if ok == CallOutcome::Failed(Some(1))
                && let ToolKind::Shell(cmd) = classify(&name, &args)
                && answers_with_one(cmd)
            {
                // Nothing found, a difference, a false test: an answer.
                ok = CallOutcome::Ok;
            }
            record_call(&mut self.f, &mut self.places, at, &name, &args, ok, &text);
        }
        if let CallOutcome::Failed(_) = ok {
            self.latest_error = Some(text);
        }
    }

    /// Messages read so far.
    pub fn fed(&self) -> usize {
        self.fed
    }

    /// A copy that owns what it holds, to resume from after the messages
    /// it was taken from are gone.
    pub fn detached(&self) -> Extraction<'static> {
        let own = |c: &Cow<'a, str>| Cow::Owned(c.clone().into_owned());
        Extraction {
            f: self.f.clone(),
            places: self.places.clone(),
            calls: self
                .calls
                .iter()
                .map(|(id, (name, args))| (own(id), (own(name), args.clone())))
                .collect(),
            task_changes: self.task_changes.clone(),
            weight: self.weight.clone(),
            results: self.results,
            latest_error: self.latest_error.as_ref().map(own),
            said: self.said.clone(),
            last_said: self.last_said.as_ref().map(own),
            fed: self.fed,
        }
    }

    /// The facts of what was read.
    pub fn finish(self) -> Facts {
        let Extraction {
            mut f,
            places,
            weight,
            results,
            latest_error,
            last_said,
            ..
        } = self;
        f.commands = places.commands.into_list();
        f.last_state = last_said.map(|t| clip_keeping_names(t.trim(), 600, 200, LAST_NAMES));
        f.referred = weight.ranked(&f.used_ids);
        weight.rank(&mut f.used_ids);
        f.latest_error = latest_error.map(|t| error_excerpt(&t));
        let mut seen = HashSet::new();
        f.created_ids.retain(|id| seen.insert(id.clone()));
        // Names seen only in results (paths, symbols, ids, URLs) are left to
        // the originals: across agents the briefing's list of them was the
        // least used of its sections (1 to 12 in 100 used again).
        // Files only read early on were exploration: the briefing names the
        // ones changed and the ones the agent was reading lately.
        f.files
            .retain(|x| x.changed() || x.last_touch * 2 >= results);
        // Oldest touch first, so that a briefing short of room keeps the
        // files the agent came back to last, not the ones it opened last.
        f.files.sort_by_key(|x| x.last_touch);
        f
    }
}

/// What one message says on its own, part by part: read apart from the
/// facts gathered so far, so that many messages are read at once.
struct Reading<'a> {
    parts: Vec<PartReading<'a>>,
}

enum PartReading<'a> {
    /// The agent's prose: the names it refers to, its first sentence.
    Said {
        ids: Vec<&'a str>,
        sentence: Option<String>,
    },
    /// A call's arguments, parsed.
    Called(Value),
    /// A tool result's text and outcome.
    Answered {
        text: Cow<'a, str>,
        outcome: CallOutcome,
    },
    /// Nothing read ahead (a user's words are read in order).
    Other,
}

/// Messages read ahead at once, at most.
const BLOCK: usize = 4096;

/// Text of a block worth a second thread.
const PARALLEL_BYTES: usize = 256 * 1024;

/// Threads that read at most.
const MAX_THREADS: usize = 8;

/// What one message says on its own.
fn read<'a>(m: &'a Message, cfg: &FactConfig) -> Reading<'a> {
    let assistant = m.role == Role::Assistant;
    let parts = m
        .parts
        .iter()
        .map(|p| match p {
            Part::Text(t) if assistant && !t.text.trim().is_empty() => PartReading::Said {
                ids: prose_identifier_refs(&t.text),
                sentence: first_sentence(&t.text),
            },
            Part::ToolCall(c) if assistant => PartReading::Called(c.arguments.fields()),
            Part::ToolResult(r) if !assistant => {
                let text = r.text();
                let outcome = outcome(r, &text, &cfg.error_prefixes);
                PartReading::Answered { text, outcome }
            }
            _ => PartReading::Other,
        })
        .collect();
    Reading { parts }
}

/// `block` read, in order: on `threads` threads when it holds enough text.
fn read_all<'a>(block: &'a [Message], cfg: &FactConfig, threads: usize) -> Vec<Reading<'a>> {
    let bytes: usize = block.iter().map(Message::text_bytes).sum();
    let n = if bytes < PARALLEL_BYTES { 1 } else { threads };
    abridge_model::shares::on_shares(block, Message::text_bytes, n, |share, _| {
        share.iter().map(|m| read(m, cfg)).collect::<Vec<_>>()
    })
    .into_iter()
    .flat_map(|r| r.unwrap_or_else(|p| std::panic::resume_unwind(p)))
    .collect()
}

/// How often and how late the agent referred to each identifier: in its
/// prose or in an argument that names something (a path, a command, an
/// id). Names inside the bodies it typed (file contents, edits) are the
/// language's as much as the task's and are not counted.
#[derive(Default, Clone)]
struct Weights {
    seen: HashMap<String, Seen>,
    clock: u32,
}

#[derive(Default, Clone, Copy)]
struct Seen {
    /// Times referred to.
    count: u32,
    /// When last referred to.
    last: u32,
}

impl Weights {
    /// Counts the names in `text`, an argument (prose is read ahead:
    /// [`add_found`](Self::add_found)).
    fn add(&mut self, ids: &mut Vec<String>, text: &str) {
        self.add_found(ids, identifier_refs(text));
    }

    /// Counts `found`, the names one text referred to.
    fn add_found(&mut self, ids: &mut Vec<String>, found: Vec<&str>) {
        self.clock += 1;
        for id in found {
            if is_position(id) {
                continue;
            }
            let now = Seen {
                count: 1,
                last: self.clock,
            };
            match self.seen.get_mut(id) {
                Some(w) => {
                    w.count += 1;
                    w.last = now.last;
                }
                None => {
                    ids.push(id.to_owned());
                    self.seen.insert(id.to_owned(), now);
                }
            }
        }
    }

    /// The names the agent referred to, each once, least worth keeping
    /// first, at most [`MAX_IDS`]. A name referred to once, in the older
    /// half of the region, is left to the index of what was replaced: across
    /// agents, such names are seldom used again (one in ten), where names
    /// referred to again, or lately, are (one in three to two). The rest
    /// rank by how often they were referred to over how long ago.
    fn rank(&self, ids: &mut Vec<String>) {
        let half = self.clock / 2;
        ids.retain(|id| {
            let w = self.seen[id];
            w.count > 1 || w.last > half
        });
        let clock = f64::from(self.clock.max(1));
        ids.sort_by(|a, b| self.worth(a, clock).total_cmp(&self.worth(b, clock)));
        ids.drain(..ids.len().saturating_sub(MAX_IDS));
    }

    /// `ids`, most worth keeping first.
    fn ranked(&self, ids: &[String]) -> Vec<String> {
        let clock = f64::from(self.clock.max(1));
        let mut out = ids.to_vec();
        out.sort_by(|a, b| self.worth(b, clock).total_cmp(&self.worth(a, clock)));
        out
    }

    /// How often `id` was referred to over how long ago (`clock`: the
    /// mentions counted in all).
    fn worth(&self, id: &str, clock: f64) -> f64 {
        let w = self.seen.get(id).copied().unwrap_or_default();
        f64::from(w.count) / ((clock - f64::from(w.last)) / clock + 0.1)
    }
}

/// Names the briefing lists at most.
const MAX_IDS: usize = 120;

/// Names the cut middle of the agent's last words lists at most.
pub(crate) const LAST_NAMES: usize = 12;

/// `lib/a.ex:264:82`, `src/main.rs:10`: a compiler position, not a name
/// worth keeping (its file is listed on its own).
fn is_position(id: &str) -> bool {
    let mut parts = id.rsplit(':');
    let last = parts.next().unwrap_or("");
    !last.is_empty() && last.chars().all(|c| c.is_ascii_digit()) && id.contains('.')
}

fn user_text(f: &mut Facts, text: &str, wrapper: &str) {
    let text = text.trim();
    if text.is_empty() || unwrap(wrapper, text).is_some() {
        return;
    }
    let lower = text.to_lowercase();
    let short = clip(text, 300, 120);
    if text.len() <= 600 && DECISION_MARKERS.iter().any(|m| lower.contains(m)) {
        f.decisions.push(short);
    } else {
        f.user_messages.push(short);
    }
}

/// An error's first [`ERROR_HEAD`] lines and its last [`ERROR_TAIL`] (where
/// compilers and test runners print the verdict), each line clipped.
fn error_excerpt(text: &str) -> String {
    let all: Vec<&str> = text.lines().collect();
    let line = |l: &&str| clip(l, ERROR_LINE_CHARS, 0);
    if all.len() <= ERROR_HEAD + ERROR_TAIL {
        return all.iter().map(line).collect::<Vec<_>>().join("\n");
    }
    let head = all[..ERROR_HEAD].iter().map(line);
    let tail = all[all.len() - ERROR_TAIL..].iter().map(line);
    let skipped = format!("… ({} lines)", all.len() - ERROR_HEAD - ERROR_TAIL);
    head.chain(std::iter::once(skipped))
        .chain(tail)
        .collect::<Vec<_>>()
        .join("\n")
}

const ERROR_HEAD: usize = 2;
const ERROR_TAIL: usize = 12;
const ERROR_LINE_CHARS: usize = 200;

/// The task: text of the user messages before the first assistant message,
/// except an earlier briefing and working set.
pub fn task_text(head: &[Message], tag: &str) -> String {
    head.iter()
        .filter(|m| m.role == Role::User)
        .map(Message::text_content)
        .filter(|t| {
            unwrap(tag, t).is_none() && !crate::working::is_working_set(t) && !t.trim().is_empty()
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

#[cfg(test)]
mod tests;
