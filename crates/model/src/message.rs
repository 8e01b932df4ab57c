//! Messages and their content parts.
//!
//! The types here are wire-neutral: one [`Message`] can come from an OpenAI
//! Chat Completions body, an Anthropic Messages body or an agent log. Each
//! type keeps the fields it does not model in an `extra` map, and remembers
//! the shape its content had on the wire ([`ContentForm`]), so that encoding a
//! decoded body gives back the same JSON value.

use std::borrow::Cow;

use serde_json::Value;

pub use crate::extra::Extra;

/// Who sent a message.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub enum Role {
    /// System prompt (OpenAI `system`, Anthropic top-level `system`).
    System,
    /// OpenAI `developer` instructions.
    Developer,
    /// The user, or the harness speaking for the user.
    #[default]
    User,
    /// The model.
    Assistant,
    /// OpenAI `tool` message carrying one tool result.
    Tool,
    /// Legacy OpenAI `function` message answering a `function_call`.
    Function,
    /// Any other role string, kept as written (the validator reports it).
    Other(String),
}

impl Role {
    /// Parses a wire role string.
    pub fn parse(s: &str) -> Self {
        match s {
            "system" => Role::System,
            "developer" => Role::Developer,
            "user" => Role::User,
            "assistant" => Role::Assistant,
            "tool" => Role::Tool,
            "function" => Role::Function,
            other => Role::Other(other.to_owned()),
        }
    }

    /// The wire role string.
    pub fn as_str(&self) -> &str {
        match self {
            Role::System => "system",
            Role::Developer => "developer",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
            Role::Function => "function",
            Role::Other(s) => s,
        }
    }

    /// True for `system` and `developer`: instructions rather than dialogue.
    pub fn is_instruction(&self) -> bool {
        matches!(self, Role::System | Role::Developer)
    }
}

/// How a message's (or tool result's) content was written on the wire.
///
/// Kept so that `"content": "hi"` does not come back as
/// `"content": [{"type": "text", "text": "hi"}]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ContentForm {
    /// The `content` key was absent.
    Absent,
    /// `"content": null`.
    Null,
    /// A plain string.
    #[default]
    Text,
    /// An array of typed parts/blocks.
    Blocks,
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Message {
    /// Sender.
    pub role: Role,
    /// Content in order. Tool calls of an OpenAI assistant message come after
    /// its text; an OpenAI tool message holds exactly one [`Part::ToolResult`].
    pub parts: Vec<Part>,
    /// Wire shape of the textual content.
    pub form: ContentForm,
    /// Fields of the message object that abridge does not model.
    pub extra: Extra,
    /// Facts about the message that are not sent on the wire.
    pub meta: Meta,
}

/// Facts about a message that are not part of the wire body.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Meta {
    /// 1-based line of the source file the message started on, for logs.
    pub line: Option<usize>,
    /// The message is an agent's own compaction summary (Claude Code's
    /// `isCompactSummary`), or an abridge briefing.
    pub compact_summary: bool,
    /// Provider-reported token usage of the response that produced this
    /// assistant message, when the log recorded it (boxed: only agent
    /// logs have it, and every message of a request body would carry its
    /// width).
    pub usage: Option<Box<Usage>>,
    /// Never clipped, collapsed or dropped by compaction.
    pub pinned: bool,
    /// A user-role message the harness injected (a skill's instructions, a
    /// command's output; Claude Code's `isMeta`), not the user's words.
    pub injected: bool,
    /// A system message carried inside the wire `messages` array (Anthropic
    /// accepts them there; Claude Code sends its environment that way), not
    /// the top-level system prompt.
    pub inline_system: bool,
    /// The Responses API's `instructions`, carried as the leading system
    /// message (outside the body's `input` items).
    pub instructions: bool,
    /// An item of the model's turn after its first (the Responses API gives
    /// each call and reasoning step its own item): it continues the
    /// iteration the turn's first item opened instead of opening one.
    pub continues_turn: bool,
}

/// Provider-reported token usage of one response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct Usage {
    /// Prompt tokens not read from or written to a cache.
    pub input_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
    /// Prompt tokens read from the provider's cache.
    pub cache_read_tokens: u64,
    /// Prompt tokens written to the provider's cache.
    pub cache_write_tokens: u64,
}

impl Usage {
    /// From an Anthropic `usage` object (`input_tokens`,
    /// `cache_read_input_tokens`, `cache_creation_input_tokens`, `output_tokens`).
    pub fn from_anthropic(v: &Value) -> Usage {
        let n = |k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(0);
        Usage {
            input_tokens: n("input_tokens"),
            output_tokens: n("output_tokens"),
            cache_read_tokens: n("cache_read_input_tokens"),
            cache_write_tokens: n("cache_creation_input_tokens"),
        }
    }

    /// From an OpenAI `usage` object: Chat Completions' `prompt_tokens`
    /// (cached reads included, as `prompt_tokens_details.cached_tokens`, or
    /// DeepSeek's `prompt_cache_hit_tokens`) and `completion_tokens`, or the
    /// Responses API's `input_tokens`, `input_tokens_details.cached_tokens`
    /// and `output_tokens`.
    pub fn from_openai(v: &Value) -> Usage {
        let n = |p: &str| v.pointer(p).and_then(Value::as_u64);
        let prompt = n("/prompt_tokens")
            .or_else(|| n("/input_tokens"))
            .unwrap_or(0);
        let cached = n("/prompt_tokens_details/cached_tokens")
            .or_else(|| n("/input_tokens_details/cached_tokens"))
            .or_else(|| n("/prompt_cache_hit_tokens"))
            .unwrap_or(0)
            .min(prompt);
        Usage {
            input_tokens: prompt - cached,
            output_tokens: n("/completion_tokens")
                .or_else(|| n("/output_tokens"))
                .unwrap_or(0),
            cache_read_tokens: cached,
            cache_write_tokens: 0,
        }
    }

    /// Reads a Gemini `usageMetadata` object: the prompt count includes
    /// what came from a cache (`cachedContentTokenCount`), and thinking is
    /// output, as Google bills it.
    pub fn from_gemini(v: &Value) -> Usage {
        let n = |k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(0);
        let prompt = n("promptTokenCount");
        let cached = n("cachedContentTokenCount").min(prompt);
        Usage {
            input_tokens: prompt - cached,
            output_tokens: n("candidatesTokenCount") + n("thoughtsTokenCount"),
            cache_read_tokens: cached,
            cache_write_tokens: 0,
        }
    }

    /// Total prompt size the provider saw: input plus cached reads and writes.
    pub fn prompt_tokens(&self) -> u64 {
        self.input_tokens + self.cache_read_tokens + self.cache_write_tokens
    }
}

/// One piece of a message's content.
#[derive(Debug, Clone, PartialEq)]
pub enum Part {
    /// Plain text.
    Text(TextPart),
    /// An image, inline or by URL.
    Image(Box<ImagePart>),
    /// A call of a tool by the assistant.
    ToolCall(Box<ToolCall>),
    /// The answer to a tool call.
    ToolResult(Box<ToolResult>),
    /// Model reasoning (Anthropic `thinking`/`redacted_thinking`, OpenAI-compatible `reasoning_content`).
    Reasoning(Box<Reasoning>),
    /// Any other part, kept verbatim (documents, audio, server tool blocks…);
    /// boxed, as the other large kinds are, so that a text part — nearly
    /// every part — takes 40 bytes instead of 72.
    Opaque(Box<Value>),
}

/// The key of Anthropic's prompt-cache marker on a block.
pub const CACHE_CONTROL: &str = "cache_control";

impl Part {
    /// About how many bytes of text it holds (a parsed argument value and
    /// an opaque part are guessed): what work that reads it scans, to share
    /// that work between threads.
    pub fn text_bytes(&self) -> usize {
        match self {
            Part::Text(t) => t.text.len(),
            Part::Image(_) => 0,
            Part::ToolCall(c) => {
                c.name.len()
                    + match &c.arguments {
                        Arguments::Json(s) | Arguments::Custom(s) => s.len(),
                        Arguments::Value(_) => 64,
                    }
            }
            Part::ToolResult(r) => r.parts.iter().map(Part::text_bytes).sum(),
            Part::Reasoning(r) => r.text.len(),
            Part::Opaque(_) => 256,
        }
    }

    /// The part's other fields; an opaque part's are in its value.
    pub fn extra(&self) -> Option<&Extra> {
        match self {
            Part::Text(t) => Some(&t.extra),
            Part::Image(i) => Some(&i.extra),
            Part::ToolCall(c) => Some(&c.extra),
            Part::ToolResult(r) => Some(&r.extra),
            Part::Reasoning(r) => Some(&r.extra),
            Part::Opaque(_) => None,
        }
    }

    /// The part's other fields, to change them.
    pub fn extra_mut(&mut self) -> Option<&mut Extra> {
        match self {
            Part::Text(t) => Some(&mut t.extra),
            Part::Image(i) => Some(&mut i.extra),
            Part::ToolCall(c) => Some(&mut c.extra),
            Part::ToolResult(r) => Some(&mut r.extra),
            Part::Reasoning(r) => Some(&mut r.extra),
            Part::Opaque(_) => None,
        }
    }

    /// A part kept verbatim.
    pub fn opaque(v: Value) -> Self {
        Part::Opaque(Box::new(v))
    }

    /// A text part with no extra fields.
    pub fn text(text: impl Into<String>) -> Self {
        Part::Text(TextPart {
            text: text.into(),
            extra: Extra::new(),
        })
    }

    /// The text of a text part.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Part::Text(t) => Some(&t.text),
            _ => None,
        }
    }
}

/// A text part.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TextPart {
    /// The text.
    pub text: String,
    /// Other fields of the part (`cache_control`, `citations`…).
    pub extra: Extra,
}

/// An image part.
#[derive(Debug, Clone, PartialEq)]
pub struct ImagePart {
    /// Where the image bytes are.
    pub source: ImageSource,
    /// Other fields of the inner object (OpenAI `image_url`, Anthropic `source`), such as `detail`.
    pub source_extra: Extra,
    /// Other fields of the part itself (`cache_control`…).
    pub extra: Extra,
}

/// Where an image's bytes are.
#[derive(Debug, Clone, PartialEq)]
pub enum ImageSource {
    /// A URL; OpenAI also carries inline images as `data:` URLs here.
    Url(String),
    /// Inline base64 data (Anthropic `source.type = "base64"`).
    Base64 {
        /// MIME type such as `image/png`.
        media_type: String,
        /// Base64 payload.
        data: String,
    },
}

impl ImageSource {
    /// The image as a URL: its URL, or its data as a `data:` URL (how
    /// OpenAI's APIs carry inline images).
    pub fn to_url(&self) -> String {
        match self {
            ImageSource::Url(u) => u.clone(),
            ImageSource::Base64 { media_type, data } => format!("data:{media_type};base64,{data}"),
        }
    }

    /// An image given as a URL: inline data for a `data:` URL in base64
    /// (the inverse of [`ImageSource::to_url`]), the URL itself otherwise.
    pub fn from_url(url: &str) -> ImageSource {
        let inline = url
            .strip_prefix("data:")
            .and_then(|rest| rest.split_once(";base64,"));
        match inline {
            Some((media_type, data)) => ImageSource::Base64 {
                media_type: media_type.to_owned(),
                data: data.to_owned(),
            },
            None => ImageSource::Url(url.to_owned()),
        }
    }
}

/// A tool call made by the assistant.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// Call id; results refer to it.
    pub id: String,
    /// Tool name.
    pub name: String,
    /// Arguments as the wire carried them.
    pub arguments: Arguments,
    /// Other fields of the call object (OpenAI `index`, Anthropic `cache_control`…).
    pub extra: Extra,
    /// Other fields of OpenAI's inner `function` (or `custom`) object.
    pub function_extra: Extra,
}

/// Tool-call arguments, in the form the wire uses.
#[derive(Debug, Clone, PartialEq)]
pub enum Arguments {
    /// A JSON document encoded as a string (OpenAI `function.arguments`).
    /// It is kept as written, even when it is not valid JSON.
    Json(String),
    /// A JSON value (Anthropic `input`).
    Value(Value),
    /// Free-form text input of an OpenAI custom tool.
    Custom(String),
}

impl Arguments {
    /// Arguments as JSON text, as a model would read them.
    pub fn to_json_text(&self) -> std::borrow::Cow<'_, str> {
        match self {
            Arguments::Json(s) | Arguments::Custom(s) => std::borrow::Cow::Borrowed(s),
            Arguments::Value(v) => std::borrow::Cow::Owned(v.to_string()),
        }
    }

    /// The arguments as fields a reader can look into: [`to_value`](Self::to_value),
    /// except that a custom tool's free-form input reads as `{"input": text}`,
    /// the shape the same tool takes as a function (Codex's `apply_patch`).
    pub fn fields(&self) -> Value {
        match self {
            Arguments::Custom(s) => serde_json::json!({ "input": s }),
            _ => self.to_value(),
        }
    }

    /// Arguments as a JSON value; `Null` when the text is not JSON (a custom
    /// tool's free-form input, or malformed arguments kept as written).
    pub fn to_value(&self) -> Value {
        match self {
            Arguments::Value(v) => v.clone(),
            Arguments::Json(s) | Arguments::Custom(s) => {
                serde_json::from_str(s).unwrap_or(Value::Null)
            }
        }
    }
}

/// The result of a tool call.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    /// Id of the call this answers.
    pub call_id: String,
    /// Result content (text and images).
    pub parts: Vec<Part>,
    /// Wire shape of `content`.
    pub form: ContentForm,
    /// Anthropic `is_error`, kept as written (absent, `true` or `false`).
    pub is_error: Option<bool>,
    /// Other fields of the result block (`cache_control`…).
    pub extra: Extra,
}

impl ToolResult {
    /// All text of the result, parts joined by newlines (borrowed when
    /// there is one text part, as there nearly always is).
    pub fn text(&self) -> Cow<'_, str> {
        join_text(&self.parts)
    }

    /// Replaces the content with one text (a placeholder, a cut): a result
    /// that had no content, or a null one, gets it as text.
    pub fn replace_with_text(&mut self, text: String) {
        self.parts = vec![Part::text(text)];
        if matches!(self.form, ContentForm::Absent | ContentForm::Null) {
            self.form = ContentForm::Text;
        }
    }
}

/// Model reasoning.
#[derive(Debug, Clone, PartialEq)]
pub struct Reasoning {
    /// Reasoning text; for redacted reasoning, the opaque `data`.
    pub text: String,
    /// Anthropic signature; must be sent back unchanged.
    pub signature: Option<String>,
    /// Which wire form this came from.
    pub kind: ReasoningKind,
    /// Other fields of the block.
    pub extra: Extra,
}

/// Wire form of a reasoning part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReasoningKind {
    /// Anthropic `thinking` block.
    Thinking,
    /// Anthropic `redacted_thinking` block (`text` holds `data`).
    Redacted,
    /// OpenAI-compatible `reasoning_content` field of an assistant message.
    Field,
    /// Gemini text part with `thought: true` (its `thoughtSignature` is
    /// the signature).
    Thought,
}

impl Message {
    /// About how many bytes of text its parts hold ([`Part::text_bytes`]).
    pub fn text_bytes(&self) -> usize {
        self.parts.iter().map(Part::text_bytes).sum()
    }

    /// A message with one text part, written as a plain string.
    pub fn text(role: Role, text: impl Into<String>) -> Self {
        Message {
            role,
            parts: vec![Part::text(text)],
            form: ContentForm::Text,
            extra: Extra::new(),
            meta: Meta::default(),
        }
    }

    /// Tool calls in this message.
    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCall> {
        self.parts.iter().filter_map(|p| match p {
            Part::ToolCall(c) => Some(&**c),
            _ => None,
        })
    }

    /// Tool results in this message.
    pub fn tool_results(&self) -> impl Iterator<Item = &ToolResult> {
        self.parts.iter().filter_map(|p| match p {
            Part::ToolResult(r) => Some(&**r),
            _ => None,
        })
    }

    /// True when the message carries at least one tool call.
    pub fn has_tool_calls(&self) -> bool {
        self.parts.iter().any(|p| matches!(p, Part::ToolCall(_)))
    }

    /// True when the message carries at least one tool result.
    pub fn has_tool_results(&self) -> bool {
        self.parts.iter().any(|p| matches!(p, Part::ToolResult(_)))
    }

    /// All text parts joined by newlines (tool results and calls
    /// excluded), borrowed when there is one.
    pub fn text_content(&self) -> Cow<'_, str> {
        join_text(&self.parts)
    }
}

fn join_text(parts: &[Part]) -> Cow<'_, str> {
    let mut texts = parts.iter().filter_map(Part::as_text);
    let Some(first) = texts.next() else {
        return Cow::Borrowed("");
    };
    let Some(second) = texts.next() else {
        return Cow::Borrowed(first);
    };
    let mut out = String::new();
    for t in [first, second].into_iter().chain(texts) {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(t);
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A decoded history is held per message and per part (a million
    /// one-word messages, a proxy session's last body): what nearly every
    /// message and part does not have stays out of line.
    #[test]
    fn messages_and_parts_keep_rare_fields_out_of_line() {
        assert!(size_of::<Message>() <= 96, "{}", size_of::<Message>());
        assert!(size_of::<Part>() <= 40, "{}", size_of::<Part>());
        assert_eq!(size_of::<Extra>(), size_of::<usize>());
    }
}
