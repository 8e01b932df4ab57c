//! Agent trajectory files in OpenAI chat format: mini-swe-agent and tau-bench.

use serde_json::Value;

use super::openai::decode_message;
use super::util::object;
use crate::conversation::{Conversation, Family, Format};
use crate::error::{Error, Result};
use crate::message::{Extra, Message, Usage};

/// Message fields that trajectory logs add and the API does not accept.
const LOG_ONLY_FIELDS: [&str; 2] = ["extra", "provider_specific_fields"];

/// Decodes a mini-swe-agent trajectory (`messages`, `info`, `trajectory_format`).
///
/// The final `role: "exit"` message records the submission, not something
/// sent to the model, so it is left out of the conversation and noted in the
/// label. Log-only fields (`extra`, `provider_specific_fields`, a null
/// `function_call`, streaming `index` on tool calls) are dropped.
pub(crate) fn decode_mini_swe(v: Value) -> Result<Conversation> {
    let mut map = object(v, &|| "trajectory".to_owned())?;
    let Some(Value::Array(items)) = map.shift_remove("messages") else {
        return Err(Error::shape("trajectory", "a \"messages\" array"));
    };
    let mut exited = false;
    let mut messages = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        if item.get("role").and_then(Value::as_str) == Some("exit") {
            exited = true;
            continue;
        }
        messages.push(log_message(item, i, "messages")?);
    }
    let model = map
        .get("info")
        .and_then(|i| i.pointer("/config/model/model_name"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let instance = map.get("instance_id").and_then(Value::as_str);
    let label = match (instance, exited) {
        (Some(id), true) => Some(format!("{id} (exited)")),
        (Some(id), false) => Some(id.to_owned()),
        (None, true) => Some("exited".to_owned()),
        (None, false) => None,
    };
    Ok(Conversation {
        format: Format::MiniSweAgent,
        family: Family::OpenAi,
        model,
        tools: None,
        messages,
        extra: Extra::new(),
        boundaries: Vec::new(),
        label,
        key_order: Vec::new(),
    })
}

/// Decodes a tau-bench results file: an array of runs, each with `traj`.
pub(crate) fn decode_tau_bench(runs: Vec<Value>) -> Result<Vec<Conversation>> {
    let mut out = Vec::with_capacity(runs.len());
    for (r, run) in runs.into_iter().enumerate() {
        let mut run = object(run, &|| format!("[{r}]"))?;
        let Some(Value::Array(traj)) = run.shift_remove("traj") else {
            return Err(Error::shape(format!("[{r}]"), "a \"traj\" array"));
        };
        let path = format!("[{r}].traj");
        let messages = traj
            .into_iter()
            .enumerate()
            .map(|(i, m)| log_message(m, i, &path))
            .collect::<Result<Vec<_>>>()?;
        let field = |k: &str| run.get(k).map(Value::to_string).unwrap_or("?".into());
        out.push(Conversation {
            format: Format::TauBench,
            family: Family::OpenAi,
            model: None,
            tools: None,
            messages,
            extra: Extra::new(),
            boundaries: Vec::new(),
            label: Some(format!(
                "run {r}: task {}, trial {}, reward {}",
                field("task_id"),
                field("trial"),
                field("reward")
            )),
            key_order: Vec::new(),
        });
    }
    Ok(out)
}

fn log_message(mut v: Value, i: usize, path: &str) -> Result<Message> {
    // The provider's usage of the call that produced this message (log only).
    let usage = v
        .pointer("/extra/response/usage")
        .filter(|u| u.is_object())
        .map(Usage::from_openai);
    if let Value::Object(m) = &mut v {
        for k in LOG_ONLY_FIELDS {
            m.remove(k);
        }
        if m.get("function_call") == Some(&Value::Null) {
            m.shift_remove("function_call");
        }
        if let Some(Value::Array(calls)) = m.get_mut("tool_calls") {
            for c in calls.iter_mut().filter_map(Value::as_object_mut) {
                c.shift_remove("index");
            }
        }
    }
    let mut m = decode_message(v, &|| format!("{path}[{i}]"))?;
    m.meta.usage = usage.map(Box::new);
    Ok(m)
}
