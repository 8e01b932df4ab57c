//! Options shared by `compact` and `simulate`: where the engine config comes from.

use std::path::PathBuf;

use abridge::Config;
use abridge_model::Conversation;
use anyhow::{Context, Result};
use clap::Args;

use crate::{TokenizerChoice, parse_tokenizer};

/// Engine options on the command line; they override the config file.
#[derive(Debug, Clone, Args)]
pub(crate) struct EngineArgs {
    /// TOML config (see abridge.example.toml).
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
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
    /// Summarizer when clipping cannot reach the target: offline (the
    /// default, a deterministic fact sheet) or none (drop old iterations).
    #[arg(long, value_enum)]
    pub(crate) summarizer: Option<SummarizerChoice>,
    /// Most tokens a briefing may take.
    #[arg(long, value_name = "N")]
    pub(crate) summary_tokens: Option<u64>,
}

/// A summarizer named on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum SummarizerChoice {
    /// The deterministic fact sheet.
    Offline,
    /// No briefing: old iterations are dropped instead.
    None,
}

impl EngineArgs {
    /// The config file (or defaults) with the command-line overrides applied.
    pub(crate) fn config(&self, conv: &Conversation) -> Result<Config> {
        let mut config = match &self.config {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("{}: cannot read", path.display()))?;
                Config::from_toml(&text).with_context(|| format!("{}", path.display()))?
            }
            None => Config::default(),
        };
        if let Some(m) = self.model.clone().or_else(|| conv.model.clone()) {
            config.model.get_or_insert(m);
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
        if let Some(s) = self.summarizer {
            config.summary.offline = s == SummarizerChoice::Offline;
        }
        if let Some(n) = self.summary_tokens {
            config.summary.max_tokens = n;
        }
        config.check()?;
        Ok(config)
    }
}
