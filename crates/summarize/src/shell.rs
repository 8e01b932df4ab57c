//! The files a shell command reads, writes or edits. Agents whose only
//! tool is a shell (mini-swe-agent, OpenHands' `execute_bash`, Codex's
//! `shell`) read with `cat`, `head` or `sed -n`, edit with `sed -i` and
//! write with a redirection or `tee`: without reading the command, the
//! briefing's list of files stays empty for them.
//!
//! This is a reading of the common forms, not a shell: what it does not
//! recognise (a variable, a glob, a program it does not know) names no
//! file, and a here-document's body is skipped.

use crate::tools::ToolKind;

/// Programs whose operands are files they read.
const READERS: [&str; 8] = ["cat", "head", "tail", "nl", "less", "more", "bat", "view"];

/// Options of `head` and `tail` that take a value as the next word.
const COUNT_OPTIONS: [&str; 2] = ["-n", "-c"];

/// Options of `sed` whose value is its script (the operands are then all
/// files).
const SED_SCRIPT_OPTIONS: [&str; 4] = ["-e", "-f", "--expression", "--file"];

/// Words that run the rest of the command: skipped to find the program.
const WRAPPERS: [&str; 5] = ["sudo", "env", "time", "nohup", "command"];

/// The files `script` reads, writes or edits, in the order it names them
/// (a path named twice is listed twice).
pub(crate) fn files(script: &str) -> Vec<ToolKind<'_>> {
    let mut out = Vec::new();
    let mut heredoc: Option<&str> = None;
    for line in script.lines() {
        if let Some(end) = heredoc {
            if line.trim() == end {
                heredoc = None;
            }
            continue;
        }
        let words = words(line);
        heredoc = heredoc_end(&words);
        for segment in words.split(|w| is_operator(w)) {
            simple_command(segment, &mut out);
        }
    }
    out
}

/// One simple command (no operators): its redirections and its program's
/// operands.
fn simple_command<'a>(words: &[&'a str], out: &mut Vec<ToolKind<'a>>) {
    let mut operands: Vec<&str> = Vec::new();
    let mut it = words.iter();
    while let Some(&w) = it.next() {
        match redirect_target(w) {
            Some("") => {
                if let Some(&t) = it.next() {
                    push_path(out, t, ToolKind::Write);
                }
            }
            Some(t) => push_path(out, t, ToolKind::Write),
            None if w.starts_with('<') => {
                // Input redirection (or a here-document marker): its
                // word is consumed, not an operand.
                if w == "<" || w == "<<" || w == "<<-" || w == "<<<" {
                    it.next();
                }
            }
            None => operands.push(w),
        }
    }
    let mut rest = operands.as_slice();
    // Assignments and wrappers before the program.
    while let [first, tail @ ..] = rest {
        let assignment = first.contains('=') && !first.starts_with('-');
        if assignment || WRAPPERS.contains(&program_name(first)) {
            rest = tail;
        } else if program_name(first) == "timeout" {
            rest = tail.get(1..).unwrap_or_default();
        } else {
            break;
        }
    }
    let [program, args @ ..] = rest else {
        return;
    };
    let program = program_name(program);
    if READERS.contains(&program) {
        let counted = matches!(program, "head" | "tail");
        for path in operands_of(args, if counted { &COUNT_OPTIONS } else { &[] }) {
            push_path(out, path, ToolKind::Read);
        }
    } else if program == "sed" {
        sed(args, out);
    } else if program == "tee" {
        for path in operands_of(args, &[]) {
            push_path(out, path, ToolKind::Write);
        }
    }
}

/// `sed`: in place (`-i`) an edit of its files, else a read of them. Its
/// script is the first operand unless `-e` or `-f` gave it.
fn sed<'a>(args: &[&'a str], out: &mut Vec<ToolKind<'a>>) {
    let in_place = args
        .iter()
        .any(|a| a.starts_with("-i") || a.starts_with("--in-place") || is_short_with(a, 'i'));
    let scripted = args.iter().any(|a| SED_SCRIPT_OPTIONS.contains(a));
    let operands = operands_of(args, &SED_SCRIPT_OPTIONS);
    let files = if scripted {
        operands.as_slice()
    } else {
        operands.get(1..).unwrap_or_default()
    };
    let kind = if in_place {
        ToolKind::Edit
    } else {
        ToolKind::Read
    };
    for path in files {
        push_path(out, path, kind);
    }
}

/// A bundle of short options (`-ni`, `-Ei`) that holds `flag`.
fn is_short_with(arg: &str, flag: char) -> bool {
    arg.len() > 1
        && arg.starts_with('-')
        && !arg.starts_with("--")
        && arg[1..].chars().all(|c| c.is_ascii_alphabetic())
        && arg[1..].contains(flag)
}

/// The words of `args` that are not options, skipping the value of each
/// option in `valued`.
fn operands_of<'a>(args: &[&'a str], valued: &[&str]) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut it = args.iter();
    while let Some(&a) = it.next() {
        if valued.contains(&a) {
            it.next();
        } else if !a.starts_with('-') {
            out.push(a);
        }
    }
    out
}

/// Adds `word` as a file of `kind` when it reads as a path.
fn push_path<'a>(out: &mut Vec<ToolKind<'a>>, word: &'a str, kind: fn(&'a str) -> ToolKind<'a>) {
    let word = unquote(word);
    if looks_like_path(word) {
        out.push(kind(word));
    }
}

/// A word that names a file: a path with a directory or an extension,
/// with nothing the shell would expand and not a device.
fn looks_like_path(w: &str) -> bool {
    if w.is_empty()
        || w.starts_with('-')
        || w.starts_with("/dev/")
        || w.starts_with('&')
        || w.contains("://")
        || w.chars()
            .any(|c| "$*?{}[]`'\"()<>|;&\\=,".contains(c) || c.is_whitespace())
    {
        return false;
    }
    let name = w.rsplit('/').next().unwrap_or(w);
    let extension = name.rsplit_once('.').is_some_and(|(stem, ext)| {
        !ext.is_empty() && ext.chars().all(|c| c.is_ascii_alphanumeric()) && !stem.is_empty()
    });
    let has_letter = w.chars().any(|c| c.is_ascii_alphabetic());
    has_letter && !name.is_empty() && (w.contains('/') || extension)
}

/// The file a redirection word writes: `Some("")` when it is the next
/// word (`>`, `>>`, `2>`, `&>`), `None` when the word is no output
/// redirection. Duplications (`2>&1`) write no file.
fn redirect_target(w: &str) -> Option<&str> {
    let rest = w.trim_start_matches(|c: char| c.is_ascii_digit() || c == '&');
    let rest = rest.strip_prefix(">>").or_else(|| rest.strip_prefix('>'))?;
    let rest = rest.strip_prefix('|').unwrap_or(rest);
    if rest.starts_with('&') {
        return None;
    }
    Some(rest)
}

/// The delimiter of a here-document the line opens (`<<EOF`, `<< 'EOF'`,
/// `<<-EOF`), whose body the next lines are.
fn heredoc_end<'a>(words: &[&'a str]) -> Option<&'a str> {
    let at = words
        .iter()
        .position(|w| w.starts_with("<<") && !w.starts_with("<<<"))?;
    let marker = words[at].trim_start_matches("<<").trim_start_matches('-');
    let marker = if marker.is_empty() {
        words.get(at + 1)?
    } else {
        marker
    };
    let marker = unquote(marker);
    (!marker.is_empty()).then_some(marker)
}

/// A word that separates simple commands.
fn is_operator(w: &str) -> bool {
    matches!(w, "&&" | "||" | ";" | "|" | "&" | "(" | ")")
}

/// A program's name without its directory.
fn program_name(w: &str) -> &str {
    let w = unquote(w);
    w.rsplit('/').next().unwrap_or(w)
}

/// A word without the quotes around it.
fn unquote(w: &str) -> &str {
    for q in ['\'', '"'] {
        if let Some(inner) = w.strip_prefix(q).and_then(|r| r.strip_suffix(q)) {
            return inner;
        }
    }
    w
}

/// The words of one line, quotes kept and respected; `;`, `&&`, `||`,
/// `|` and `&` are words of their own even when written against another.
fn words(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let bytes = line.as_bytes();
    let mut start: Option<usize> = None;
    let mut quote: Option<u8> = None;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if let Some(q) = quote {
            if b == q {
                quote = None;
            } else if b == b'\\' && q == b'"' {
                i += 1;
            }
            i += 1;
            continue;
        }
        match b {
            b'\'' | b'"' => {
                start.get_or_insert(i);
                quote = Some(b);
            }
            b'\\' => {
                start.get_or_insert(i);
                i += 1;
            }
            b'#' if start.is_none() => break,
            b' ' | b'\t' => {
                if let Some(s) = start.take() {
                    out.push(&line[s..i]);
                }
            }
            b';' | b'|' | b'&' if !redirection_before(bytes, i) => {
                if let Some(s) = start.take() {
                    out.push(&line[s..i]);
                }
                let len = if bytes.get(i + 1) == Some(&b) && b != b';' {
                    2
                } else {
                    1
                };
                out.push(&line[i..i + len]);
                i += len;
                continue;
            }
            _ => {
                start.get_or_insert(i);
            }
        }
        i += 1;
    }
    if let Some(s) = start {
        out.push(&line[s.min(line.len())..]);
    }
    out
}

/// Whether the `&` or `|` at `i` belongs to a redirection (`2>&1`, `&>`,
/// `>|`) rather than separating commands.
fn redirection_before(bytes: &[u8], i: usize) -> bool {
    let prev = i.checked_sub(1).map(|p| bytes[p]);
    let next = bytes.get(i + 1).copied();
    match bytes[i] {
        b'&' => prev == Some(b'>') || next == Some(b'>'),
        b'|' => prev == Some(b'>'),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ToolKind::{Edit, Read, Write};

    #[test]
    fn reads_edits_and_writes_of_common_commands() {
        let cases: [(&str, Vec<ToolKind>); 15] = [
            ("cat src/a.py", vec![Read("src/a.py")]),
            ("( cd src && cat a.py )", vec![Read("a.py")]),
            (
                "sed --file fix.sed -i src/a.py src/b.py",
                vec![Edit("src/a.py"), Edit("src/b.py")],
            ),
            (
                "cd /testbed && sed -n '280,300p' astropy/io/ascii/qdp.py",
                vec![Read("astropy/io/ascii/qdp.py")],
            ),
            (
                "sed -i 's/_command_re = r\"READ/(?i)READ/' astropy/io/ascii/qdp.py",
                vec![Edit("astropy/io/ascii/qdp.py")],
            ),
            (
                "sed -i.bak -e 's/a/b/' x.rs y.rs",
                vec![Edit("x.rs"), Edit("y.rs")],
            ),
            ("head -n 50 setup.cfg | tail -5", vec![Read("setup.cfg")]),
            (
                "nl -ba django/db/models/fields/__init__.py | sed -n '1,80p'",
                vec![Read("django/db/models/fields/__init__.py")],
            ),
            ("python reproduce.py > out.txt 2>&1", vec![Write("out.txt")]),
            ("echo hi | tee -a notes/log.md", vec![Write("notes/log.md")]),
            ("timeout 10 cat \"docs/a.md\"", vec![Read("docs/a.md")]),
            ("cat 'docs/a b.md'", vec![]),
            ("grep -rn 'def parse' src/ ; ls -la", vec![]),
            ("cat $FILE *.py /dev/null", vec![]),
            ("python -m pytest tests/test_x.py -q", vec![]),
        ];
        for (script, want) in cases {
            assert_eq!(files(script), want, "{script}");
        }
    }

    #[test]
    fn a_here_document_writes_its_file_and_its_body_is_not_read() {
        let script = "cat <<'EOF' > /testbed/test_fix.py\nimport os\ncat secret.txt > other.py\nEOF\npython /testbed/test_fix.py";
        assert_eq!(files(script), vec![Write("/testbed/test_fix.py")]);
        let script = "cat > repro.py << EOF\nprint(1)\nEOF\ncat repro.py";
        assert_eq!(files(script), vec![Write("repro.py"), Read("repro.py")]);
    }

    #[test]
    fn odd_input_names_nothing_and_does_not_panic() {
        for script in [
            "",
            ">",
            "sed",
            "sed -i",
            "cat '",
            "a && && b",
            "2>&1 |",
            "<<",
            "é>ü",
            "\\",
        ] {
            assert_eq!(files(script), vec![], "{script}");
        }
        assert!(files("echo 'a;b' && cat 'x.py'").contains(&Read("x.py")));
    }
}
