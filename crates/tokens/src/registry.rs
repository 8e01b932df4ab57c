//! Known models: context window, output limit and tokenizer.

use std::collections::BTreeMap;

use crate::tokenizer::TokenizerKind;

/// Limits and tokenizer of a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ModelInfo {
    /// Context window in tokens (prompt plus output).
    pub context_window: u64,
    /// Largest output in tokens.
    pub max_output: u64,
    /// How to count its tokens.
    #[serde(default)]
    pub tokenizer: TokenizerKind,
}

const fn info(context_window: u64, max_output: u64, tokenizer: TokenizerKind) -> ModelInfo {
    ModelInfo {
        context_window,
        max_output,
        tokenizer,
    }
}

use TokenizerKind::{Cl100kBase as CL, Estimate as EST, O200kBase as O200};

/// Built-in entries, matched by longest prefix of the model name.
const BUILTIN: &[(&str, ModelInfo)] = &[
    // OpenAI
    ("gpt-5", info(400_000, 128_000, O200)),
    ("gpt-4.1", info(1_047_576, 32_768, O200)),
    ("gpt-4o", info(128_000, 16_384, O200)),
    ("gpt-4-turbo", info(128_000, 4_096, CL)),
    ("gpt-4", info(8_192, 8_192, CL)),
    ("gpt-3.5-turbo", info(16_385, 4_096, CL)),
    ("o1", info(200_000, 100_000, O200)),
    ("o3", info(200_000, 100_000, O200)),
    ("o4-mini", info(200_000, 100_000, O200)),
    ("gpt-oss", info(131_072, 131_072, O200)),
    // Anthropic
    ("claude-opus-4-6", info(200_000, 128_000, EST)),
    ("claude-opus-4-5", info(200_000, 64_000, EST)),
    ("claude-opus-4", info(200_000, 32_000, EST)),
    ("claude-sonnet-4", info(200_000, 64_000, EST)),
    ("claude-haiku-4", info(200_000, 64_000, EST)),
    ("claude-3-7-sonnet", info(200_000, 64_000, EST)),
    ("claude-3-5", info(200_000, 8_192, EST)),
    ("claude-3", info(200_000, 4_096, EST)),
    // Google
    ("gemini-2.5", info(1_048_576, 65_536, EST)),
    ("gemini-2.0", info(1_048_576, 8_192, EST)),
    ("gemini-1.5-pro", info(2_097_152, 8_192, EST)),
    ("gemini-1.5", info(1_048_576, 8_192, EST)),
    // Open models
    ("deepseek-chat", info(128_000, 8_192, EST)),
    ("deepseek-reasoner", info(128_000, 65_536, EST)),
    ("llama-3", info(131_072, 4_096, EST)),
    ("qwen", info(131_072, 8_192, EST)),
    ("mistral-large", info(131_072, 4_096, EST)),
    ("kimi-k2", info(262_144, 16_384, EST)),
];

/// Maps model names to [`ModelInfo`]: built-in entries plus overrides.
///
/// Lookup strips a provider prefix (`openai/gpt-4o` → `gpt-4o`) and takes the
/// longest matching name prefix, so dated names (`gpt-4o-2024-08-06`) match.
/// Overrides win over built-ins.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    overrides: BTreeMap<String, ModelInfo>,
}

impl Registry {
    /// The built-in registry.
    pub fn new() -> Self {
        Registry::default()
    }

    /// Adds or replaces an entry (matched by prefix like the built-ins).
    pub fn set(&mut self, name: impl Into<String>, info: ModelInfo) -> &mut Self {
        self.overrides.insert(name.into(), info);
        self
    }

    /// Adds every entry of a map, as read from a config file's `[models]` table.
    pub fn extend(&mut self, entries: impl IntoIterator<Item = (String, ModelInfo)>) -> &mut Self {
        self.overrides.extend(entries);
        self
    }

    /// The entry for a model name, if any matches.
    pub fn lookup(&self, model: &str) -> Option<ModelInfo> {
        let name = model
            .rsplit('/')
            .next()
            .unwrap_or(model)
            .to_ascii_lowercase();
        let best = |entries: &mut dyn Iterator<Item = (&str, ModelInfo)>| {
            entries
                .filter(|(k, _)| name.starts_with(&k.to_ascii_lowercase()))
                .max_by_key(|(k, _)| k.len())
                .map(|(_, v)| v)
        };
        best(&mut self.overrides.iter().map(|(k, v)| (k.as_str(), *v)))
            .or_else(|| best(&mut BUILTIN.iter().map(|(k, v)| (*k, *v))))
    }

    /// The tokenizer for a model: its entry's, or `o200k_base` when unknown.
    pub fn tokenizer_for(&self, model: Option<&str>) -> TokenizerKind {
        model
            .and_then(|m| self.lookup(m))
            .map_or(TokenizerKind::O200kBase, |i| i.tokenizer)
    }
}
