//! Options shared by `compact` and `simulate`: where the engine config comes from.

use std::path::PathBuf;

use abridge::{Config, SummarizerSpec};
use abridge_model::{Conversation, Family};
use anyhow::{Context, Result};
use clap::Args;

use crate::{TokenizerChoice, parse_tokenizer};

/// Engine options on the command line; they override the config file.
#[derive(Debug, Clone, Args)]
pub(crate) struct EngineArgs {
    /// TOML config (see abridge.example.toml).
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// Start from a seed system's settings (the config file's keys still win).
    #[arg(long, value_name = "NAME", value_parser = crate::engine_args::preset_names())]
    pub(crate) preset: Option<String>,
    /// Model name, for its window and tokenizer (default: the conversation's).
    #[arg(long)]
    pub(crate) model: Option<String>,
    /// Compact to at most this many tokens.
    #[arg(long, value_name = "N")]
    pub(crate) target_tokens: Option<u64>,
    /// Keep at least the last N iterations verbatim.
    #[arg(long, value_name = "N")]
    pub(crate) keep_last: Option<usize>,
    /// o200k_base, cl100k_base, estimate, or auto (the model's own; the default).
    #[arg(long, value_parser = parse_tokenizer)]
    pub(crate) tokenizer: Option<TokenizerChoice>,
    /// Summarizer when clipping cannot reach the target, repeatable in
    /// cascade order: offline (the deterministic fact sheet, always the last
    /// resort), none (no briefing: drop old iterations), openai:MODEL or
    /// anthropic:MODEL (keys from OPENAI_API_KEY / ANTHROPIC_API_KEY).
    /// Replaces the config's [[summarizers]].
    #[arg(long, value_name = "NAME", value_parser = parse_summarizer)]
    pub(crate) summarizer: Vec<SummarizerChoice>,
    /// Base URL of the LLM summarizers (OpenAI-compatible: ending in /v1;
    /// Anthropic: the host root).
    #[arg(long, value_name = "URL")]
    pub(crate) base_url: Option<String>,
    /// Time limit of each LLM summarizer attempt, in seconds (default 30).
    #[arg(long, value_name = "SECONDS")]
    pub(crate) timeout: Option<f64>,
    /// Most tokens a briefing may take.
    #[arg(long, value_name = "N")]
    pub(crate) summary_tokens: Option<u64>,
    /// Custom instructions appended to the LLM summarizers' prompt.
    #[arg(long, value_name = "TEXT")]
    pub(crate) instructions: Option<String>,
}

/// A summarizer named on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SummarizerChoice {
    /// The deterministic fact sheet.
    Offline,
    /// No briefing: old iterations are dropped instead.
    None,
    /// An LLM.
    Llm(Family, String),
}

fn parse_summarizer(s: &str) -> Result<SummarizerChoice, String> {
    match s.split_once(':') {
        None if s == "offline" => Ok(SummarizerChoice::Offline),
        None if s == "none" => Ok(SummarizerChoice::None),
        Some((family, m)) if !m.is_empty() => match family.parse::<Family>() {
            Ok(f) => Ok(SummarizerChoice::Llm(f, m.to_owned())),
            Err(_) => Err(unknown(s)),
        },
        _ => Err(unknown(s)),
    }
}

fn unknown(s: &str) -> String {
    format!("unknown summarizer \"{s}\" (expected offline, none, openai:MODEL or anthropic:MODEL)")
}

impl EngineArgs {
    /// The config file (or defaults) with the command-line overrides applied.
    pub(crate) fn config(&self, conv: &Conversation) -> Result<Config> {
        let text = match &self.config {
            Some(path) => std::fs::read_to_string(path)
                .with_context(|| format!("{}: cannot read", path.display()))?,
            None => String::new(),
        };
        let text = abridge::preset::named(&text, self.preset.as_deref())?;
        let mut config = Config::from_toml(&text).with_context(|| match &self.config {
            Some(path) => path.display().to_string(),
            None => "--preset".to_owned(),
        })?;
        if config.model.is_none() {
            config.model = conv.model.clone();
        }
        self.apply(&mut config)?;
        let mut registry = abridge_tokens::Registry::new();
        registry.extend(config.models.clone());
        crate::note_model(&registry, config.model.as_deref());
        Ok(config)
    }

    /// Applies the command-line overrides to a config.
    pub(crate) fn apply(&self, config: &mut Config) -> Result<()> {
        if self.target_tokens == Some(0) {
            anyhow::bail!("--target-tokens must be at least 1");
        }
        if self.keep_last == Some(0) {
            anyhow::bail!("--keep-last must be at least 1: the latest iteration is always kept");
        }
        if self.model.is_some() {
            config.model = self.model.clone();
        }
        if let Some(t) = self.target_tokens {
            config.budget.target_tokens = Some(t);
        }
        if let Some(k) = self.keep_last {
            config.budget.min_iterations = k;
        }
        if let Some(TokenizerChoice::Fixed(k)) = self.tokenizer {
            config.tokenizer = Some(k);
        }
        if !self.summarizer.is_empty() {
            // Named, the fact sheet is on; otherwise it stays the last
            // resort unless `none` alone or the config (a preset) left it out.
            config.summary.offline = self.summarizer.contains(&SummarizerChoice::Offline)
                || (config.summary.offline && self.summarizer != [SummarizerChoice::None]);
            config.summarizers = self
                .summarizer
                .iter()
                .filter_map(|s| match s {
                    SummarizerChoice::Llm(family, model) => {
                        Some(SummarizerSpec::new(*family, model.clone()))
                    }
                    _ => None,
                })
                .collect();
        }
        for spec in &mut config.summarizers {
            if let Some(url) = &self.base_url {
                spec.base_url = Some(url.clone());
            }
            if let Some(t) = self.timeout {
                spec.timeout_secs = t.max(0.1);
            }
            if self.instructions.is_some() {
                spec.instructions = self.instructions.clone();
            }
        }
        if let Some(n) = self.summary_tokens {
            config.summary.max_tokens = n;
        }
        config.check()?;
        Ok(())
    }
}

/// The presets' names, for `--preset` (listed in its help, checked by clap).
pub(crate) fn preset_names() -> clap::builder::PossibleValuesParser {
    clap::builder::PossibleValuesParser::new(abridge::preset::PRESETS.map(|p| p.name))
}
