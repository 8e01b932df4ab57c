//! What a call may set: target, model, tokenizer, config, format.

use std::path::PathBuf;

use abridge::{Compactor, Config};
use abridge_model::{Conversation, Wire};
use abridge_tokens::TokenizerKind;
use serde::Deserialize;
use serde_json::Value;

use crate::error::{Error, Result};

/// Options of a call, as the packages pass them (JSON, `snake_case` or
/// `camelCase` keys).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Options {
    /// Format of the messages: `openai`, `anthropic` or `ai-sdk` (detected when absent).
    #[serde(deserialize_with = "wire")]
    pub format: Option<Wire>,
    /// Compact to at most this many tokens (default: the config's target,
    /// or one derived from the model's window).
    #[serde(alias = "targetTokens")]
    pub target_tokens: Option<u64>,
    /// Compact when the history exceeds this many tokens (a [`Session`]'s
    /// trigger; sets `trigger.max_tokens`).
    ///
    /// [`Session`]: crate::Session
    #[serde(alias = "triggerTokens")]
    pub trigger_tokens: Option<u64>,
    /// Record every compaction in this snapshot store (a SQLite file), for
    /// `abridge log`, `show`, `restore` and the dashboard.
    pub store: Option<PathBuf>,
    /// The name compactions are recorded under (default `abridge-embed`).
    pub source: Option<String>,
    /// The engine config: an object with the keys of `abridge.toml`, or a
    /// path to such a TOML file.
    pub config: Option<ConfigSource>,
    /// A seed system's settings under the config (`pilo-clipping`,
    /// `pilo-compaction`, `compaction-note`, `stagewise`); the config's
    /// own keys still win.
    pub preset: Option<String>,
    /// Model name, for its window and tokenizer (default: the body's `model`).
    pub model: Option<String>,
    /// Tokenizer name (`o200k_base`, `cl100k_base`, `claude_calibrated`,
    /// `open_calibrated`, `estimate`; default: the model's own).
    #[serde(deserialize_with = "tokenizer")]
    pub tokenizer: Option<TokenizerKind>,
    /// Handles on replaced content and the recall tool (sets `recall.enabled`;
    /// an integration that cannot give the model the tool turns it off).
    pub recall: Option<bool>,
}

/// Where the engine config comes from.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum ConfigSource {
    /// A TOML file.
    Path(PathBuf),
    /// The config's keys, as a JSON object.
    Value(Value),
}

/// `v` without its null values (an absent key, as in TOML, which has none).
fn without_nulls(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), without_nulls(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(without_nulls).collect()),
        other => other.clone(),
    }
}

fn wire<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Wire>, D::Error> {
    Option::<String>::deserialize(d)?
        .map(|s| s.parse().map_err(serde::de::Error::custom))
        .transpose()
}

fn tokenizer<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<TokenizerKind>, D::Error> {
    Option::<String>::deserialize(d)?
        .map(|s| s.parse().map_err(serde::de::Error::custom))
        .transpose()
}

impl Options {
    /// Reads options from their JSON text (empty text: the defaults).
    pub fn from_json(text: &str) -> Result<Self> {
        if text.trim().is_empty() {
            return Ok(Options::default());
        }
        serde_json::from_str(text).map_err(|e| Error::Options(format!("options: {e}")))
    }

    /// The config with these options applied; the model defaults to the
    /// conversation's.
    pub fn config(&self, conv: &Conversation) -> Result<Config> {
        let mut table = match &self.config {
            None => toml::Table::new(),
            Some(ConfigSource::Path(path)) => {
                let text = std::fs::read_to_string(path).map_err(|e| {
                    Error::Options(format!("config {}: cannot read: {e}", path.display()))
                })?;
                toml::from_str(&text)
                    .map_err(|e| Error::Options(format!("config {}: {e}", path.display())))?
            }
            Some(ConfigSource::Value(v)) => toml::Table::try_from(without_nulls(v))
                .map_err(|e| Error::Options(format!("config: {e}")))?,
        };
        if let Some(name) = &self.preset {
            table.insert("preset".into(), toml::Value::String(name.clone()));
        }
        let mut config =
            Config::from_table(table).map_err(|e| Error::Options(format!("config: {e}")))?;
        if let Some(m) = &self.model {
            config.model = Some(m.clone());
        } else if config.model.is_none() {
            config.model = conv.model.clone();
        }
        match self.target_tokens {
            Some(0) => return Err(Error::Options("target_tokens must be at least 1".into())),
            Some(t) => config.budget.target_tokens = Some(t),
            None => {}
        }
        match self.trigger_tokens {
            Some(0) => return Err(Error::Options("trigger_tokens must be at least 1".into())),
            Some(t) => config.trigger.max_tokens = Some(t),
            None => {}
        }
        if self.tokenizer.is_some() {
            config.tokenizer = self.tokenizer;
        }
        if let Some(on) = self.recall {
            config.recall.enabled = on;
        }
        config.check()?;
        Ok(config)
    }

    /// A compactor for `conv`: the config's `[[summarizers]]` in cascade
    /// order, then the offline fact sheet.
    pub fn compactor(&self, conv: &Conversation) -> Result<Compactor> {
        let mut compactor = Compactor::new(self.config(conv)?)?;
        compactor.set_summarizers(abridge_llm::cascade(&compactor.config().summarizers, None));
        if let Some(path) = &self.store {
            let store = abridge_store::Store::open(path)
                .map_err(|e| Error::Options(format!("store: {e}")))?
                .with_source(self.source.as_deref().unwrap_or("abridge-embed"));
            compactor.set_store(Box::new(store));
        }
        Ok(compactor)
    }
}
