//! What a tool call did, from its name and arguments: one classifier shared
//! by the fact sheet and the serialization sent to LLM summarizers.

use serde_json::Value;

/// The kind of a tool call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolKind<'a> {
    /// Read a file.
    Read(&'a str),
    /// Wrote (created or overwrote) a file.
    Write(&'a str),
    /// Edited a file in place.
    Edit(&'a str),
    /// Ran a shell command.
    Shell(&'a str),
    /// Searched (grep, glob, web search).
    Search(&'a str),
    /// Asked the user a question.
    Ask,
    /// Anything else.
    Other,
}

const PATH_KEYS: [&str; 5] = ["file_path", "path", "filename", "file", "notebook_path"];
const COMMAND_KEYS: [&str; 3] = ["command", "cmd", "script"];
const PATTERN_KEYS: [&str; 4] = ["pattern", "query", "q", "glob"];

/// Classifies a call by its tool name and arguments.
pub fn classify<'a>(name: &str, args: &'a Value) -> ToolKind<'a> {
    let lname = name.to_lowercase();
    let get = |keys: &[&str]| {
        keys.iter()
            .find_map(|k| args.get(*k).and_then(Value::as_str))
    };
    if lname.starts_with("ask") || lname.contains("question") {
        return ToolKind::Ask;
    }
    // A patch in the format Codex's `apply_patch` takes: the first file it
    // changes (`*** Update File: src/a.rs`); `patch_files` lists them all.
    if let Some(kind) = patch_of(&lname, args).and_then(|p| p.lines().find_map(file_header)) {
        return kind;
    }
    if ["grep", "glob", "search", "find"]
        .iter()
        .any(|k| lname.contains(k))
        && let Some(p) = get(&PATTERN_KEYS)
    {
        return ToolKind::Search(p);
    }
    // A text editor's sub-command (OpenHands' `str_replace_editor`,
    // Anthropic's `str_replace_based_edit_tool`): a file operation, not a
    // shell command.
    if let Some(path) = get(&PATH_KEYS) {
        match args.get("command").and_then(Value::as_str) {
            Some("view") => return ToolKind::Read(path),
            Some("create") => return ToolKind::Write(path),
            Some("str_replace" | "insert" | "undo_edit") => return ToolKind::Edit(path),
            _ => {}
        }
    }
    if let Some(cmd) = get(&COMMAND_KEYS).or_else(|| shell_script(args)) {
        return ToolKind::Shell(cmd);
    }
    if let Some(path) = get(&PATH_KEYS) {
        return if ["edit", "replace", "patch"]
            .iter()
            .any(|k| lname.contains(k))
        {
            ToolKind::Edit(path)
        } else if ["write", "create"].iter().any(|k| lname.contains(k)) {
            ToolKind::Write(path)
        } else {
            ToolKind::Read(path)
        };
    }
    ToolKind::Other
}

/// The files a patch call changes, in order, each with how (see
/// `file_header`) and its own part of the patch; empty for any other
/// call. Codex's `apply_patch` takes one patch for several files.
pub fn patch_files<'a>(name: &str, args: &'a Value) -> Vec<(ToolKind<'a>, &'a str)> {
    let Some(patch) = patch_of(&name.to_lowercase(), args) else {
        return Vec::new();
    };
    // Each file's header and where it starts.
    let mut starts: Vec<(ToolKind<'a>, usize)> = Vec::new();
    let mut at = 0;
    for line in patch.split_inclusive('\n') {
        if let Some(kind) = file_header(line) {
            starts.push((kind, at));
        }
        at += line.len();
    }
    let ends: Vec<usize> = starts
        .iter()
        .skip(1)
        .map(|(_, at)| *at)
        .chain([patch.len()])
        .collect();
    starts
        .into_iter()
        .zip(ends)
        .map(|((kind, start), end)| (kind, &patch[start..end]))
        .collect()
}

/// The patch text of a call to a patch tool (`lname`: its name, lower-cased).
fn patch_of<'a>(lname: &str, args: &'a Value) -> Option<&'a str> {
    if !lname.contains("patch") {
        return None;
    }
    ["input", "patch"]
        .iter()
        .find_map(|k| args.get(*k).and_then(Value::as_str))
}

/// A patch line that opens a file's part: `*** Update File: path` (an
/// edit), `*** Add File: path` (a write), `*** Delete File: path` (an edit).
fn file_header(line: &str) -> Option<ToolKind<'_>> {
    let line = line.trim_end();
    if let Some(p) = line.strip_prefix("*** Update File: ") {
        Some(ToolKind::Edit(p.trim()))
    } else if let Some(p) = line.strip_prefix("*** Add File: ") {
        Some(ToolKind::Write(p.trim()))
    } else {
        line.strip_prefix("*** Delete File: ")
            .map(|p| ToolKind::Edit(p.trim()))
    }
}

/// The script of a command given as an argument vector that runs a shell
/// (`["bash", "-lc", "cargo test"]`, as Codex's `shell` tool and its
/// `local_shell_call` take it).
fn shell_script(args: &Value) -> Option<&str> {
    let argv = COMMAND_KEYS
        .iter()
        .find_map(|k| args.get(*k).and_then(Value::as_array))?;
    let [shell, flag, script] = argv.as_slice() else {
        return None;
    };
    let (shell, flag) = (shell.as_str()?, flag.as_str()?);
    let name = shell.rsplit('/').next().unwrap_or(shell);
    let runs_script = flag.starts_with('-') && flag.ends_with('c');
    (runs_script && matches!(name, "bash" | "sh" | "zsh" | "dash")).then_some(script.as_str()?)
}

/// An argument this long is a body the agent typed (a script, a payload).
const BODY_CHARS: usize = 400;

/// A call's string arguments, sorted into those that refer to things (a
/// path, a command, a pattern, an id) and the bodies the agent typed: what
/// it writes into a file or edits, and any argument of `BODY_CHARS` or
/// more. Names in bodies are the language's as much as the task's.
pub fn split_arguments<'a>(name: &str, args: &'a Value) -> (Vec<&'a str>, Vec<&'a str>) {
    let path = match classify(name, args) {
        ToolKind::Write(p) | ToolKind::Edit(p) => Some(p),
        _ => None,
    };
    let mut all = Vec::new();
    strings(args, &mut all);
    all.into_iter()
        .partition(|s| s.len() < BODY_CHARS && path.is_none_or(|p| p == *s))
}

fn strings<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
    match v {
        Value::String(s) => out.push(s),
        Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
        Value::Object(m) => m.values().for_each(|x| strings(x, out)),
        _ => {}
    }
}

/// First string value of a JSON value (depth first), for short summaries.
pub fn first_string(v: &Value) -> Option<&str> {
    match v {
        Value::String(s) => Some(s),
        Value::Object(m) => m.values().find_map(first_string),
        Value::Array(a) => a.iter().find_map(first_string),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn classifies_common_agent_tools() {
        assert_eq!(
            classify("Read", &json!({"file_path": "a.rs"})),
            ToolKind::Read("a.rs")
        );
        assert_eq!(
            classify("Edit", &json!({"file_path": "a.rs", "old_string": "x"})),
            ToolKind::Edit("a.rs")
        );
        assert_eq!(
            classify("str_replace_based_edit_tool", &json!({"path": "a.rs"})),
            ToolKind::Edit("a.rs")
        );
        assert_eq!(
            classify("write_file", &json!({"path": "a.rs"})),
            ToolKind::Write("a.rs")
        );
        assert_eq!(
            classify("Bash", &json!({"command": "ls"})),
            ToolKind::Shell("ls")
        );
        assert_eq!(
            classify("Grep", &json!({"pattern": "fn main", "path": "src"})),
            ToolKind::Search("fn main")
        );
        assert_eq!(classify("AskUserQuestion", &json!({})), ToolKind::Ask);
        // Codex's `shell` takes an argument vector that runs a shell script.
        assert_eq!(
            classify("shell", &json!({"command": ["bash", "-lc", "cargo test"]})),
            ToolKind::Shell("cargo test")
        );
        assert_eq!(
            classify("shell", &json!({"command": ["/bin/zsh", "-c", "ls"]})),
            ToolKind::Shell("ls")
        );
        // Codex's patches name the file they change first.
        let patch = "*** Begin Patch\n*** Update File: src/parse.rs\n@@\n-a\n+b\n*** End Patch\n";
        assert_eq!(
            classify("apply_patch", &json!({ "input": patch })),
            ToolKind::Edit("src/parse.rs")
        );
        assert_eq!(
            classify(
                "apply_patch",
                &json!({"input": "*** Begin Patch\n*** Add File: new.rs\n+x\n"})
            ),
            ToolKind::Write("new.rs")
        );
        let two = json!({"input": "*** Begin Patch\n*** Update File: a.rs\n-x\n+y\n*** Add File: b.rs\n+z\n*** End Patch\n"});
        let files = patch_files("apply_patch", &two);
        assert_eq!(
            files,
            [
                (ToolKind::Edit("a.rs"), "*** Update File: a.rs\n-x\n+y\n"),
                (
                    ToolKind::Write("b.rs"),
                    "*** Add File: b.rs\n+z\n*** End Patch\n"
                ),
            ]
        );
        assert!(patch_files("shell", &two).is_empty());
        assert_eq!(
            split_arguments("apply_patch", &json!({ "input": patch })),
            (Vec::<&str>::new(), vec![patch])
        );
        // A vector that runs a program directly names no script.
        assert_eq!(
            classify("shell", &json!({"command": ["cargo", "test"]})),
            ToolKind::Other
        );
        // Text editors name their operation in `command`.
        let editor = |command: &str| json!({"command": command, "path": "/w/a.py"});
        assert_eq!(
            classify("str_replace_editor", &editor("view")),
            ToolKind::Read("/w/a.py")
        );
        assert_eq!(
            classify("str_replace_editor", &editor("create")),
            ToolKind::Write("/w/a.py")
        );
        assert_eq!(
            classify("str_replace_editor", &editor("str_replace")),
            ToolKind::Edit("/w/a.py")
        );
        assert_eq!(
            classify("str_replace_based_edit_tool", &editor("insert")),
            ToolKind::Edit("/w/a.py")
        );
        // A shell tool whose command happens to be one word stays a shell.
        assert_eq!(
            classify("Bash", &json!({"command": "view"})),
            ToolKind::Shell("view")
        );
        let edit = json!({"file_path": "a.rs", "old_string": "x", "new_string": "y"});
        assert_eq!(
            split_arguments("Edit", &edit),
            (vec!["a.rs"], vec!["x", "y"])
        );
        let long = "x".repeat(BODY_CHARS);
        let bash = json!({"command": "cargo test", "description": long});
        assert_eq!(
            split_arguments("Bash", &bash),
            (vec!["cargo test"], vec![long.as_str()])
        );
        assert_eq!(
            classify("Task", &json!({"prompt": "explore"})),
            ToolKind::Other
        );
    }
}
