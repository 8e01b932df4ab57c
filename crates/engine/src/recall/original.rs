//! What a handle names: the content a placeholder or a briefing replaced,
//! with a label that says what it was the way the agent would look for it.

use std::borrow::Borrow;
use std::collections::HashMap;

use abridge_model::{Arguments, ImageSource, Message, Part, ReasoningKind, ToolCall, ToolResult};
use abridge_summarize::tools::{ToolKind, classify, first_string};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::handle::{Handle, HandleKey};

/// What kind of content an original is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OriginalKind {
    /// A tool result that became a placeholder or was summarized.
    ToolResult,
    /// Tool-call arguments that were clipped.
    Arguments,
    /// The body of a wrapped block (a page snapshot).
    External,
    /// An image.
    Image,
    /// Every message a briefing replaced, as a transcript.
    Region,
}

impl OriginalKind {
    fn tag(self) -> &'static str {
        match self {
            OriginalKind::ToolResult => "tool_result",
            OriginalKind::Arguments => "arguments",
            OriginalKind::External => "external",
            OriginalKind::Image => "image",
            OriginalKind::Region => "region",
        }
    }
}

/// A piece of an original: text, or an image (as a URL; inline images as
/// `data:` URLs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Piece {
    /// Text.
    Text {
        /// The text.
        text: String,
    },
    /// An image.
    Image {
        /// Its URL or `data:` URL.
        url: String,
    },
}

impl Piece {
    /// The piece as a content part of a message (an image by its URL, or
    /// inline when its URL is a `data:` URL).
    pub fn to_part(&self) -> Part {
        match self {
            Piece::Text { text } => Part::text(text.clone()),
            Piece::Image { url } => Part::Image(Box::new(abridge_model::ImagePart {
                source: ImageSource::from_url(url),
                source_extra: Default::default(),
                extra: Default::default(),
            })),
        }
    }

    fn bytes(&self) -> &[u8] {
        match self {
            Piece::Text { text } => text.as_bytes(),
            Piece::Image { url } => url.as_bytes(),
        }
    }
}

/// An original as a store gives it back, with the session (`source`) whose
/// compaction kept it, when the store knows.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredOriginal {
    /// The original.
    pub original: Original,
    /// The session that kept it.
    pub source: Option<String>,
}

/// Who asks for originals on a shared proxy: the tenant's key, and the
/// session asking (an original kept before handles were keyed resolves for
/// the session that kept it only).
#[derive(Debug, Clone)]
pub struct RecallScope {
    /// The tenant's handle key.
    pub key: HandleKey,
    /// The session's id, as its snapshots name it.
    pub session: String,
}

/// Whether a [`RecallScope`] may read a stored original, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Its handle is this scope's key's.
    Keyed,
    /// An unkeyed handle (an earlier release's) that this session's
    /// compaction kept.
    Legacy,
    /// Another scope's, or nobody's: answered as if it did not exist.
    Refused,
}

impl RecallScope {
    /// Whether this scope may read `stored`.
    pub fn admits(&self, stored: &StoredOriginal) -> Admission {
        if stored.original.belongs(Some(&self.key)) {
            Admission::Keyed
        } else if stored.source.as_deref() == Some(self.session.as_str())
            && stored.original.is_unkeyed()
        {
            Admission::Legacy
        } else {
            Admission::Refused
        }
    }
}

/// Replaced content, kept so the model can recall it by its handle.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Original {
    /// Its handle (derived from `kind` and `pieces`).
    pub handle: Handle,
    /// What it is.
    pub kind: OriginalKind,
    /// What it was, the way the agent would look for it: the tool and its
    /// naming argument (`Read src/app.rs`, `Bash: cargo test`).
    pub label: String,
    /// The content.
    pub pieces: Vec<Piece>,
}

impl Original {
    /// An original of `kind`; its handle comes from the content.
    pub(crate) fn new(kind: OriginalKind, label: String, pieces: Vec<Piece>) -> Original {
        let content: Vec<&[u8]> = pieces.iter().map(Piece::bytes).collect();
        let handle = Handle::derive(kind.tag(), &content);
        Original {
            handle,
            kind,
            label,
            pieces,
        }
    }

    /// The same original named under `key` (unchanged without one).
    pub(crate) fn scoped(mut self, key: Option<&HandleKey>) -> Original {
        if let Some(key) = key {
            self.handle = Handle::keyed(key, self.kind.tag(), &self.content());
        }
        self
    }

    /// True when `key` made this original's handle (without a key: when
    /// the handle is its content's). A handle shown to one tenant of a
    /// shared proxy resolves for no other, wherever it was kept.
    pub fn belongs(&self, key: Option<&HandleKey>) -> bool {
        let content = self.content();
        let made = match key {
            Some(key) => Handle::keyed(key, self.kind.tag(), &content),
            None => Handle::derive(self.kind.tag(), &content),
        };
        made == self.handle
    }

    /// True when its handle is the unkeyed one of its content (written by
    /// a release before handles were keyed, or by a library user).
    pub fn is_unkeyed(&self) -> bool {
        self.belongs(None)
    }

    fn content(&self) -> Vec<&[u8]> {
        self.pieces.iter().map(Piece::bytes).collect()
    }

    /// A tool result, labelled by its call when the call is known.
    pub(crate) fn tool_result(r: &ToolResult, call: Option<&ToolCall>) -> Original {
        let label = call.map_or_else(|| format!("result of {}", r.call_id), label_of);
        Original::new(OriginalKind::ToolResult, label, pieces_of(&r.parts))
    }

    /// A call's full arguments.
    pub(crate) fn arguments(call: &ToolCall) -> Original {
        let text = call.arguments.to_json_text().into_owned();
        let label = format!("{} (arguments)", label_of(call));
        Original::new(OriginalKind::Arguments, label, vec![Piece::Text { text }])
    }

    /// These arguments with the text the message said before its calls
    /// (stripped with them).
    pub(crate) fn after_text(mut self, text: &str) -> Original {
        let label = format!("{} and the text before it", self.label);
        let mut pieces = std::mem::take(&mut self.pieces);
        pieces.insert(
            0,
            Piece::Text {
                text: text.to_owned(),
            },
        );
        Original::new(self.kind, label, pieces)
    }

    /// The body of a wrapped block, labelled by its opening tag.
    pub(crate) fn external(open_tag: &str, body: &str) -> Original {
        let label = abridge_model::text::clip(open_tag.trim(), 160, 0);
        let pieces = vec![Piece::Text { text: body.into() }];
        Original::new(OriginalKind::External, label, pieces)
    }

    /// An image.
    pub(crate) fn image(source: &ImageSource) -> Original {
        let url = source.to_url();
        let label = match source {
            ImageSource::Base64 { media_type, .. } => format!("image ({media_type})"),
            ImageSource::Url(u) if u.starts_with("data:") => "image (inline)".to_owned(),
            ImageSource::Url(u) => format!("image {}", abridge_model::text::clip(u, 120, 0)),
        };
        Original::new(OriginalKind::Image, label, vec![Piece::Image { url }])
    }

    /// The messages a briefing replaced, as one transcript, with the index
    /// of the briefing before it (so what that one listed stays reachable
    /// whatever the new index has room for). A result kept as an original
    /// of its own (`results`, by its place: message and part) is named by
    /// its handle, not copied.
    pub(crate) fn region<M: Borrow<Message>>(
        messages: &[M],
        earlier: Option<&str>,
        results: &HashMap<(usize, usize), &Handle>,
    ) -> Original {
        let mut text = transcript(messages, results);
        if let Some(index) = earlier {
            text.push_str("\n\nThe earlier briefing's index:\n");
            text.push_str(index.trim_end());
        }
        let label = match messages.len() {
            1 => "the 1 replaced message".to_owned(),
            n => format!("the {n} replaced messages"),
        };
        Original::new(OriginalKind::Region, label, vec![Piece::Text { text }])
    }

    /// Size of its content in bytes.
    pub fn bytes(&self) -> usize {
        self.pieces.iter().map(|p| p.bytes().len()).sum()
    }
}

/// `Read src/app.rs`, `Bash: cargo test`, `Grep "TODO"`, or the tool and
/// its first short string argument (a URL, an id).
pub(crate) fn label_of(call: &ToolCall) -> String {
    let args = call.arguments.fields();
    let short = |s: &str| abridge_model::text::clip(s.lines().next().unwrap_or(""), 100, 0);
    match classify(&call.name, &args) {
        ToolKind::Read(p) | ToolKind::Write(p) | ToolKind::Edit(p) => {
            format!("{} {}", call.name, short(p))
        }
        ToolKind::Shell(c) => format!("{}: {}", call.name, short(c)),
        ToolKind::Search(p) => format!("{} {:?}", call.name, short(p)),
        ToolKind::Ask | ToolKind::Other => match first_short_string(&args) {
            Some(s) => format!("{} {}", call.name, short(s)),
            None => call.name.clone(),
        },
    }
}

fn first_short_string(v: &Value) -> Option<&str> {
    match v {
        Value::Object(m) => m
            .values()
            .filter_map(Value::as_str)
            .find(|s| s.len() <= 200 && !s.contains('\n'))
            .or_else(|| first_string(v)),
        _ => first_string(v),
    }
}

fn pieces_of(parts: &[Part]) -> Vec<Piece> {
    parts
        .iter()
        .filter_map(|p| match p {
            Part::Image(i) => Some(Piece::Image {
                url: i.source.to_url(),
            }),
            other => other.as_text().map(|t| Piece::Text { text: t.to_owned() }),
        })
        .collect()
}

/// `role: text`, reasoning in the clear, tool calls with their arguments,
/// results in full or by handle, one block per part.
fn transcript<M: Borrow<Message>>(
    messages: &[M],
    results: &HashMap<(usize, usize), &Handle>,
) -> String {
    let mut out = String::new();
    for (i, m) in messages.iter().map(M::borrow).enumerate() {
        for (j, p) in m.parts.iter().enumerate() {
            let line = match p {
                Part::Text(t) => format!("{}: {}", m.role.as_str(), t.text),
                Part::ToolCall(c) => format!(
                    "{} called {} ({}): {}",
                    m.role.as_str(),
                    c.name,
                    c.id,
                    match &c.arguments {
                        Arguments::Custom(s) => s.clone(),
                        a => a.to_json_text().into_owned(),
                    }
                ),
                Part::ToolResult(r) => match results.get(&(i, j)) {
                    Some(h) => format!("result of {}: recall {h}", r.call_id),
                    None => format!("result of {}:\n{}", r.call_id, r.text()),
                },
                Part::Image(_) => format!("{}: [image]", m.role.as_str()),
                Part::Reasoning(r) if r.kind != ReasoningKind::Redacted => {
                    format!("{} (reasoning): {}", m.role.as_str(), r.text)
                }
                _ => continue,
            };
            out.push_str(&line);
            out.push_str("\n\n");
        }
    }
    out.truncate(out.trim_end().len());
    out
}
