//! Messages for unit tests.

use abridge_model::{Arguments, ContentForm, Message, Part, Role, ToolCall, ToolResult};
use serde_json::Value;

/// A tool call `id` to `name` with `args`, and its result `out`.
pub(crate) fn exchange(id: &str, name: &str, args: Value, out: &str) -> [Message; 2] {
    let call = Message {
        role: Role::Assistant,
        form: ContentForm::Blocks,
        parts: vec![Part::ToolCall(Box::new(ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: Arguments::Value(args),
            extra: Default::default(),
            function_extra: Default::default(),
        }))],
        ..Message::default()
    };
    let result = Message {
        role: Role::User,
        form: ContentForm::Blocks,
        parts: vec![Part::ToolResult(Box::new(ToolResult {
            call_id: id.into(),
            parts: vec![Part::text(out)],
            form: ContentForm::Text,
            is_error: None,
            extra: Default::default(),
        }))],
        ..Message::default()
    };
    [call, result]
}
