//! Configuration of the compactor, loadable from TOML.
//!
//! Every field has a default; an empty file is a valid config. See
//! `abridge.example.toml` at the repository root for all keys.

use std::collections::BTreeMap;

use abridge_tokens::{ModelInfo, TokenizerKind};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Everything the compactor can be told.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Model name, for its window and tokenizer from the registry.
    pub model: Option<String>,
    /// Tokenizer to count with; the model's own when absent.
    pub tokenizer: Option<TokenizerKind>,
    /// When to compact.
    pub trigger: TriggerConfig,
    /// How far to compact.
    pub budget: BudgetConfig,
    /// Which policies run, in order, and their settings.
    pub policies: PolicyConfig,
    /// Messages never touched.
    pub pin: PinConfig,
    /// Briefings that replace old history when clipping is not enough.
    pub summary: SummaryConfig,
    /// Extra or overriding model registry entries, by name prefix.
    pub models: BTreeMap<String, ModelInfo>,
}

/// When a turn triggers compaction; any condition that is set fires it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TriggerConfig {
    /// Every this many iterations since the last compaction.
    pub every_iterations: Option<usize>,
    /// History tokens above this.
    pub max_tokens: Option<u64>,
    /// History tokens above this fraction of the model's window…
    pub window_fraction: Option<f64>,
    /// …capped at this many tokens (a 1M-token model triggers like a 200k one).
    pub window_cap: u64,
    /// Provider-reported prompt tokens of the last response above this.
    pub usage_tokens: Option<u64>,
}

impl Default for TriggerConfig {
    fn default() -> Self {
        TriggerConfig {
            every_iterations: None,
            max_tokens: None,
            window_fraction: Some(0.65),
            window_cap: 200_000,
            usage_tokens: None,
        }
    }
}

/// How far compaction goes and what it keeps verbatim.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BudgetConfig {
    /// Target after compaction, in tokens. When absent: `target_ratio` × the
    /// token trigger threshold.
    pub target_tokens: Option<u64>,
    /// Target as a fraction of the trigger threshold (hysteresis).
    pub target_ratio: f64,
    /// A compaction that would clear fewer tokens than this is skipped, so
    /// that a provider's prompt cache is broken only for a real gain.
    pub clear_at_least: u64,
    /// The kept tail is at most this fraction of the window…
    pub kept_fraction: f64,
    /// …and at most this many tokens…
    pub kept_cap: u64,
    /// …but at least this many whole iterations (the floor).
    pub min_iterations: usize,
}

impl Default for BudgetConfig {
    fn default() -> Self {
        BudgetConfig {
            target_tokens: None,
            target_ratio: 0.6,
            clear_at_least: 2_000,
            kept_fraction: 0.2,
            kept_cap: 40_000,
            min_iterations: 3,
        }
    }
}

/// One step of the pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PolicyKind {
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
    /// Name used in configs, reports and events.
    pub fn as_str(self) -> &'static str {
        match self {
            PolicyKind::ClipExternal => "clip_external",
            PolicyKind::CollapseFeedback => "collapse_feedback",
            PolicyKind::ClipToolResults => "clip_tool_results",
            PolicyKind::ClipToolArgs => "clip_tool_args",
            PolicyKind::Summarize => "summarize",
            PolicyKind::DropIterations => "drop_iterations",
        }
    }
}

/// The pipeline and each policy's settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PolicyConfig {
    /// Policies in the order they are tried; compaction stops as soon as the
    /// history is at or under the target.
    pub pipeline: Vec<PolicyKind>,
    /// Tag names whose bodies `clip_external` clips (`<TAG …>body</TAG>`).
    pub external_tags: Vec<String>,
    /// Tools whose results are never clipped.
    pub keep_results_of: Vec<String>,
    /// Results shorter than this many characters are left alone.
    pub min_result_chars: usize,
    /// Arguments shorter than this many characters are left alone.
    pub min_args_chars: usize,
    /// A result whose first line starts with one of these (case-insensitive)
    /// is an error; its first line is kept in the placeholder.
    pub error_prefixes: Vec<String>,
    /// Feedback kinds: a user message (or text block) containing one of the
    /// markers is feedback of that kind.
    pub feedback: Vec<FeedbackKind>,
}

/// A kind of feedback message and how to recognise it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FeedbackKind {
    /// Singular name used in the placeholder (`validation rejection`).
    pub name: String,
    /// Substrings that mark a message as this kind.
    pub markers: Vec<String>,
}

impl Default for PolicyConfig {
    fn default() -> Self {
        let kind = |name: &str, markers: &[&str]| FeedbackKind {
            name: name.to_owned(),
            markers: markers.iter().map(|m| (*m).to_owned()).collect(),
        };
        PolicyConfig {
            pipeline: vec![
                PolicyKind::ClipExternal,
                PolicyKind::CollapseFeedback,
                PolicyKind::ClipToolResults,
                PolicyKind::ClipToolArgs,
                PolicyKind::Summarize,
                PolicyKind::DropIterations,
            ],
            external_tags: vec!["EXTERNAL-CONTENT".to_owned()],
            keep_results_of: Vec::new(),
            min_result_chars: 200,
            min_args_chars: 120,
            error_prefixes: [
                "error",
                "traceback",
                "exception",
                "fatal",
                "panic",
                "failed",
            ]
            .map(str::to_owned)
            .to_vec(),
            feedback: vec![
                kind(
                    "validation rejection",
                    &["[validation]", "Task validation failed"],
                ),
                kind("step error", &["[feedback] Step error", "Step error:"]),
                kind("repetition warning", &["[repetition]", "You are repeating"]),
            ],
        }
    }
}

/// Briefing settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SummaryConfig {
    /// Use the offline fact sheet as the last resort (`true`), or never
    /// summarize and drop iterations instead (`false`).
    pub offline: bool,
    /// Most tokens a briefing may take (it also has to fit the target).
    pub max_tokens: u64,
    /// Tag wrapped around the briefing.
    pub wrapper: String,
    /// Tools whose latest call holds the agent's task list.
    pub todo_tools: Vec<String>,
}

impl Default for SummaryConfig {
    fn default() -> Self {
        SummaryConfig {
            offline: true,
            max_tokens: 8_000,
            wrapper: abridge_summarize::DEFAULT_WRAPPER.to_owned(),
            todo_tools: abridge_summarize::FactConfig::default().todo_tools,
        }
    }
}

/// Messages that are never clipped, collapsed or dropped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct PinConfig {
    /// Message indices (as in the conversation, system prompt first).
    pub indices: Vec<usize>,
    /// A message whose text contains one of these is pinned.
    pub markers: Vec<String>,
}

impl Config {
    /// Parses a TOML config.
    pub fn from_toml(text: &str) -> Result<Self> {
        let config: Config = toml::from_str(text).map_err(|e| Error::Config(e.to_string()))?;
        config.check()?;
        Ok(config)
    }

    /// Rejects settings that cannot work.
    pub fn check(&self) -> Result<()> {
        let bad = |m: String| Err(Error::Config(m));
        let b = &self.budget;
        if !(b.target_ratio > 0.0 && b.target_ratio < 1.0) {
            return bad(format!(
                "budget.target_ratio must be in (0, 1), got {}",
                b.target_ratio
            ));
        }
        if !(b.kept_fraction > 0.0 && b.kept_fraction < 1.0) {
            return bad(format!(
                "budget.kept_fraction must be in (0, 1), got {}",
                b.kept_fraction
            ));
        }
        if b.min_iterations == 0 {
            return bad(
                "budget.min_iterations must be at least 1 (the latest turn is never clipped)"
                    .into(),
            );
        }
        if let Some(f) = self.trigger.window_fraction
            && !(f > 0.0 && f <= 1.0)
        {
            return bad(format!(
                "trigger.window_fraction must be in (0, 1], got {f}"
            ));
        }
        if self.trigger.every_iterations == Some(0) {
            return bad("trigger.every_iterations must be at least 1".into());
        }
        Ok(())
    }
}
