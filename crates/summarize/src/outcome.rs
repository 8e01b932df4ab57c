//! Did a tool call succeed? Decided from its result only.

use abridge_model::ToolResult;
use abridge_model::text::first_line;

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
pub enum Outcome {
    /// The result shows success (a zero exit code or no sign of failure).
    Ok,
    /// The result shows failure; `Some(code)` when an exit code was reported.
    Failed(Option<i64>),
}

/// The outcome of a result: failed when the API flag says so, when its
/// first line starts with one of `prefixes` (case-insensitive), or when it
/// reports a non-zero exit code.
pub fn outcome<S: AsRef<str>>(r: &ToolResult, text: &str, prefixes: &[S]) -> Outcome {
    let code = exit_code(text);
    if r.is_error == Some(true) {
        return Outcome::Failed(code);
    }
    if let Some(c) = code {
        return if c == 0 {
            Outcome::Ok
        } else {
            Outcome::Failed(Some(c))
        };
    }
    let line = first_line(text).trim_start().to_lowercase();
    let line = line.trim_start_matches(['[', '(', '<', '*', '#', ' ']);
    if prefixes
        .iter()
        .any(|p| line.starts_with(&p.as_ref().to_lowercase()))
    {
        return Outcome::Failed(None);
    }
    Outcome::Ok
}

/// An exit code reported in the first lines: `exit status 101`,
/// `exit code: 2`, `<returncode>1</returncode>`.
pub fn exit_code(text: &str) -> Option<i64> {
    for line in text.lines().take(3) {
        let line = line.to_lowercase();
        for key in ["exit status", "exit code", "returncode>", "exit_code"] {
            if let Some(pos) = line.find(key) {
                let rest = line[pos + key.len()..].trim_start_matches([' ', ':', '=']);
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

    #[test]
    fn outcomes() {
        let f = |t: &str, e| outcome(&result(t, e), t, &DEFAULT_ERROR_PREFIXES);
        assert_eq!(f("ok", Some(true)), Outcome::Failed(None));
        assert_eq!(
            f("Error: element e15 is not clickable", None),
            Outcome::Failed(None)
        );
        assert_eq!(
            f("\n  Traceback (most recent call last):", None),
            Outcome::Failed(None)
        );
        assert_eq!(
            f("exit status 101\nerror[E0599]", None),
            Outcome::Failed(Some(101))
        );
        assert_eq!(
            f("<returncode>1</returncode>\n<output>", None),
            Outcome::Failed(Some(1))
        );
        assert_eq!(
            f("<returncode>0</returncode>\nerror: in output", None),
            Outcome::Ok
        );
        assert_eq!(f("exit status 0", None), Outcome::Ok);
        assert_eq!(f("All 14 tests passed", None), Outcome::Ok);
    }
}
