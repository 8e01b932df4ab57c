//! The names of the pipeline's steps: what configs, reports and events
//! say, below everything that reads them.

use serde::{Deserialize, Serialize};

/// One step of the pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PolicyKind {
    /// Lose what costs no information: whitespace between the tokens of
    /// JSON results and arguments, and a result a later one repeats (a
    /// reference to it instead).
    Lossless,
    /// Replace old reads of a file the agent read again later with a
    /// placeholder (the newest copy stays).
    SupersedeReads,
    /// Clip bodies of old wrapped blocks and old images.
    ClipExternal,
    /// Collapse old feedback messages into one line per run.
    CollapseFeedback,
    /// Replace old tool results with a placeholder.
    ClipToolResults,
    /// Replace old tool-call arguments with a placeholder.
    ClipToolArgs,
    /// Replace the old region with one briefing (needs a summarizer and a target).
    Summarize,
    /// Drop old iterations, leaving a count.
    DropIterations,
}

impl PolicyKind {
    /// Name used in configs, reports and events (as serialized).
    pub fn as_str(self) -> &'static str {
        match self {
            PolicyKind::Lossless => "lossless",
            PolicyKind::SupersedeReads => "supersede_reads",
            PolicyKind::ClipExternal => "clip_external",
            PolicyKind::CollapseFeedback => "collapse_feedback",
            PolicyKind::ClipToolResults => "clip_tool_results",
            PolicyKind::ClipToolArgs => "clip_tool_args",
            PolicyKind::Summarize => "summarize",
            PolicyKind::DropIterations => "drop_iterations",
        }
    }
}
