//! Errors of decoding, encoding and converting conversations.

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong while reading or writing a conversation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The bytes are not valid JSON (or a JSONL line is not).
    #[error("invalid JSON at line {line}, column {column}: {message}")]
    Json {
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What the parser expected.
        message: String,
    },
    /// The JSON is valid but not of the expected shape.
    #[error("{at}: expected {expected}")]
    Shape {
        /// Where: a JSON path such as `messages[3].content[1]`, with the line for logs.
        at: String,
        /// What was expected there.
        expected: String,
    },
    /// The input matched no known format.
    #[error(
        "unrecognised format: {0} (expected an OpenAI Chat Completions or Responses or an Anthropic Messages request body, a Claude Code session JSONL, a mini-swe-agent trajectory or a tau-bench results file)"
    )]
    UnknownFormat(String),
    /// Content that the target wire family cannot represent.
    #[error("messages[{index}]: cannot be represented in {target}: {reason}")]
    Unrepresentable {
        /// Index of the message.
        index: usize,
        /// Target family name.
        target: &'static str,
        /// What cannot be carried over.
        reason: String,
    },
}

impl Error {
    pub(crate) fn shape(at: impl Into<String>, expected: impl Into<String>) -> Self {
        Error::Shape {
            at: at.into(),
            expected: expected.into(),
        }
    }

    pub(crate) fn json(err: &serde_json::Error, line_offset: usize) -> Self {
        Error::Json {
            line: err.line() + line_offset,
            column: err.column(),
            message: strip_location(&err.to_string()),
        }
    }
}

/// serde_json appends " at line L column C"; the error shows its own location.
fn strip_location(msg: &str) -> String {
    match msg.rfind(" at line ") {
        Some(pos) => msg[..pos].to_owned(),
        None => msg.to_owned(),
    }
}
