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

/// The answer to a client's structured side query (a request that asks
/// for JSON fitting a schema: Gemini CLI's next-speaker and loop checks,
/// any client's classifier): the smallest instance of the schema, the
/// first value of each choice, so a "who speaks next" check hears "user"
/// and a loop check hears "no loop".
pub(crate) fn structured_answer(request: &Value) -> Option<Value> {
    let schema = [
        "/generationConfig/responseJsonSchema",
        "/generationConfig/responseSchema",
        "/response_format/json_schema/schema",
        "/text/format/schema",
        "/output_format/schema",
    ]
    .into_iter()
    .find_map(|p| request.pointer(p))
    .or_else(|| {
        let json = request.pointer("/generationConfig/responseMimeType")?;
        (json == "application/json").then_some(&Value::Null)
    })?;
    Some(instance(schema))
}

/// The smallest value a JSON schema (or Gemini's OpenAPI-style one) allows.
fn instance(schema: &Value) -> Value {
    if let Some(first) = schema.get("enum").and_then(|e| e.get(0)) {
        return first.clone();
    }
    if let Some(first) = ["anyOf", "oneOf"]
        .into_iter()
        .find_map(|k| schema.get(k)?.get(0))
    {
        return instance(first);
    }
    let kind = match schema.get("type") {
        Some(Value::Array(kinds)) => kinds.first().and_then(Value::as_str),
        Some(t) => t.as_str(),
        None => None,
    };
    match kind.map(str::to_ascii_lowercase).as_deref() {
        Some("string") => json!(""),
        Some("integer" | "number") => json!(0),
        Some("boolean") => json!(false),
        Some("array") => json!([]),
        Some("null") => Value::Null,
        _ => {
            let mut out = serde_json::Map::new();
            if let Some(Value::Object(props)) = schema.get("properties") {
                for (name, p) in props {
                    out.insert(name.clone(), instance(p));
                }
            }
            Value::Object(out)
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_structured_side_query_gets_the_smallest_instance_of_its_schema() {
        // Gemini CLI 0.61.0's next-speaker check and loop check, as sent.
        let next = json!({"contents": [], "generationConfig": {
            "responseMimeType": "application/json",
            "responseJsonSchema": {"type": "object", "properties": {
                "reasoning": {"type": "string"},
                "next_speaker": {"type": "string", "enum": ["user", "model"]}},
                "required": ["reasoning", "next_speaker"]}}});
        assert_eq!(
            structured_answer(&next),
            Some(json!({"reasoning": "", "next_speaker": "user"}))
        );
        let looping = json!({"generationConfig": {"responseSchema": {"type": "OBJECT",
            "properties": {"unproductive_state_confidence": {"type": "NUMBER"},
                "flags": {"type": ["array", "null"]}, "sure": {"anyOf": [{"type": "boolean"}]}}}}});
        assert_eq!(
            structured_answer(&looping),
            Some(json!({"unproductive_state_confidence": 0, "flags": [], "sure": false}))
        );
        let chat = json!({"response_format": {"type": "json_schema",
            "json_schema": {"schema": {"type": "object", "properties": {"n": {"type": "integer"}}}}}});
        assert_eq!(structured_answer(&chat), Some(json!({"n": 0})));
        // JSON asked for without a schema: an empty object.
        let bare = json!({"generationConfig": {"responseMimeType": "application/json"}});
        assert_eq!(structured_answer(&bare), Some(json!({})));
        // A plain request is no side query.
        let plain = json!({"generationConfig": {"temperature": 0}, "tools": []});
        assert_eq!(structured_answer(&plain), None);
    }
}
