//! A scripted model for real agent clients: it asks the client to run a
//! shell command with a large output on each step, then says it is done.
//!
//! The client's own shell tool is found by its schema (a `command` or
//! `cmd` string property), so Claude Code's `Bash`, Codex's `exec_command`,
//! an Agents SDK function tool or any other shell tool is driven the same way. Steps are counted per session,
//! so a history the proxy shortened does not restart the script.

use serde_json::{Value, json};

/// How the scripted model behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShellScript {
    /// Shell commands before the final answer.
    pub steps: usize,
}

/// The final answer, once every step ran.
pub const DONE: &str = "All steps are done: every build log was read.";

/// The client's shell tool, as its declaration describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ShellTool {
    /// Its name.
    pub(crate) name: String,
    /// The string property that takes the command (`command`, or Codex's `cmd`).
    pub(crate) field: &'static str,
    /// Whether its schema also takes a `description` (Claude Code's `Bash`).
    pub(crate) described: bool,
}

/// The client's shell tool: the first declared tool (Chat Completions,
/// Responses, Messages or Gemini declaration) with a string `command` or `cmd`.
pub(crate) fn shell_tool(request: &Value) -> Option<ShellTool> {
    let tools = request.get("tools")?.as_array()?;
    // Gemini groups its function declarations in one tool object.
    let declared = tools
        .iter()
        .flat_map(|t| match t.get("functionDeclarations") {
            Some(Value::Array(functions)) => functions.iter().collect(),
            _ => vec![t],
        });
    declared.into_iter().find_map(|t| {
        let f = t.get("function").unwrap_or(t);
        let schema = f
            .get("parameters")
            .or_else(|| f.get("input_schema"))
            .or_else(|| f.get("parametersJsonSchema"))?;
        let props = schema.get("properties")?;
        let field = ["command", "cmd"].into_iter().find(|k| {
            props
                .get(*k)
                .and_then(|p| p.get("type"))
                .and_then(Value::as_str)
                == Some("string")
        })?;
        Some(ShellTool {
            name: f.get("name")?.as_str()?.to_owned(),
            field,
            described: props.get("description").is_some(),
        })
    })
}

/// Bytes step `n` prints: 8 to 20 KB, different from step to step.
pub fn output_bytes(n: usize) -> usize {
    8_000 + (n * 7_919) % 12_001
}

/// The arguments of step `n`'s call of `tool`.
pub(crate) fn arguments(n: usize, tool: &ShellTool) -> Value {
    let bytes = output_bytes(n);
    let lines = bytes / 24 + 1;
    let command = format!(
        "seq 1 {lines} | sed 's/.*/step {n} line &: compiling module_& of the build/' | head -c {bytes}"
    );
    let mut args = json!({ tool.field: command });
    if tool.described {
        args["description"] = json!(format!("Print build log {n}"));
    }
    args
}
