//! Tool declarations: function tools carry over; server and custom tools cannot.

use serde_json::json;

use super::{Warnings, unrepresentable};
use crate::conversation::{Family, FunctionTool, Tool};
use crate::error::Result;
use crate::message::Extra;

/// The declarations in the target family (`None` stays `None`).
pub(super) fn convert(
    tools: Option<&[Tool]>,
    to: Family,
    w: &mut Warnings,
) -> Result<Option<Vec<Tool>>> {
    let Some(tools) = tools else {
        return Ok(None);
    };
    tools
        .iter()
        .map(|t| function(t, to, w))
        .collect::<Result<_>>()
        .map(Some)
}

fn function(tool: &Tool, to: Family, w: &mut Warnings) -> Result<Tool> {
    let f = match tool {
        Tool::Function(f) => f,
        Tool::Opaque(_) => {
            let what = match to {
                Family::Anthropic => "a non-function tool declaration",
                Family::OpenAi | Family::Gemini => "a server or non-function tool declaration",
            };
            return Err(unrepresentable(0, to, what));
        }
    };
    // Anthropic has no inner `function` object; OpenAI's outer object says `type`.
    if to == Family::Anthropic {
        w.drop_extra("tool function", &f.function_extra);
    }
    let mut extra = f.extra.clone();
    extra.shift_remove("type");
    w.drop_extra("tool", &extra);
    let mut outer = Extra::new();
    if to == Family::OpenAi {
        outer.insert("type".into(), json!("function"));
    }
    Ok(Tool::Function(FunctionTool {
        name: f.name.clone(),
        description: f.description.clone(),
        parameters: f.parameters.clone(),
        extra: outer,
        function_extra: Extra::new(),
    }))
}
