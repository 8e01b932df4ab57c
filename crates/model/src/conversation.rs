//! A whole conversation: the request envelope around the messages.

use std::borrow::Borrow;
use std::ops::Range;

use serde_json::Value;

use crate::message::{ContentForm, Extra, Message, Part, Role, ToolResult};

/// Which provider API a conversation's structure follows — the one name for
/// "OpenAI or Anthropic" across abridge (codecs, converter, summarizers, CLI).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    /// OpenAI Chat Completions (`messages` with `tool_calls` / `tool` messages).
    OpenAi,
    /// Anthropic Messages (top-level `system`, `tool_use` / `tool_result` blocks).
    Anthropic,
    /// Google Gemini (`systemInstruction`, `contents` of user and model
    /// turns, `functionCall` / `functionResponse` parts).
    Gemini,
}

impl Family {
    /// Lower-case name used on the command line (`openai`, `anthropic`).
    pub fn as_str(self) -> &'static str {
        match self {
            Family::OpenAi => "openai",
            Family::Anthropic => "anthropic",
            Family::Gemini => "gemini",
        }
    }

    /// The messages that carry tool results in this family's shape: an
    /// OpenAI `tool` message each (text only, as Chat Completions takes
    /// it), or one user turn with them all (Anthropic, Gemini).
    pub fn result_messages(self, results: Vec<ToolResult>) -> Vec<Message> {
        match self {
            Family::OpenAi => results
                .into_iter()
                .map(|mut r| {
                    r.parts.retain(|p| p.as_text().is_some());
                    r.form = ContentForm::Text;
                    r.is_error = None;
                    Message {
                        role: Role::Tool,
                        parts: vec![Part::ToolResult(Box::new(r))],
                        form: ContentForm::Absent,
                        ..Message::default()
                    }
                })
                .collect(),
            Family::Anthropic | Family::Gemini => vec![Message {
                role: Role::User,
                parts: results
                    .into_iter()
                    .map(|r| Part::ToolResult(Box::new(r)))
                    .collect(),
                form: ContentForm::Blocks,
                ..Message::default()
            }],
        }
    }

    /// Every family, for listings and help texts.
    pub const ALL: [Family; 3] = [Family::OpenAi, Family::Anthropic, Family::Gemini];
}

impl std::fmt::Display for Family {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Family {
    type Err = String;

    /// `openai` or `anthropic`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Family::ALL
            .into_iter()
            .find(|f| f.as_str() == s)
            .ok_or_else(|| {
                format!("unknown API family \"{s}\" (expected openai, anthropic or gemini)")
            })
    }
}

/// The input format a conversation was decoded from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// An OpenAI Chat Completions request body (named `openai`).
    Chat,
    /// An Anthropic Messages request body.
    Anthropic,
    /// A Claude Code session log (JSONL).
    ClaudeCode,
    /// A mini-swe-agent trajectory (`*.traj.json`).
    MiniSweAgent,
    /// A tau-bench results file (array of runs with `traj`).
    TauBench,
    /// The Vercel AI SDK's `ModelMessage[]`.
    AiSdk,
    /// An OpenAI Responses API request body (`input` items).
    Responses,
    /// A Gemini API request body (`contents`).
    Gemini,
    /// An OpenHands V1 conversation: its events, in order.
    OpenHands,
}

impl Format {
    /// Short stable name, as the command line and the packages take it
    /// (`openai`, `anthropic`, `claude-code`, `mini-swe-agent`, `tau-bench`,
    /// `ai-sdk`, `responses`, `gemini`, `openhands`).
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Chat => "openai",
            Format::Anthropic => "anthropic",
            Format::ClaudeCode => "claude-code",
            Format::MiniSweAgent => "mini-swe-agent",
            Format::TauBench => "tau-bench",
            Format::AiSdk => "ai-sdk",
            Format::Responses => "responses",
            Format::Gemini => "gemini",
            Format::OpenHands => "openhands",
        }
    }

    /// Every format, for listings, help texts and the command line.
    pub const ALL: [Format; 9] = [
        Format::Chat,
        Format::Anthropic,
        Format::ClaudeCode,
        Format::MiniSweAgent,
        Format::TauBench,
        Format::AiSdk,
        Format::Responses,
        Format::Gemini,
        Format::OpenHands,
    ];

    /// The wire family this format's conversations follow.
    pub fn family(self) -> Family {
        match self {
            Format::Anthropic | Format::ClaudeCode => Family::Anthropic,
            Format::Gemini => Family::Gemini,
            Format::Chat
            | Format::MiniSweAgent
            | Format::TauBench
            | Format::AiSdk
            | Format::Responses
            | Format::OpenHands => Family::OpenAi,
        }
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Format {
    type Err = String;

    /// A format by its [`as_str`](Format::as_str) name.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Format::ALL
            .into_iter()
            .find(|f| f.as_str() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Format::ALL.iter().map(|f| f.as_str()).collect();
                format!(
                    "unknown format \"{s}\" (expected one of {})",
                    names.join(", ")
                )
            })
    }
}

/// A format a conversation can be written in: a Chat Completions,
/// Responses or Messages request body, or the AI SDK's `ModelMessage[]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Wire {
    /// An OpenAI Chat Completions request body (named `openai`).
    Chat,
    /// An Anthropic Messages request body.
    Anthropic,
    /// The Vercel AI SDK's `ModelMessage[]`.
    AiSdk,
    /// An OpenAI Responses API request body.
    Responses,
    /// A Gemini API request body.
    Gemini,
}

impl Wire {
    /// Every wire format, for listings and help texts.
    pub const ALL: [Wire; 5] = [
        Wire::Chat,
        Wire::Anthropic,
        Wire::AiSdk,
        Wire::Responses,
        Wire::Gemini,
    ];

    /// Name on the command line (`openai`, `anthropic`, `ai-sdk`, `responses`).
    pub fn as_str(self) -> &'static str {
        self.format().as_str()
    }

    /// The input format of the same name.
    pub fn format(self) -> Format {
        match self {
            Wire::Chat => Format::Chat,
            Wire::Anthropic => Format::Anthropic,
            Wire::AiSdk => Format::AiSdk,
            Wire::Responses => Format::Responses,
            Wire::Gemini => Format::Gemini,
        }
    }

    /// The wire family its conversations follow.
    pub fn family(self) -> Family {
        self.format().family()
    }

    /// The request body field that holds the history: `messages`, the
    /// Responses API's `input` or Gemini's `contents` (AI SDK messages are
    /// a bare array, kept under `messages` where one is wrapped in an object).
    pub fn history_key(self) -> &'static str {
        match self {
            Wire::Responses => "input",
            Wire::Gemini => "contents",
            Wire::Chat | Wire::Anthropic | Wire::AiSdk => "messages",
        }
    }

    /// How a conversation decoded from `format` is written back by default.
    pub fn of(format: Format) -> Wire {
        match format {
            Format::AiSdk => Wire::AiSdk,
            Format::Responses => Wire::Responses,
            Format::Gemini => Wire::Gemini,
            other => Wire::from(other.family()),
        }
    }
}

impl From<Family> for Wire {
    fn from(f: Family) -> Self {
        match f {
            Family::OpenAi => Wire::Chat,
            Family::Anthropic => Wire::Anthropic,
            Family::Gemini => Wire::Gemini,
        }
    }
}

impl std::fmt::Display for Wire {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Wire {
    type Err = String;

    /// `openai`, `anthropic`, `ai-sdk`, `responses` or `gemini`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Wire::ALL.into_iter().find(|w| w.as_str() == s).ok_or_else(|| {
            format!(
                "unknown format \"{s}\" (expected openai, anthropic, ai-sdk, responses or gemini)"
            )
        })
    }
}

/// A tool the model may call, as declared in the request.
#[derive(Debug, Clone, PartialEq)]
pub enum Tool {
    /// A function tool with a JSON-schema for its input.
    Function(FunctionTool),
    /// Any other tool declaration (server tools, custom tools…), kept verbatim.
    Opaque(Value),
}

impl Tool {
    /// The tool's name (an opaque declaration's `name` field), if it has one.
    pub fn name(&self) -> Option<&str> {
        match self {
            Tool::Function(f) => Some(&f.name),
            Tool::Opaque(v) => v.get("name").and_then(Value::as_str),
        }
    }

    /// Whether this declaration declares a function named `name`: its own
    /// name, or one of a Gemini tool's grouped `functionDeclarations`.
    pub fn declares(&self, name: &str) -> bool {
        if self.name() == Some(name) {
            return true;
        }
        let Tool::Opaque(v) = self else {
            return false;
        };
        v.get("functionDeclarations")
            .and_then(Value::as_array)
            .is_some_and(|group| {
                group
                    .iter()
                    .any(|f| f.get("name").and_then(Value::as_str) == Some(name))
            })
    }
}

/// A function tool declaration.
#[derive(Debug, Clone, PartialEq)]
pub struct FunctionTool {
    /// Tool name.
    pub name: String,
    /// Description shown to the model.
    pub description: Option<String>,
    /// JSON schema of the input (OpenAI `parameters`, Anthropic `input_schema`).
    pub parameters: Option<Value>,
    /// Other fields of the tool object (`type`, `cache_control`…).
    pub extra: Extra,
    /// Other fields of OpenAI's inner `function` object (`strict`…).
    pub function_extra: Extra,
}

/// A point in the history where an agent compacted its own context.
#[derive(Debug, Clone, PartialEq)]
pub struct CompactBoundary {
    /// Index of the first message after the boundary (the agent's summary).
    pub index: usize,
    /// Tokens before the compaction, as the agent reported them.
    pub pre_tokens: Option<u64>,
    /// What triggered it (`auto`, `manual`), as the agent reported it.
    pub trigger: Option<String>,
    /// What the agent saw right after, by message index, in order: its
    /// summary alone (Claude Code), or the messages it kept with the
    /// summary among them (OpenHands keeps the first events and the latest).
    pub view: Vec<usize>,
}

impl CompactBoundary {
    /// The boundary after a message was inserted at `at + 1`.
    pub fn shift_after(&mut self, at: usize) {
        let shift = |i: &mut usize| {
            if *i > at {
                *i += 1;
            }
        };
        shift(&mut self.index);
        self.view.iter_mut().for_each(shift);
    }
}

/// A conversation and the request envelope around it.
///
/// System prompts are messages with [`Role::System`] at the front, whatever
/// the wire family: Anthropic's top-level `system` decodes to such a message
/// and encodes back from it.
#[derive(Debug, Clone, PartialEq)]
pub struct Conversation {
    /// Input format it was decoded from.
    pub format: Format,
    /// Wire family whose rules it follows.
    pub family: Family,
    /// Model name from the envelope (or the log).
    pub model: Option<String>,
    /// Declared tools; `None` when the `tools` key was absent.
    pub tools: Option<Vec<Tool>>,
    /// The messages, system prompt first.
    pub messages: Vec<Message>,
    /// Other envelope fields (`max_tokens`, `temperature`, `stream`…), in order.
    pub extra: Extra,
    /// Where the source agent compacted its context (Claude Code logs).
    pub boundaries: Vec<CompactBoundary>,
    /// Short description of where it came from inside its file (e.g. `run 3: task 1, trial 0`).
    pub label: Option<String>,
    /// Top-level keys of the request body it was decoded from, in order:
    /// encoding writes them in this order, and keys added since at the end.
    pub key_order: Vec<String>,
}

/// One iteration: an assistant message, the results of its tool calls and
/// any feedback that follows, up to the next assistant message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Iteration {
    /// Index of the assistant message that opens it.
    pub start: usize,
    /// One past the last message that belongs to it.
    pub end: usize,
}

impl Iteration {
    /// The message indices it covers.
    pub fn range(&self) -> Range<usize> {
        self.start..self.end
    }
}

impl Conversation {
    /// An empty conversation of the given wire family.
    pub fn new(family: Family) -> Self {
        let format = match family {
            Family::OpenAi => Format::Chat,
            Family::Anthropic => Format::Anthropic,
            Family::Gemini => Format::Gemini,
        };
        Conversation {
            format,
            family,
            model: None,
            tools: None,
            messages: Vec::new(),
            extra: Extra::new(),
            boundaries: Vec::new(),
            label: None,
            key_order: Vec::new(),
        }
    }

    /// How many messages come before the wire body's `messages` (or
    /// `input`) array: the leading system messages of an Anthropic
    /// conversation, which its body carries as the top-level `system`, or
    /// the Responses API's `instructions`.
    pub fn wire_offset(&self) -> usize {
        wire_offset(self.family, &self.messages)
    }

    /// Index of message `i` in the wire body's `messages` array — the one
    /// index scheme of every report, event, violation and pin — or `None`
    /// for a system prompt carried outside it.
    pub fn wire_index(&self, i: usize) -> Option<usize> {
        i.checked_sub(self.wire_offset())
    }

    /// A copy of the envelope (format, model, tools, other fields, label)
    /// with no messages and no boundaries.
    pub fn clone_envelope(&self) -> Conversation {
        Conversation {
            format: self.format,
            family: self.family,
            model: self.model.clone(),
            tools: self.tools.clone(),
            messages: Vec::new(),
            extra: self.extra.clone(),
            boundaries: Vec::new(),
            label: self.label.clone(),
            key_order: self.key_order.clone(),
        }
    }

    /// Splits the messages into iterations; see [`iterations`].
    pub fn iterations(&self) -> Vec<Iteration> {
        iterations(&self.messages)
    }

    /// Number of leading messages before the first assistant message: the
    /// system prompt and the task.
    pub fn head_len(&self) -> usize {
        head_len(&self.messages)
    }
}

/// Number of messages before the first assistant message (of messages or
/// anything that holds one, as a rewrite's copied-on-write slots do).
pub fn head_len<M: Borrow<Message>>(messages: &[M]) -> usize {
    messages
        .iter()
        .position(|m| m.borrow().role == Role::Assistant)
        .unwrap_or(messages.len())
}

/// Splits messages into iterations in one pass.
///
/// Every assistant message opens an iteration that runs to the next assistant
/// message (one that [continues the turn](crate::Meta::continues_turn) stays
/// in the iteration); messages before the first assistant message (system
/// prompt and task) belong to no iteration.
pub fn iterations<M: Borrow<Message>>(messages: &[M]) -> Vec<Iteration> {
    let mut out: Vec<Iteration> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let m = m.borrow();
        let opens = !m.meta.continues_turn || out.is_empty();
        if m.role == Role::Assistant && opens {
            if let Some(last) = out.last_mut() {
                last.end = i;
            }
            out.push(Iteration {
                start: i,
                end: messages.len(),
            });
        }
    }
    out
}

/// [`Conversation::wire_offset`] for messages of `family`.
pub fn wire_offset(family: Family, messages: &[Message]) -> usize {
    match family {
        // Only the Responses API carries a system prompt outside its items.
        Family::OpenAi => messages.iter().take_while(|m| m.meta.instructions).count(),
        // Anthropic's top-level `system`, Gemini's `systemInstruction`.
        Family::Anthropic | Family::Gemini => {
            messages.iter().take_while(|m| is_top_system(m)).count()
        }
    }
}

/// A system message an Anthropic body carries in its top-level `system`
/// (when it leads the conversation), not inside `messages`.
fn is_top_system(m: &Message) -> bool {
    m.role == Role::System && !m.meta.inline_system
}
