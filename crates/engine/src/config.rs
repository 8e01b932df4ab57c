//! Configuration of the compactor, loadable from TOML.
//!
//! Every field has a default; an empty file is a valid config. See
//! `abridge.example.toml` at the repository root for all keys.

use crate::trigger::TriggerConfig;
use std::collections::BTreeMap;

use abridge_model::Family;
use abridge_summarize::FactConfig;
use abridge_summarize::outcome::DEFAULT_ERROR_PREFIXES;
use abridge_tokens::{ModelInfo, TokenizerKind};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
pub use crate::policy::kind::PolicyKind;

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
    /// LLM summarizers tried in order before the offline fact sheet
    /// (`[[summarizers]]`). The engine only declares them; `abridge-llm`
    /// builds them, so every front end reads the same file.
    pub summarizers: Vec<SummarizerSpec>,
    /// How long and how much the snapshot store keeps (`[store]`).
    pub store: StoreConfig,
    /// Handles on what is replaced, the briefing's index and the recall
    /// tool (`[recall]`).
    pub recall: RecallConfig,
    /// What the agent is shown and offered: status notes and the compact
    /// tool (`[agent]`).
    pub agent: AgentConfig,
    /// Extra or overriding model registry entries, by name prefix.
    pub models: BTreeMap<String, ModelInfo>,
}

/// Retention of the snapshot store: the oldest snapshots go first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StoreConfig {
    /// Most megabytes the store occupies (its file's pages in use; for
    /// PostgreSQL, what its snapshots keep); the oldest snapshots go first
    /// (0: no limit).
    pub max_megabytes: u64,
    /// Snapshots older than this many days are removed (0: kept forever).
    pub max_age_days: u64,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            max_megabytes: 256,
            max_age_days: 30,
        }
    }
}

/// One LLM summarizer of the cascade.
///
/// ```toml
/// [[summarizers]]
/// kind = "openai"                 # openai | anthropic
/// model = "gpt-4o-mini"
/// base_url = "http://127.0.0.1:8000/v1"
/// api_key_env = "OPENAI_API_KEY"  # name of the variable; keys never sit in the file
/// timeout_secs = 30
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SummarizerSpec {
    /// Which API it speaks.
    pub kind: Family,
    /// Model name sent to the API.
    pub model: String,
    /// Base URL (OpenAI-compatible: ending in `/v1`; Anthropic: the host
    /// root); the provider's public API when absent.
    #[serde(default)]
    pub base_url: Option<String>,
    /// Environment variable holding the API key (`OPENAI_API_KEY` or
    /// `ANTHROPIC_API_KEY` when absent). None set is fine for local servers.
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// Time limit of one attempt, in seconds.
    #[serde(default = "SummarizerSpec::default_timeout")]
    pub timeout_secs: f64,
    /// Instructions appended to the prompt.
    #[serde(default)]
    pub instructions: Option<String>,
    /// A system prompt replacing the built-in one (`abridge_llm::DEFAULT_PROMPT`).
    #[serde(default)]
    pub prompt: Option<String>,
}

impl SummarizerSpec {
    /// A spec with the default URL, key variable and timeout.
    pub fn new(kind: Family, model: impl Into<String>) -> Self {
        SummarizerSpec {
            kind,
            model: model.into(),
            base_url: None,
            api_key_env: None,
            timeout_secs: Self::default_timeout(),
            instructions: None,
            prompt: None,
        }
    }

    fn default_timeout() -> f64 {
        30.0
    }

    /// `kind:model`, as reports name it.
    pub fn name(&self) -> String {
        format!("{}:{}", self.kind, self.model)
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
    /// A compaction that would clear fewer tokens than this (in the
    /// provider's units, like the trigger and the target) is skipped, so
    /// that a provider's prompt cache is broken only for a real gain. At
    /// most half the trigger: a smaller trigger still compacts.
    pub clear_at_least: u64,
    /// The kept tail is at most this fraction of the window (0: the floor
    /// alone)…
    pub kept_fraction: f64,
    /// …and at most this many tokens…
    pub kept_cap: u64,
    /// …but at least this many whole iterations (the floor)…
    pub min_iterations: usize,
    /// …and the iterations that hold the last this many messages
    /// (stagewise's `max(5, minUncompressedMessages)`; 0: none).
    pub min_messages: usize,
    /// When a trigger fires, everything between the task and the last
    /// `min_iterations` iterations becomes the briefing, however far under
    /// the target that lands (Pilo #441: "the summary replaces the messages
    /// between `messages[2]` and the last K=6 iterations"); the target then
    /// only decides whether the offline ladder has to go further.
    pub summarize_all: bool,
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
            min_messages: 0,
            summarize_all: false,
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
    /// `clip_tool_args` also strips the text of old assistant messages that
    /// call tools (the model's intermediate reasoning; Pilo #437), kept
    /// with the first call's arguments for recall.
    pub strip_reasoning: bool,
    /// `clip_tool_args` blanks every argument, short ones too (Pilo #437:
    /// the tool name stays, its arguments become a placeholder).
    pub blank_args: bool,
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
                PolicyKind::Lossless,
                PolicyKind::SupersedeReads,
                PolicyKind::ClipExternal,
                PolicyKind::CollapseFeedback,
                PolicyKind::ClipToolArgs,
                PolicyKind::ClipToolResults,
                PolicyKind::Summarize,
                PolicyKind::DropIterations,
            ],
            external_tags: vec!["EXTERNAL-CONTENT".to_owned()],
            keep_results_of: Vec::new(),
            min_result_chars: 200,
            min_args_chars: 120,
            strip_reasoning: false,
            blank_args: false,
            error_prefixes: DEFAULT_ERROR_PREFIXES.map(str::to_owned).to_vec(),
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    /// Share of what a briefing may take that the working set may use: the
    /// newest copy of each file the replaced region read or wrote, most
    /// recently touched first, kept verbatim in a message after the
    /// briefing (0: none).
    pub working_set_share: f64,
    /// When every summarizer tried failed, skip the compaction and send the
    /// history as it was (Pilo #441: "log a warning, skip compaction this
    /// iteration, continue with full history"), unless it would not fit the
    /// model's window; then the compaction degrades as usual.
    pub skip_on_failure: bool,
    /// When every `[[summarizers]]` entry failed, the agent's own model
    /// (the config's `model`, or the one the request names) is tried last,
    /// unless the cascade already holds it (stagewise: "final fallback:
    /// active chat model, only if not already tried"). The proxy sends it
    /// to its upstream for the request's API; the key is that provider's
    /// usual variable.
    pub agent_model_last: bool,
    /// Room the target still leaves after a briefing, its tail and the
    /// refill goes to the lines of the replaced results that name the
    /// most of what the history does not hold, quoted in the briefing
    /// under each result's handle (`false`: the room stays unused).
    pub result_lines: bool,
}

impl Default for SummaryConfig {
    fn default() -> Self {
        SummaryConfig {
            offline: true,
            max_tokens: 8_000,
            wrapper: abridge_summarize::wrapper::DEFAULT_WRAPPER.to_owned(),
            todo_tools: FactConfig::default().todo_tools,
            working_set_share: 0.25,
            skip_on_failure: false,
            agent_model_last: false,
            result_lines: true,
        }
    }
}

/// `name must be in (0, 1)` unless `value` is.
fn within_unit(name: &str, value: f64) -> std::result::Result<(), String> {
    if value > 0.0 && value < 1.0 {
        Ok(())
    } else {
        Err(format!("{name} must be in (0, 1), got {value}"))
    }
}

/// Recall of replaced content (`[recall]`): every placeholder and briefing
/// names its original by a handle, the briefing lists what it replaced,
/// and the model gets an original back with the recall tool. Originals are
/// kept where snapshots are (and go with them under `[store]` retention),
/// and in memory up to `memory_megabytes`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RecallConfig {
    /// Handles, index and tool (`false`: placeholders as before, no tool).
    pub enabled: bool,
    /// The tool's name.
    pub tool: String,
    /// Characters of text per page of a recalled original.
    pub page_chars: usize,
    /// Most megabytes of originals kept in memory (per engine, or shared
    /// by a proxy's engines).
    pub memory_megabytes: u64,
    /// Largest share of a briefing's tokens its index may take.
    pub index_share: f64,
    /// Most recall rounds a proxy answers within one client request before
    /// it gives the model's response to the client as it is.
    pub max_rounds: usize,
}

impl Default for RecallConfig {
    fn default() -> Self {
        RecallConfig {
            enabled: true,
            tool: "abridge_recall".to_owned(),
            page_chars: 24_000,
            memory_megabytes: 64,
            index_share: 0.15,
            max_rounds: 3,
        }
    }
}

impl RecallConfig {
    fn check(&self) -> std::result::Result<(), String> {
        tool_name("recall.tool", &self.tool)?;
        if self.page_chars < 1_000 {
            return Err(format!(
                "recall.page_chars must be at least 1000, got {}",
                self.page_chars
            ));
        }
        within_unit("recall.index_share", self.index_share)
    }
}

/// What the agent itself is shown and offered (`[agent]`), for front ends
/// in its loop (the proxy, the packages): mycoder's status notes and its
/// compact tool, with which the agent decides when to compact.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AgentConfig {
    /// A status note (tokens of the window, cost so far) goes with every
    /// this many requests of a session (0: never).
    pub status_every: usize,
    /// Declare the compact tool and answer it.
    pub compact_tool: bool,
    /// The compact tool's name.
    pub tool: String,
    /// The status note suggests the compact tool from this fraction of
    /// the window on (mycoder: 70%).
    pub hint_at: f64,
    /// Compaction happens only when the agent calls the compact tool (or
    /// the provider refuses a history as too long): the triggers never fire.
    pub only_on_request: bool,
}

impl Default for AgentConfig {
    fn default() -> Self {
        AgentConfig {
            status_every: 0,
            compact_tool: false,
            tool: "compact_history".to_owned(),
            hint_at: 0.7,
            only_on_request: false,
        }
    }
}

impl AgentConfig {
    fn check(&self) -> std::result::Result<(), String> {
        tool_name("agent.tool", &self.tool)?;
        within_unit("agent.hint_at", self.hint_at)?;
        if self.only_on_request && !self.compact_tool {
            return Err(
                "agent.only_on_request needs agent.compact_tool = true (nothing else would compact)"
                    .into(),
            );
        }
        Ok(())
    }
}

/// `name` must be what every API accepts as a tool name.
fn tool_name(key: &str, name: &str) -> std::result::Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    match ok {
        true => Ok(()),
        false => Err(format!(
            "{key} must be 1 to 64 of [A-Za-z0-9_-] (what every API accepts as a tool name), got {name:?}"
        )),
    }
}

/// Messages that are never clipped, collapsed or dropped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct PinConfig {
    /// Message indices in the request body's own `messages` array (an
    /// Anthropic body's top-level `system` is not in it; OpenAI's system
    /// message is index 0) — the index every report and event uses.
    pub indices: Vec<usize>,
    /// A message whose text contains one of these is pinned.
    pub markers: Vec<String>,
}

impl std::fmt::Display for PolicyKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Config {
    /// What the fact extractor and every summarizer recognise: task-list
    /// tools, failure prefixes and the briefing wrapper.
    pub fn facts(&self) -> FactConfig {
        FactConfig {
            todo_tools: self.summary.todo_tools.clone(),
            error_prefixes: self.policies.error_prefixes.clone(),
            wrapper: self.summary.wrapper.clone(),
        }
    }

    /// The summarizers to try, in order: `[[summarizers]]`, then, with
    /// `summary.agent_model_last`, the agent's own model on `family`'s API
    /// (at `base_url`, or the provider's default) unless already there.
    pub fn summarizer_specs(&self, family: Family, base_url: Option<&str>) -> Vec<SummarizerSpec> {
        let mut specs = self.summarizers.clone();
        if let (true, Some(model)) = (self.summary.agent_model_last, &self.model)
            && !specs.iter().any(|s| s.kind == family && s.model == *model)
        {
            let mut spec = SummarizerSpec::new(family, model.clone());
            spec.base_url = base_url.map(str::to_owned);
            specs.push(spec);
        }
        specs
    }

    /// Parses a TOML config.
    pub fn from_toml(text: &str) -> Result<Self> {
        let table: toml::Table = toml::from_str(text).map_err(|e| Error::Config(e.to_string()))?;
        Self::from_table(table)
    }

    /// A config from its keys (a `preset` key names the
    /// [preset](crate::preset) under them).
    pub fn from_table(table: toml::Table) -> Result<Self> {
        let config: Config = crate::preset::apply(table)?
            .try_into()
            .map_err(|e: toml::de::Error| Error::Config(e.to_string()))?;
        config.check()?;
        Ok(config)
    }

    /// Rejects settings that cannot work.
    pub fn check(&self) -> Result<()> {
        let bad = |m: String| Err(Error::Config(m));
        let b = &self.budget;
        within_unit("budget.target_ratio", b.target_ratio).map_err(Error::Config)?;
        // 0: the tail is the `min_iterations` floor and no more.
        if b.kept_fraction != 0.0 {
            within_unit("budget.kept_fraction", b.kept_fraction).map_err(Error::Config)?;
        }
        if b.target_tokens == Some(0) {
            return bad("budget.target_tokens must be at least 1".into());
        }
        if b.min_iterations == 0 {
            return bad(
                "budget.min_iterations must be at least 1 (the latest turn is never clipped)"
                    .into(),
            );
        }
        self.trigger.check().map_err(Error::Config)?;
        self.recall.check().map_err(Error::Config)?;
        self.agent.check().map_err(Error::Config)?;
        if self.agent.compact_tool && self.agent.tool == self.recall.tool {
            return bad(format!(
                "agent.tool and recall.tool must differ, both are {:?}",
                self.agent.tool
            ));
        }
        let share = self.summary.working_set_share;
        if !(0.0..1.0).contains(&share) {
            return bad(format!(
                "summary.working_set_share must be in [0, 1), got {share}"
            ));
        }
        for (i, s) in self.summarizers.iter().enumerate() {
            if s.model.trim().is_empty() {
                return bad(format!("summarizers[{i}].model must not be empty"));
            }
            if !(s.timeout_secs > 0.0 && s.timeout_secs.is_finite()) {
                return bad(format!(
                    "summarizers[{i}].timeout_secs must be a positive number, got {}",
                    s.timeout_secs
                ));
            }
        }
        Ok(())
    }
}
