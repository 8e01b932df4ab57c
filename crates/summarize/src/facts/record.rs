//! What one answered call records in the facts: a command's run, a file's
//! operation and the names it touched, a question's answer, another call
//! (with the ids it created).

use std::collections::HashMap;

use abridge_model::text::clip;
use serde_json::Value;

use super::{Facts, FileFact};
use crate::created;
use crate::outcome::{CallOutcome, failure_summary};
use crate::outline::{defined_names, touched};
use crate::progress::{Commands, is_exploration, progress_of};
use crate::shell;
use crate::tools::{ToolKind, classify, first_string, patch_files, split_arguments};

/// Where facts are kept while a run is read, so that finding one is
/// constant time whatever the number of files and commands.
#[derive(Debug, Clone, Default)]
pub(super) struct Places {
    /// Index in [`Facts::files`] of each path.
    pub(super) files: HashMap<String, usize>,
    pub(super) commands: Commands,
}

/// Records call `at` (the index of its result) and what came of it.
pub(super) fn record_call(
    f: &mut Facts,
    places: &mut Places,
    at: usize,
    name: &str,
    args: &Value,
    ok: CallOutcome,
    result: &str,
) {
    // What a failure says, once: its banner and cause.
    let why = (ok != CallOutcome::Ok).then(|| failure_summary(result, 240));
    let cause = || why.clone().unwrap_or_default();
    let status = match ok {
        CallOutcome::Ok => "ok".to_owned(),
        CallOutcome::Failed(Some(c)) => format!("exit {c}"),
        CallOutcome::Failed(None) => format!("failed: {}", clip(&cause(), 160, 0)),
    };
    let kind = classify(name, args);
    match kind {
        ToolKind::Shell(cmd) => {
            record_command(f, places, cmd, ok, (why.clone(), status));
            // The files it names: a failed command's reads are not counted
            // (the failure may be another part's), its writes and edits are.
            for file in shell::files(cmd) {
                if ok == CallOutcome::Ok || !matches!(file, ToolKind::Read(_)) {
                    record_file(f, places, at, (name, args), file, ok, result);
                }
            }
        }
        ToolKind::Read(p) | ToolKind::Write(p) | ToolKind::Edit(p) => {
            if ok != CallOutcome::Ok {
                f.errors.push(format!("{name} `{p}`: {}", cause()));
            }
            // A patch of several files changes each, with its own part.
            let patched = patch_files(name, args);
            if patched.is_empty() {
                record_file(f, places, at, (name, args), kind, ok, result);
            }
            for (kind, part) in patched {
                let part = serde_json::json!({ "input": part });
                record_file(f, places, at, (name, &part), kind, ok, result);
            }
        }
        ToolKind::Ask => {
            f.decisions.push(format!(
                "answer to {name}: {}",
                clip(result.trim(), 300, 100)
            ));
        }
        ToolKind::Search(_) | ToolKind::Other => {
            let arg = first_string(args)
                .map(|s| format!(" `{}`", clip(s, 100, 0)))
                .unwrap_or_default();
            if ok != CallOutcome::Ok {
                f.errors.push(format!("{name}{arg}: {}", cause()));
            }
            let ids = match ok {
                CallOutcome::Ok => created::ids(name, result),
                CallOutcome::Failed(_) => Vec::new(),
            };
            if ids.is_empty() {
                f.other_calls.push(format!("{name}{arg} → {status}"));
            } else {
                f.created.push(format!("{name}{arg} → {}", ids.join(", ")));
                f.created_ids.extend(ids);
            }
        }
    }
}

/// Records a shell command's run: its first line, whether it passed, the
/// progress it reports; a successful look around (`ls`, `cat`) is not
/// listed. `(failure, status)`: what a failure said, and the outcome.
fn record_command(
    f: &mut Facts,
    places: &mut Places,
    cmd: &str,
    ok: CallOutcome,
    (failure, status): (Option<String>, String),
) {
    let cmd = cmd.trim().lines().next().unwrap_or_default();
    f.command_runs.push((cmd.to_owned(), ok == CallOutcome::Ok));
    // A failed run's outcome is its cause, with the exit code.
    let status = match (&failure, ok) {
        (Some(why), CallOutcome::Failed(Some(c))) if !why.to_lowercase().contains("exit") => {
            format!("exit {c}: {why}")
        }
        (Some(why), _) => why.clone(),
        (None, _) => status,
    };
    if ok == CallOutcome::Ok {
        if let Some(p) = progress_of(cmd) {
            f.progress.push(p);
        }
        if is_exploration(cmd) {
            return;
        }
    }
    places.commands.record(cmd, status, failure);
}

/// Counts one file operation of a call (`call`: its tool and the
/// arguments naming this file) in the file's fact.
fn record_file(
    f: &mut Facts,
    places: &mut Places,
    at: usize,
    (name, args): (&str, &Value),
    kind: ToolKind<'_>,
    ok: CallOutcome,
    result: &str,
) {
    let (ToolKind::Read(p) | ToolKind::Write(p) | ToolKind::Edit(p)) = kind else {
        return;
    };
    let i = match places.files.get(p) {
        Some(&i) => i,
        None => {
            places.files.insert(p.to_owned(), f.files.len());
            f.files.push(FileFact {
                path: p.to_owned(),
                ..FileFact::default()
            });
            f.files.len() - 1
        }
    };
    let fact = &mut f.files[i];
    fact.last_touch = at;
    if ok == CallOutcome::Ok {
        touched_names(fact, &kind, name, args, result);
    }
    match (ok, kind) {
        (CallOutcome::Failed(_), _) => fact.failed += 1,
        (_, ToolKind::Edit(_)) => fact.edited += 1,
        (_, ToolKind::Write(_)) => fact.written += 1,
        _ => fact.read += 1,
    }
}

/// Updates what `fact`'s file defines (a write replaces it; a read, which
/// may show part of the file, and an edit add to it) and, for a change,
/// which of its names the change touched.
fn touched_names(fact: &mut FileFact, kind: &ToolKind, name: &str, args: &Value, result: &str) {
    let (_, bodies) = split_arguments(name, args);
    let seen: Vec<String> = match kind {
        ToolKind::Read(_) => defined_names(result),
        ToolKind::Write(_) | ToolKind::Edit(_) => {
            bodies.iter().flat_map(|b| defined_names(b)).collect()
        }
        _ => return,
    };
    if matches!(kind, ToolKind::Write(_)) {
        fact.defined.clear();
    }
    for n in seen {
        if !fact.defined.contains(&n) {
            fact.defined.push(n);
        }
    }
    if matches!(kind, ToolKind::Read(_)) {
        return;
    }
    for body in bodies {
        for sym in touched(body, &fact.defined) {
            fact.symbols.retain(|s| s != sym);
            fact.symbols.push(sym.to_owned());
        }
    }
}
