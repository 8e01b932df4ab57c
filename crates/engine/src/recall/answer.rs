//! The recall tool's declaration, the input a call carries and the
//! answer it gets (built by `respond` and `search`).

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::handle::Handle;
use super::original::Piece;

/// The tool's declaration, in no API's shape (each front end wraps it).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RecallTool {
    /// Its name (`[recall] tool`, `abridge_recall` by default).
    pub name: String,
    /// What the model reads about it.
    pub description: String,
    /// JSON Schema of its input.
    pub parameters: Value,
}

impl RecallTool {
    /// The declaration of the tool named `name`.
    pub fn new(name: &str) -> RecallTool {
        RecallTool {
            name: name.to_owned(),
            description: "Returns the original content that was clipped or summarized out of \
                this conversation to save context: a tool result, tool-call arguments, a page \
                snapshot, an image, or every message a briefing replaced. Pass the handle \
                (abr_…) written in the placeholder or in the briefing's list of recallable \
                originals; large originals come in pages, and the answer says how many. Or pass \
                a query (a name, an id, a phrase) to search every original this conversation \
                kept: the answer lists the lines that hold it under the handles of their \
                originals."
                .to_owned(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "handle": {
                        "type": "string",
                        "description": "The handle: abr_ and the letters and digits after it, as written."
                    },
                    "query": {
                        "type": "string",
                        "description": "Instead of a handle: a name, an id or a phrase to search every original for."
                    },
                    "page": {
                        "type": "integer",
                        "minimum": 1,
                        "description": "Page of a large original or of a search's matches (1 when absent)."
                    }
                }
            }),
        }
    }
}

impl RecallTool {
    /// The declaration as a function tool of a history.
    pub fn to_tool(&self) -> abridge_model::Tool {
        abridge_model::Tool::Function(abridge_model::FunctionTool {
            name: self.name.clone(),
            description: Some(self.description.clone()),
            parameters: Some(self.parameters.clone()),
            extra: Default::default(),
            function_extra: Default::default(),
        })
    }
}

/// A call of the tool, as the model writes its input: a handle, or a
/// query to search for.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct RecallInput {
    /// The handle asked for.
    #[serde(default)]
    pub handle: Option<String>,
    /// What to search every original for, when no handle is given.
    #[serde(default)]
    pub query: Option<String>,
    /// The page (1-based; 1 when absent).
    #[serde(default)]
    pub page: Option<usize>,
}

impl RecallInput {
    /// Reads a call's arguments, or says what is wrong with them.
    pub fn parse(arguments: &Value) -> Result<RecallInput, String> {
        let input: RecallInput = serde_json::from_value(arguments.clone()).map_err(|e| {
            format!(
                "takes {{\"handle\": \"abr_…\", \"page\": 1}} or {{\"query\": \"a name or a phrase\"}}; \
                 the arguments given do not fit: {e}"
            )
        })?;
        match (&input.handle, &input.query) {
            (None, None) => Err(
                "takes a \"handle\" (abr_…, as written in a placeholder or the briefing) or a \
                 \"query\" (a name or a phrase to search every original for); neither was given"
                    .to_owned(),
            ),
            _ => Ok(input),
        }
    }
}

/// The answer to one call.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Answer {
    /// The handle asked for, when it was one.
    pub handle: Option<Handle>,
    /// What goes back to the model: a header line, then the page's content.
    pub pieces: Vec<Piece>,
    /// True when nothing was recalled (unknown handle, malformed call).
    pub is_error: bool,
    /// The page given (1-based) and how many there are (0 when none).
    pub page: usize,
    /// Pages of the original.
    pub pages: usize,
    /// Bytes of original content in this answer.
    pub bytes: usize,
}

impl Answer {
    /// The answer's text, images left out.
    pub fn text(&self) -> String {
        let texts: Vec<&str> = self
            .pieces
            .iter()
            .filter_map(|p| match p {
                Piece::Text { text } => Some(text.as_str()),
                Piece::Image { .. } => None,
            })
            .collect();
        texts.join("\n")
    }

    /// An answer that is a note, not an original (what a front end says
    /// for a tool it answers beside the recall tool).
    pub fn note(text: String, is_error: bool) -> Answer {
        Answer {
            is_error,
            ..Answer::error(None, text)
        }
    }

    pub(crate) fn error(handle: Option<Handle>, text: String) -> Answer {
        Answer {
            handle,
            pieces: vec![Piece::Text { text }],
            is_error: true,
            page: 0,
            pages: 0,
            bytes: 0,
        }
    }
}
