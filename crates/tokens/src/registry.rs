//! Known models: context window, output limit, tokenizer and prices.
//!
//! The table follows the providers' published model lists and price pages
//! (read on [`PRICES_AS_OF`]); every entry can be overridden, and a name
//! that matches no entry but belongs to a known family (`claude-*`,
//! `gpt-*`, `o1`…, `gemini-*`, open models) gets that family's
//! conservative defaults, so it still has a window and a tokenizer.

use std::collections::BTreeMap;

use crate::tokenizer::TokenizerKind;
use crate::units::Calibrated;

/// When the built-in prices were read from the providers' pages.
pub const PRICES_AS_OF: &str = "2026-11-05";

/// Prices in US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Prompt tokens neither read from nor written to a cache.
    pub input: f64,
    /// Completion tokens.
    pub output: f64,
    /// Prompt tokens written to the cache (Anthropic: 1.25 × input for the
    /// five-minute cache; OpenAI and others: the input price, no premium).
    pub cache_write: f64,
    /// Prompt tokens read from the cache.
    pub cache_read: f64,
}

impl Price {
    /// Anthropic's scheme: writes at 1.25 × input, reads at 0.1 × input.
    pub const fn anthropic(input: f64, output: f64) -> Price {
        Price {
            input,
            output,
            cache_write: input * 1.25,
            cache_read: input * 0.1,
        }
    }

    /// Dollars for one prompt of `total` tokens whose first `cached` tokens
    /// are read from the provider's cache: the cached prefix at the read
    /// price, the rest at the write price (with automatic caching, the
    /// write price is the input price). The one cost model of `simulate`
    /// and the agent's status message.
    /// Prices are in the provider's units, so the figures are too.
    pub fn prompt_cost(&self, cached: Calibrated, total: Calibrated) -> f64 {
        let (cached, total) = (cached.get().min(total.get()), total.get());
        (cached as f64 * self.cache_read + (total - cached) as f64 * self.cache_write) / 1e6
    }

    /// Dollars for a response whose provider reported `usage`: each kind
    /// of prompt token at its price, and the output.
    pub fn cost(&self, usage: &abridge_model::Usage) -> f64 {
        (usage.input_tokens as f64 * self.input
            + usage.cache_read_tokens as f64 * self.cache_read
            + usage.cache_write_tokens as f64 * self.cache_write
            + usage.output_tokens as f64 * self.output)
            / 1e6
    }

    /// Automatic prefix caching (OpenAI, Gemini, DeepSeek): no write premium.
    pub const fn cached(input: f64, output: f64, cache_read: f64) -> Price {
        Price {
            input,
            output,
            cache_write: input,
            cache_read,
        }
    }
}

/// Limits, tokenizer and prices of a model.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelInfo {
    /// Context window in tokens (prompt plus output).
    pub context_window: u64,
    /// Largest output in tokens.
    pub max_output: u64,
    /// How to count its tokens.
    #[serde(default)]
    pub tokenizer: TokenizerKind,
    /// What it costs, when published.
    #[serde(default)]
    pub price: Option<Price>,
}

const fn m(window: u64, output: u64, tokenizer: TokenizerKind, price: Option<Price>) -> ModelInfo {
    ModelInfo {
        context_window: window,
        max_output: output,
        tokenizer,
        price,
    }
}

use TokenizerKind::{
    Cl100kBase as CL, ClaudeCalibrated as CLAUDE, O200kBase as O200, OpenCalibrated as OPEN,
};

const fn a(input: f64, output: f64) -> Option<Price> {
    Some(Price::anthropic(input, output))
}

const fn c(input: f64, output: f64, read: f64) -> Option<Price> {
    Some(Price::cached(input, output, read))
}

const M: u64 = 1_000_000;
const K: u64 = 1_000;

/// Built-in entries, matched by longest prefix of the model name.
const BUILTIN: &[(&str, ModelInfo)] = &[
    // Anthropic (cache writes 1.25×, reads 0.1× input).
    ("claude-fable-5", m(M, 128 * K, CLAUDE, a(10.0, 50.0))),
    ("claude-mythos-5", m(M, 128 * K, CLAUDE, a(10.0, 50.0))),
    ("claude-opus-5-5", m(M, 128 * K, CLAUDE, a(4.0, 20.0))),
    ("claude-opus-5", m(M, 128 * K, CLAUDE, a(5.0, 25.0))),
    ("claude-sonnet-5", m(M, 128 * K, CLAUDE, a(2.0, 10.0))),
    ("claude-haiku-5", m(M, 128 * K, CLAUDE, a(0.1, 0.5))),
    ("claude-opus-4-8", m(M, 128 * K, CLAUDE, a(5.0, 25.0))),
    ("claude-opus-4-7", m(M, 128 * K, CLAUDE, a(5.0, 25.0))),
    ("claude-opus-4-6", m(M, 128 * K, CLAUDE, a(5.0, 25.0))),
    ("claude-sonnet-4-6", m(M, 128 * K, CLAUDE, a(3.0, 15.0))),
    ("claude-opus-4-5", m(200 * K, 64 * K, CLAUDE, a(5.0, 25.0))),
    (
        "claude-sonnet-4-5",
        m(200 * K, 64 * K, CLAUDE, a(3.0, 15.0)),
    ),
    ("claude-haiku-4-5", m(200 * K, 64 * K, CLAUDE, a(1.0, 5.0))),
    ("claude-opus-4", m(200 * K, 32 * K, CLAUDE, a(15.0, 75.0))),
    ("claude-sonnet-4", m(200 * K, 64 * K, CLAUDE, a(3.0, 15.0))),
    (
        "claude-3-7-sonnet",
        m(200 * K, 64 * K, CLAUDE, a(3.0, 15.0)),
    ),
    ("claude-3-5-haiku", m(200 * K, 8_192, CLAUDE, a(0.8, 4.0))),
    ("claude-3-5", m(200 * K, 8_192, CLAUDE, a(3.0, 15.0))),
    ("claude-3", m(200 * K, 4_096, CLAUDE, None)),
    // OpenAI (automatic caching: GPT-5 reads at 0.1×, GPT-4.1 0.25×, 4o and o-series 0.5×).
    (
        "gpt-5.4-mini",
        m(400 * K, 128 * K, O200, c(0.75, 4.5, 0.075)),
    ),
    ("gpt-5.4", m(M, 128 * K, O200, c(2.5, 15.0, 0.25))),
    ("gpt-5-mini", m(400 * K, 128 * K, O200, c(0.25, 2.0, 0.025))),
    ("gpt-5-nano", m(400 * K, 128 * K, O200, c(0.05, 0.4, 0.005))),
    ("gpt-5", m(400 * K, 128 * K, O200, c(1.25, 10.0, 0.125))),
    ("gpt-4.1-mini", m(1_047_576, 32_768, O200, c(0.4, 1.6, 0.1))),
    (
        "gpt-4.1-nano",
        m(1_047_576, 32_768, O200, c(0.1, 0.4, 0.025)),
    ),
    ("gpt-4.1", m(1_047_576, 32_768, O200, c(2.0, 8.0, 0.5))),
    ("gpt-4o-mini", m(128 * K, 16_384, O200, c(0.15, 0.6, 0.075))),
    ("gpt-4o", m(128 * K, 16_384, O200, c(2.5, 10.0, 1.25))),
    ("gpt-4-turbo", m(128 * K, 4_096, CL, None)),
    ("gpt-4", m(8_192, 8_192, CL, None)),
    ("gpt-3.5-turbo", m(16_385, 4_096, CL, None)),
    ("o1", m(200 * K, 100 * K, O200, c(15.0, 60.0, 7.5))),
    ("o3-mini", m(200 * K, 100 * K, O200, c(1.1, 4.4, 0.55))),
    ("o3", m(200 * K, 100 * K, O200, c(2.0, 8.0, 0.5))),
    ("o4-mini", m(200 * K, 100 * K, O200, c(1.1, 4.4, 0.275))),
    ("gpt-oss", m(131_072, 131_072, O200, None)),
    // Google (prices for prompts up to 200k tokens).
    (
        "gemini-2.5-pro",
        m(1_048_576, 65_536, OPEN, c(1.25, 10.0, 0.125)),
    ),
    (
        "gemini-2.5-flash",
        m(1_048_576, 65_536, OPEN, c(0.3, 2.5, 0.03)),
    ),
    ("gemini-2.5", m(1_048_576, 65_536, OPEN, None)),
    ("gemini-2.0", m(1_048_576, 8_192, OPEN, None)),
    ("gemini-1.5-pro", m(2_097_152, 8_192, OPEN, None)),
    ("gemini-1.5", m(1_048_576, 8_192, OPEN, None)),
    // Open models.
    (
        "deepseek-chat",
        m(128 * K, 8_192, OPEN, c(0.28, 0.42, 0.028)),
    ),
    (
        "deepseek-reasoner",
        m(128 * K, 65_536, OPEN, c(0.28, 0.42, 0.028)),
    ),
    ("llama-3", m(131_072, 4_096, OPEN, None)),
    ("qwen", m(131_072, 8_192, OPEN, None)),
    ("mistral-large", m(131_072, 4_096, OPEN, None)),
    ("kimi-k2", m(262_144, 16_384, OPEN, None)),
];

/// Defaults for a name of a known family that no entry matches: the
/// smallest window of the family's current models (an early compaction
/// costs little; an overflow fails the request), no price.
const FAMILIES: &[(&str, &str, ModelInfo)] = &[
    ("claude", "claude-*", m(200 * K, 64 * K, CLAUDE, None)),
    ("gpt-", "gpt-*", m(128 * K, 16_384, O200, None)),
    ("chatgpt", "gpt-*", m(128 * K, 16_384, O200, None)),
    ("gemini", "gemini-*", m(1_048_576, 8_192, OPEN, None)),
    ("deepseek", "deepseek-*", m(128 * K, 8_192, OPEN, None)),
    ("qwen", "qwen*", m(32_768, 8_192, OPEN, None)),
    ("llama", "llama*", m(131_072, 4_096, OPEN, None)),
    ("mistral", "mistral*", m(32_768, 4_096, OPEN, None)),
    ("kimi", "kimi*", m(131_072, 8_192, OPEN, None)),
    ("glm", "glm*", m(131_072, 8_192, OPEN, None)),
];

const O_SERIES: ModelInfo = m(200 * K, 100 * K, O200, None);

/// How a model name was resolved.
#[derive(Debug, Clone, PartialEq)]
pub enum Resolved {
    /// An entry (built-in or override) matched the name.
    Known(ModelInfo),
    /// No entry matched; the family's defaults apply (`claude-*`…).
    Family(&'static str, ModelInfo),
    /// Nothing is known of this name.
    Unknown,
}

impl Resolved {
    /// The info, known or by family.
    pub fn info(&self) -> Option<ModelInfo> {
        match self {
            Resolved::Known(i) | Resolved::Family(_, i) => Some(*i),
            Resolved::Unknown => None,
        }
    }
}

/// Maps model names to [`ModelInfo`]: built-in entries plus overrides.
///
/// Lookup strips a provider prefix (`openai/gpt-4o` → `gpt-4o`) and takes the
/// longest matching name prefix, so dated names (`gpt-4o-2024-08-06`) match.
/// Overrides win over built-ins; family defaults come last.
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

    /// The entry for a model name, falling back to its family's defaults.
    pub fn lookup(&self, model: &str) -> Option<ModelInfo> {
        self.resolve(model).info()
    }

    /// How `model` resolves: an entry, a family's defaults, or nothing.
    pub fn resolve(&self, model: &str) -> Resolved {
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
        if let Some(i) = best(&mut self.overrides.iter().map(|(k, v)| (k.as_str(), *v)))
            .or_else(|| best(&mut BUILTIN.iter().map(|(k, v)| (*k, *v))))
        {
            return Resolved::Known(i);
        }
        // OpenAI's reasoning models: `o` and a digit.
        let o_series = name.len() > 1
            && name.starts_with('o')
            && name[1..].starts_with(|c: char| c.is_ascii_digit());
        if o_series {
            return Resolved::Family("o*", O_SERIES);
        }
        FAMILIES
            .iter()
            .find(|(prefix, _, _)| name.starts_with(prefix))
            .map_or(Resolved::Unknown, |(_, family, i)| {
                Resolved::Family(family, *i)
            })
    }

    /// The tokenizer for a model: its entry's or family's, or `o200k_base`
    /// when nothing is known of it.
    pub fn tokenizer_for(&self, model: Option<&str>) -> TokenizerKind {
        model
            .and_then(|m| self.lookup(m))
            .map_or(TokenizerKind::O200kBase, |i| i.tokenizer)
    }
}
