//! Did a tool call succeed? Decided from its result only.

use abridge_model::text::{clip, first_line};
use abridge_model::{ToolResult, answered_with_error};

/// Words that, at the start of a result's first line, mean it failed.
pub const DEFAULT_ERROR_PREFIXES: [&str; 6] = [
    "error",
    "traceback",
    "exception",
    "fatal",
    "panic",
    "failed",
];

/// The outcome of a tool call as its result shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallOutcome {
    /// The result shows success (a zero exit code or no sign of failure).
    Ok,
    /// The result shows failure; `Some(code)` when an exit code was reported.
    Failed(Option<i64>),
}

/// The outcome of a result: failed when its API says so (Anthropic's
/// `is_error`, a Gemini response that is an `error`), when its first line
/// starts with one of `prefixes` (case-insensitive), or when it reports a
/// non-zero exit code.
pub fn outcome<S: AsRef<str>>(r: &ToolResult, text: &str, prefixes: &[S]) -> CallOutcome {
    let code = exit_code(text);
    if r.is_error == Some(true) || answered_with_error(r) {
        return CallOutcome::Failed(code);
    }
    if let Some(c) = code {
        return if c == 0 {
            CallOutcome::Ok
        } else {
            CallOutcome::Failed(Some(c))
        };
    }
    let line = first_line(text).trim_start().to_lowercase();
    // A tool that answers in JSON fails with an `{"error": …}` object
    // (one whose error is `null` or `false` did not).
    if let Some(rest) = line.strip_prefix(r#"{"error""#) {
        let value = rest.trim_start_matches([' ', ':']);
        if !value.starts_with("null") && !value.starts_with("false") {
            return CallOutcome::Failed(None);
        }
    }
    let line = line.trim_start_matches(['[', '(', '<', '*', '#', ' ']);
    if prefixes
        .iter()
        .any(|p| line.starts_with(&p.as_ref().to_lowercase()))
    {
        return CallOutcome::Failed(None);
    }
    CallOutcome::Ok
}

/// Whether exit status 1 of shell `command` is an answer rather than a
/// failure: its last command searched and found nothing (`grep`, `rg`,
/// `ag`, `ack`, `git grep`), compared and found a difference (`diff`,
/// `cmp`, `git diff`), or tested a condition that was false (`test`, `[`).
/// Their manuals give 1 that meaning and keep 2 and above for trouble.
pub fn answers_with_one(command: &str) -> bool {
    let mut words = last_command(command)
        .split_whitespace()
        .skip_while(|w| w.contains('=') && !w.starts_with(['-', '=']));
    let program = words.next().unwrap_or("");
    let program = program.rsplit('/').next().unwrap_or(program);
    match program {
        "grep" | "egrep" | "fgrep" | "zgrep" | "rg" | "ag" | "ack" | "diff" | "cmp" | "test"
        | "[" | "[[" => true,
        "git" => matches!(words.next(), Some("grep" | "diff")),
        _ => false,
    }
}

/// The last command of a shell line: after its last `;`, `&`, `|` or line
/// break outside quotes, whose status is the line's.
fn last_command(line: &str) -> &str {
    let (mut quote, mut escaped, mut start) = (None, false, 0);
    let bytes = line.as_bytes();
    // `2>&1`, `&>`, `<&`: a redirection, not a separator.
    let redirects = |i: usize| {
        (i > 0 && matches!(bytes[i - 1], b'>' | b'<')) || bytes.get(i + 1) == Some(&b'>')
    };
    for (i, c) in line.char_indices() {
        match (quote, c) {
            (None, '&') if redirects(i) => {}
            _ if escaped => escaped = false,
            (Some('\''), '\'') => quote = None,
            (Some('\''), _) => {}
            (_, '\\') => escaped = true,
            (Some('"'), '"') => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, ';' | '&' | '|' | '\n') => start = i + 1,
            _ => {}
        }
    }
    let last = line[start..].trim();
    match last.is_empty() {
        // A line ending in a separator: the command before it.
        true if start > 0 => {
            last_command(line[..start - 1].trim_end_matches([';', '&', '|', '\n', ' ']))
        }
        _ => last,
    }
}

/// An exit code reported in the first lines — `exit status 101`,
/// `exit code: 2`, `<returncode>1</returncode>`, Codex's `Process exited
/// with code 1` — or at the start of one of the last lines, after the
/// output (Gemini CLI's `Exit Code: 1`), in any case.
pub fn exit_code(text: &str) -> Option<i64> {
    let first = text.lines().take(3).map(|l| (l, false));
    // The last lines after those three (one output line may be megabytes:
    // it is scanned once), found from the end.
    let after_first = memchr::memchr_iter(b'\n', text.as_bytes())
        .nth(2)
        .map_or("", |at| &text[at + 1..]);
    let body = after_first.strip_suffix('\n').unwrap_or(after_first);
    let mut last: Vec<&str> = match body.is_empty() {
        true => Vec::new(),
        false => body.rsplitn(TRAILING + 1, '\n').take(TRAILING).collect(),
    };
    last.reverse();
    let last = last
        .into_iter()
        .map(|l| (l.strip_suffix('\r').unwrap_or(l), true));
    for (line, at_start) in first.chain(last) {
        let found = first_keys(line);
        for (key, pos) in KEYS.iter().zip(found) {
            let Some(pos) = pos else { continue };
            if at_start && !line[..pos].trim().is_empty() {
                continue;
            }
            let rest = line[pos + key.len()..].trim_start_matches([' ', ':', '=', '"']);
            let digits: String = rest
                .chars()
                .enumerate()
                .take_while(|(i, c)| c.is_ascii_digit() || (*i == 0 && *c == '-'))
                .map(|(_, c)| c)
                .collect();
            if let Ok(n) = digits.parse::<i64>() {
                return Some(n);
            }
        }
    }
    None
}

/// What reports an exit code, in the order they are tried.
const KEYS: [&str; 5] = [
    "exit status",
    "exit code",
    "returncode>",
    "exit_code",
    "exited with code",
];

/// Last lines of a result where an exit code may be reported after the
/// output, at the start of its line.
const TRAILING: usize = 4;

/// Where each of [`KEYS`] first occurs in `line`, ASCII case ignored (what
/// searching a lower-cased copy finds: no other character lower-cases into
/// one of their words). Every key holds an `x` after its first letter or
/// ends in `>`, so only those bytes are looked at, in one pass.
fn first_keys(line: &str) -> [Option<usize>; 5] {
    let bytes = line.as_bytes();
    let mut found = [None; 5];
    let at = |start: usize, key: &str| {
        bytes
            .get(start..start + key.len())
            .is_some_and(|b| b.eq_ignore_ascii_case(key.as_bytes()))
    };
    for p in memchr::memchr3_iter(b'x', b'X', b'>', bytes) {
        // `returncode>` ends at a `>`; the others have their `x` second.
        let (start, keys): (Option<usize>, &[usize]) = match bytes[p] {
            b'>' => (p.checked_sub(KEYS[2].len() - 1), &[2]),
            _ => (p.checked_sub(1), &[0, 1, 3, 4]),
        };
        let Some(start) = start else { continue };
        for &k in keys {
            if found[k].is_none() && at(start, KEYS[k]) {
                found[k] = Some(start);
            }
        }
        if found.iter().all(Option::is_some) {
            break;
        }
    }
    found
}

/// A failure in one line: its first line and, when the output goes on, the
/// first line that points at a source position (`lib/a.ex:58:13: …`) or
/// else the last that names an error, so the cause shows and not only the
/// tool's banner. Escaped newlines (`\\n` in hook output) count as breaks.
pub fn failure_summary(text: &str, max: usize) -> String {
    let lines: Vec<&str> = text
        .lines()
        .flat_map(|l| l.split("\\n"))
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let Some(first) = lines.first() else {
        return String::new();
    };
    let rest = &lines[1..];
    let names_error = |l: &&str| {
        let lower = l.to_lowercase();
        ["error", "fail", "panic", "exception"]
            .iter()
            .any(|w| lower.contains(w))
    };
    // A position first; else, after a banner that names no error, the
    // last line that does; else the line a `…:` banner introduces.
    let verdict = rest
        .iter()
        .find(|l| points_at_source(l))
        .or_else(|| {
            (!names_error(first) || first.ends_with(':'))
                .then(|| rest.iter().rev().find(|l| names_error(l)))
                .flatten()
        })
        .or_else(|| rest.first().filter(|_| first.ends_with(':')));
    match verdict {
        Some(v) => format!("{} … {}", clip(first, max / 2, 0), clip(v, max / 2, 0)),
        None => clip(first, max, 0),
    }
}

/// `path/file.ext:12` somewhere in the line.
fn points_at_source(line: &str) -> bool {
    line.split_whitespace().any(|w| {
        let mut parts = w.split(':');
        let file = parts.next().unwrap_or_default();
        file.contains('.')
            && file.chars().any(|c| c.is_ascii_alphabetic())
            && parts
                .next()
                .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use abridge_model::{ContentForm, Part};

    fn result(text: &str, is_error: Option<bool>) -> ToolResult {
        ToolResult {
            call_id: "c".into(),
            parts: vec![Part::text(text)],
            form: ContentForm::Text,
            is_error,
            extra: Default::default(),
        }
    }

    /// The search as it was: on a lower-cased copy of each line.
    fn exit_code_by_lowercasing(text: &str) -> Option<i64> {
        let lines: Vec<&str> = text.lines().collect();
        let trailing = lines.len().saturating_sub(TRAILING);
        let first = lines.iter().take(3).map(|l| (l, false));
        let last = lines.iter().skip(trailing).map(|l| (l, true));
        for (line, at_start) in first.chain(last) {
            let line = line.to_lowercase();
            for key in KEYS {
                if let Some(pos) = line.find(key) {
                    if at_start && !line[..pos].trim().is_empty() {
                        continue;
                    }
                    let rest = line[pos + key.len()..].trim_start_matches([' ', ':', '=', '"']);
                    let digits: String = rest
                        .chars()
                        .enumerate()
                        .take_while(|(i, c)| c.is_ascii_digit() || (*i == 0 && *c == '-'))
                        .map(|(_, c)| c)
                        .collect();
                    if let Ok(n) = digits.parse::<i64>() {
                        return Some(n);
                    }
                }
            }
        }
        None
    }

    #[test]
    fn exit_one_answers_a_search_a_comparison_or_a_test() {
        for answered in [
            "grep -n foo src/lib.rs",
            "cd repo && grep -rn \"a\\|b\" src",
            "cd repo; LC_ALL=C /usr/bin/rg 'x|y' .",
            "git grep -n needle",
            "git diff --exit-code",
            "diff -u a b",
            "[ -f out.txt ]",
            "python gen.py > a && cmp a b",
            "cd x && grep foo bar;",
            "grep -rn x . 2>&1",
            "rg x &> out",
        ] {
            assert!(answers_with_one(answered), "{answered}");
        }
        for failed in [
            "cargo test",
            "grep foo bar | head",
            "grep foo bar && make",
            "python -c 'import re; grep = 1'",
            "echo '; grep x'",
            "git status",
            "",
        ] {
            assert!(!answers_with_one(failed), "{failed}");
        }
    }

    #[test]
    fn exit_codes_in_any_case() {
        assert_eq!(exit_code("Exit Status: 101\nerror"), Some(101));
        assert_eq!(exit_code("ok\n<RETURNCODE>-1</returncode>"), Some(-1));
        assert_eq!(exit_code("naïve İstanbul EXIT_CODE=3"), Some(3));
        assert_eq!(exit_code("exit code x\nexit status 2"), Some(2));
        // Deep in the output, an exit code is the output's own.
        assert_eq!(exit_code("a\nb\nc\nexit code 1\nd\ne\nf\ng"), None);
        // After it, at the start of one of the last lines, it is the call's:
        // Gemini CLI's shell tool reports it there.
        let gemini = "Output: FAILED tests/test_a.py::test_b\n1 failed\nmore\nExit Code: 1\nProcess Group PGID: 4242";
        assert_eq!(exit_code(gemini), Some(1));
        assert_eq!(
            exit_code("a\nb\nc\nd\nthe run ended with exit code 1"),
            None
        );
        // Codex's exec tool says it on its third line; its older shell tool in JSON.
        let codex = "Chunk ID: 6bd1\nWall time: 0.0513 seconds\nProcess exited with code 2\nOriginal token count: 9\nOutput:\nerror: no such file";
        assert_eq!(exit_code(codex), Some(2));
        assert_eq!(
            exit_code(r#"{"output":"boom","metadata":{"exit_code":1,"duration_seconds":0.2}}"#),
            Some(1)
        );
        assert_eq!(exit_code("exit"), None);
    }

    proptest::proptest! {
        #[test]
        fn exit_codes_are_found_as_in_a_lower_cased_copy(
            text in "((exit|EXIT|Exit|exited with|ex|returncode>|RETURNCODE>|_| |status|STATUS|code|Code|:|=|\"|-|[0-9]{1,3}|\n|\r|é|İ|K|ſ|x|>)){0,24}"
        ) {
            proptest::prop_assert_eq!(exit_code(&text), exit_code_by_lowercasing(&text));
        }
    }

    #[test]
    fn a_gemini_error_response_is_a_failure_and_its_output_is_not() {
        let body = serde_json::json!({"contents": [
            {"role": "user", "parts": [{"text": "List the files."}]},
            {"role": "model", "parts": [
                {"functionCall": {"name": "run_shell_command", "args": {"command": "ls"}}},
                {"functionCall": {"name": "read_file", "args": {"file_path": "/w/gone.rs"}}}]},
            {"role": "user", "parts": [
                {"functionResponse": {"name": "run_shell_command",
                    "response": {"output": "Output: a.rs b.rs"}}},
                {"functionResponse": {"name": "read_file",
                    "response": {"error": "File not found: /w/gone.rs"}}}]}
        ]});
        let conv = abridge_model::decode(body.to_string().as_bytes())
            .unwrap()
            .remove(0);
        let got: Vec<CallOutcome> = conv
            .messages
            .iter()
            .flat_map(|m| m.tool_results())
            .map(|r| outcome(r, &r.text(), &DEFAULT_ERROR_PREFIXES))
            .collect();
        assert_eq!(got, [CallOutcome::Ok, CallOutcome::Failed(None)]);
    }

    #[test]
    fn outcomes() {
        let f = |t: &str, e| outcome(&result(t, e), t, &DEFAULT_ERROR_PREFIXES);
        assert_eq!(f("ok", Some(true)), CallOutcome::Failed(None));
        assert_eq!(
            f("Error: element e15 is not clickable", None),
            CallOutcome::Failed(None)
        );
        assert_eq!(
            f("\n  Traceback (most recent call last):", None),
            CallOutcome::Failed(None)
        );
        assert_eq!(
            f("exit status 101\nerror[E0599]", None),
            CallOutcome::Failed(Some(101))
        );
        assert_eq!(
            f("<returncode>1</returncode>\n<output>", None),
            CallOutcome::Failed(Some(1))
        );
        assert_eq!(
            f("<returncode>0</returncode>\nerror: in output", None),
            CallOutcome::Ok
        );
        assert_eq!(f("exit status 0", None), CallOutcome::Ok);
        assert_eq!(f("All 14 tests passed", None), CallOutcome::Ok);
        // A tool that answers in JSON says it failed as a JSON error.
        assert_eq!(
            f(
                r#"{"error": {"code": 404, "message": "no such page"}}"#,
                None
            ),
            CallOutcome::Failed(None)
        );
        assert_eq!(f(r#"{"errors": [], "ok": true}"#, None), CallOutcome::Ok);
        assert_eq!(f(r#"{"error": null, "result": 3}"#, None), CallOutcome::Ok);
    }

    #[test]
    fn a_failure_names_its_cause_not_only_the_banner() {
        let hook = "Pre-commit validation failed:\\n\\n[DIALYZER]\\nFinding suitable PLTs\nChecking PLT...\n\
                    Total errors: 2\nlib/a.ex:58:13:pattern_match\nThe pattern can never match.";
        assert_eq!(
            failure_summary(hook, 240),
            "Pre-commit validation failed: … lib/a.ex:58:13:pattern_match"
        );
        assert_eq!(
            failure_summary("Exit code 1\nbuild ok\nerror: linker failed", 240),
            "Exit code 1 … error: linker failed"
        );
        assert_eq!(failure_summary("not found", 240), "not found");
        assert_eq!(
            failure_summary(
                "Validation failed:\\n[FORMAT] Not formatted.\\nRun it.",
                240
            ),
            "Validation failed: … [FORMAT] Not formatted."
        );
        assert_eq!(
            failure_summary("<error>Not found.\nold text\nend</error>", 240),
            "<error>Not found."
        );
    }
}
