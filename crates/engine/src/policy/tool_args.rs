//! `clip_tool_args`: arguments of old tool calls become a small JSON
//! placeholder; the tool name and call id stay, so pairing is intact and the
//! API still accepts the call.

use std::ops::Range;

use abridge_model::{Arguments, Message, Part, Role};
use serde_json::json;

use crate::config::PolicyConfig;
use crate::placeholder::{ARGS_KEY, ARGS_NOTE, args_json};

pub(super) fn apply(messages: &mut [Message], region: Range<usize>, cfg: &PolicyConfig) -> usize {
    let mut changed = 0;
    for m in &mut messages[region] {
        if m.meta.pinned || m.role != Role::Assistant {
            continue;
        }
        for p in &mut m.parts {
            let Part::ToolCall(call) = p else { continue };
            if is_placeholder(&call.arguments)
                || call.arguments.to_json_text().len() < cfg.min_args_chars
            {
                continue;
            }
            call.arguments = match call.arguments {
                Arguments::Json(_) => Arguments::Json(args_json()),
                Arguments::Value(_) => Arguments::Value(json!({ ARGS_KEY: ARGS_NOTE })),
                Arguments::Custom(_) => Arguments::Custom(format!("[{ARGS_NOTE}]")),
            };
            changed += 1;
        }
    }
    changed
}

fn is_placeholder(a: &Arguments) -> bool {
    match a {
        Arguments::Json(s) => *s == args_json(),
        Arguments::Value(v) => v.get(ARGS_KEY).is_some(),
        Arguments::Custom(s) => s.contains(ARGS_NOTE),
    }
}
