//! The story of a region in the agent's own terms: each command once with
//! its runs and what came of its failures, the progress its commands
//! record (commits, closed tasks, pushes), and the first sentence of each
//! thing it said.

use std::collections::HashMap;

use abridge_model::text::clip;

/// One command, however often it ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandFact {
    /// The command (first line).
    pub command: String,
    /// How many times it ran.
    pub runs: usize,
    /// The outcome of its last run (`ok`, `exit 1`, `failed: …`).
    pub last: String,
    /// The first line of its first failure, if it ever failed.
    pub failure: Option<String>,
    /// A run succeeded after a failure.
    pub fixed: bool,
}

impl CommandFact {
    /// One line: the command, its runs and outcome, what came of a failure
    /// (`→ ok (failed first: …; fixed by a later run)`, or `→ exit 1: …;
    /// not fixed`, with the first failure when it differs from the last).
    pub fn line(&self) -> String {
        let runs = if self.runs > 1 {
            format!(" ×{}", self.runs)
        } else {
            String::new()
        };
        let mut s = format!("`{}`{runs} → {}", clip(&self.command, 100, 30), self.last);
        match &self.failure {
            None => {}
            Some(f) if self.fixed => {
                s.push_str(&format!(
                    " (failed first: {}; fixed by a later run)",
                    clip(f, 160, 0)
                ));
            }
            Some(f) => {
                s.push_str("; not fixed");
                if !self.last.contains(f.as_str()) {
                    s.push_str(&format!(" (first failure: {})", clip(f, 160, 0)));
                }
            }
        }
        s
    }
}

/// Each command once, with its runs, as they are read: finding a command
/// and moving it last is constant time (a session that ran 100,000
/// distinct commands read them in quadratic time when the list was
/// searched and shifted per run).
#[derive(Debug, Clone, Default)]
pub(crate) struct Commands {
    /// Each command and when it last ran (`clock`).
    facts: Vec<(u64, CommandFact)>,
    /// Where `facts` holds each command.
    at: HashMap<String, usize>,
    clock: u64,
}

impl Commands {
    /// Adds a run of `command`.
    pub(crate) fn record(&mut self, command: &str, last: String, failure: Option<String>) {
        self.clock += 1;
        let i = match self.at.get(command) {
            Some(&i) => i,
            None => {
                self.at.insert(command.to_owned(), self.facts.len());
                self.facts.push((
                    0,
                    CommandFact {
                        command: command.to_owned(),
                        runs: 0,
                        last: String::new(),
                        failure: None,
                        fixed: false,
                    },
                ));
                self.facts.len() - 1
            }
        };
        let (ran, c) = &mut self.facts[i];
        *ran = self.clock;
        c.runs += 1;
        match failure {
            Some(f) => {
                c.failure.get_or_insert(f);
                c.fixed = false;
            }
            None if c.failure.is_some() => c.fixed = true,
            None => {}
        }
        c.last = last;
    }

    /// The commands, the most recently run last.
    pub(crate) fn into_list(self) -> Vec<CommandFact> {
        let mut facts = self.facts;
        facts.sort_unstable_by_key(|(ran, _)| *ran);
        facts.into_iter().map(|(_, c)| c).collect()
    }
}

/// Commands that only look around: a successful run is not worth a line.
pub(crate) fn is_exploration(command: &str) -> bool {
    let first = command.split_whitespace().next().unwrap_or("");
    let first = first.rsplit('/').next().unwrap_or(first);
    matches!(
        first,
        "ls" | "cat"
            | "head"
            | "tail"
            | "grep"
            | "rg"
            | "find"
            | "wc"
            | "echo"
            | "pwd"
            | "which"
            | "tree"
            | "file"
            | "stat"
            | "sed"
            | "awk"
            | "sort"
            | "diff"
            | "cd"
    ) || command.starts_with("git status")
        || command.starts_with("git log")
        || command.starts_with("git diff")
        || command.starts_with("git show")
}

/// The progress a successful command records, in the agent's words: a
/// commit's message, a closed task and its reason, a push, a pull request.
pub(crate) fn progress_of(command: &str) -> Option<String> {
    let c = command.trim();
    if c.contains("git commit") {
        let msg = quoted_after(c, &["-m ", "-am ", "--message="]).unwrap_or_default();
        return Some(
            format!("committed: {}", clip(&msg, 160, 0))
                .trim_end_matches(": ")
                .to_owned(),
        );
    }
    if c.contains("git push") {
        return Some("pushed".to_owned());
    }
    if let Some(rest) = c.split("gh pr create").nth(1) {
        let title = quoted_after(rest, &["--title ", "-t "]).unwrap_or_default();
        return Some(format!("opened a pull request: {}", clip(&title, 160, 0)));
    }
    // Task trackers: `bd close X --reason=…`, `gh issue close N`, `todo done N`.
    for verb in [" close ", " done ", " complete "] {
        if let Some((tool, rest)) = c.split_once(verb) {
            let tool = tool.split_whitespace().last().unwrap_or("");
            if ["bd", "issue", "todo", "task", "beads", "linear", "jira"].contains(&tool) {
                let what = rest.split_whitespace().next().unwrap_or("");
                let reason = quoted_after(rest, &["--reason=", "--reason ", "-r ", "--comment "])
                    .map(|r| format!(": {}", clip(&r, 160, 0)))
                    .unwrap_or_default();
                return Some(format!("closed {what}{reason}"));
            }
        }
    }
    None
}

/// The item a [`progress_of`] line records closed (`closed APP-1: …` →
/// `APP-1`).
pub(crate) fn closed_item(progress: &str) -> Option<&str> {
    let rest = progress.strip_prefix("closed ")?;
    rest.split([':', ' ']).next().filter(|i| !i.is_empty())
}

/// The text after the first of `flags`, unquoted (up to the closing quote,
/// or the next space when it is not quoted).
fn quoted_after(s: &str, flags: &[&str]) -> Option<String> {
    let at = flags.iter().find_map(|f| s.find(f).map(|i| i + f.len()))?;
    let rest = s[at..].trim_start();
    let mut chars = rest.chars();
    match chars.next()? {
        q @ ('"' | '\'') => Some(chars.take_while(|c| *c != q).collect()),
        _ => Some(rest.split_whitespace().next().unwrap_or("").to_owned()),
    }
}

/// The first sentence of what the agent said (at most a line, 200 bytes).
pub(crate) fn first_sentence(text: &str) -> Option<String> {
    let line = text.trim().lines().find(|l| !l.trim().is_empty())?.trim();
    // The ending punctuation and the space are ASCII, so bytes find them;
    // and past `MAX` bytes the clip below is the same wherever the
    // sentence ends, so the search stops there.
    const MAX: usize = 200;
    let b = line.as_bytes();
    let end = (0..b.len().saturating_sub(1).min(MAX + 1))
        .find(|&i| matches!(b[i], b'.' | b'!' | b'?' | b':') && b[i + 1] == b' ')
        .map_or(line.len(), |i| i + 1);
    let s = clip(&line[..end], MAX, 0);
    (s.chars().count() >= 12).then_some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_collapse_and_remember_their_failure() {
        let mut c = Commands::default();
        c.record("mix test", "exit 1".into(), Some("1 test failed".into()));
        c.record("mix format", "ok".into(), None);
        c.record("mix test", "ok".into(), None);
        let l = c.clone().into_list();
        assert_eq!(l.len(), 2);
        assert_eq!(l[1].command, "mix test", "latest last");
        assert_eq!(
            l[1].line(),
            "`mix test` ×2 → ok (failed first: 1 test failed; fixed by a later run)"
        );
        c.record(
            "cargo build",
            "exit 101: linker failed".into(),
            Some("exit 101: no such crate".into()),
        );
        c.record(
            "cargo build",
            "exit 101: linker failed".into(),
            Some("exit 101: linker failed".into()),
        );
        let l = c.into_list();
        assert_eq!(
            l[2].line(),
            "`cargo build` ×2 → exit 101: linker failed; not fixed (first failure: exit 101: no such crate)"
        );
    }

    #[test]
    fn progress_in_the_agents_words() {
        assert_eq!(
            progress_of("git add -A && git commit -m \"feat: add OTEL deps\"").as_deref(),
            Some("committed: feat: add OTEL deps")
        );
        assert_eq!(
            progress_of("bd close spotter-4te.1 --reason=\"bootstrap done\"").as_deref(),
            Some("closed spotter-4te.1: bootstrap done")
        );
        assert_eq!(
            progress_of("bd close spotter-4te.2").as_deref(),
            Some("closed spotter-4te.2")
        );
        assert_eq!(
            progress_of("git push origin main").as_deref(),
            Some("pushed")
        );
        assert_eq!(progress_of("mix test"), None);
        assert_eq!(
            first_sentence("Now let me run the tests. Then commit.").as_deref(),
            Some("Now let me run the tests.")
        );
        assert!(is_exploration("grep -rn foo lib/") && !is_exploration("mix test"));
    }

    /// The search for the sentence's end stops where the clip would cut:
    /// wherever the end lies, the result is what a search of the whole
    /// line gives.
    #[test]
    fn first_sentence_is_the_same_wherever_the_end_lies() {
        let whole = |text: &str| {
            let line = text.trim().lines().find(|l| !l.trim().is_empty())?.trim();
            let end = line
                .char_indices()
                .find(|(i, c)| matches!(c, '.' | '!' | '?' | ':') && line[i + 1..].starts_with(' '))
                .map_or(line.len(), |(i, c)| i + c.len_utf8());
            let s = clip(&line[..end], 200, 0);
            (s.chars().count() >= 12).then_some(s)
        };
        for words in [1, 20, 38, 39, 40, 41, 42, 80] {
            for end in [". ", "! ", ": ", ".", " é. "] {
                let text = format!("{}{end}Then more", "word ".repeat(words).trim_end());
                assert_eq!(first_sentence(&text), whole(&text), "{text}");
            }
        }
        for at in 195..=203 {
            let text = format!("{}. next", "x".repeat(at));
            assert_eq!(first_sentence(&text), whole(&text), "{at}");
        }
    }
}
