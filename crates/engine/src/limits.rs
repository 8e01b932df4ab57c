//! Thresholds and budgets derived from a config and the model registry.

use abridge_tokens::{Calibrated, Price, Registry, Reported, TokenizerKind};
use serde::Serialize;

use crate::config::Config;
use crate::trigger::{Reason, Thresholds};

/// The numbers the compactor works with, in the provider's units (the
/// thread converts them to abridge's count through its calibration).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Limits {
    /// The model's context window, when known.
    pub window: Option<Calibrated>,
    /// Tokenizer in use.
    pub tokenizer: TokenizerKind,
    /// The model's prices, when known.
    pub price: Option<Price>,
    /// History tokens above this trigger compaction.
    pub trigger_tokens: Option<Calibrated>,
    /// Whether `trigger_tokens` comes from the window fraction (else `max_tokens`).
    pub trigger_from_window: bool,
    /// Provider-reported usage above this triggers compaction.
    pub usage_tokens: Option<Reported>,
    /// Compaction every this many iterations.
    pub every_iterations: Option<usize>,
    /// What compaction shrinks the history to; always below the trigger by
    /// at least `clear_at_least`, so the next turn does not compact again.
    pub target: Option<Calibrated>,
    /// Most tokens the verbatim tail may hold (above the iteration floor).
    pub kept_budget: Calibrated,
    /// A compaction that would clear fewer tokens than this is skipped.
    pub clear_at_least: Calibrated,
}

impl Limits {
    /// The thresholds the triggers check.
    pub(crate) fn thresholds(&self) -> Thresholds {
        Thresholds {
            tokens: self.trigger_tokens,
            from_window: self.trigger_from_window,
            usage: self.usage_tokens,
        }
    }

    /// Derives the limits.
    pub fn new(config: &Config, registry: &Registry) -> Self {
        let info = config.model.as_deref().and_then(|m| registry.lookup(m));
        let window = info.map(|i| i.context_window);
        let tokenizer = config
            .tokenizer
            .unwrap_or_else(|| registry.tokenizer_for(config.model.as_deref()));
        let t = &config.trigger;
        let from_window = match (t.window_fraction, window) {
            (Some(f), Some(w)) => Some(((f * w as f64) as u64).min(t.window_cap)),
            _ => None,
        };
        let (trigger_tokens, trigger_from_window) = match (t.max_tokens, from_window) {
            (Some(m), Some(w)) if w < m => (Some(w), true),
            (Some(m), _) => (Some(m), false),
            (None, Some(w)) => (Some(w), true),
            (None, None) => (None, false),
        };
        let b = &config.budget;
        // At most half the trigger: a trigger under twice `clear_at_least`
        // still compacts (to half of it, or the target if lower).
        let clear = trigger_tokens.map_or(b.clear_at_least, |t| b.clear_at_least.min(t / 2));
        let derived = trigger_tokens.map(|t| (t as f64 * b.target_ratio) as u64);
        let mut target = b.target_tokens.or(derived);
        if let (Some(tt), Some(trig)) = (target, trigger_tokens) {
            // Hysteresis: never aim above trigger - clear_at_least.
            target = Some(tt.min(trig.saturating_sub(clear)).max(1));
        }
        let mut kept_budget = b.kept_cap;
        if let Some(w) = window {
            kept_budget = kept_budget.min((b.kept_fraction * w as f64) as u64);
        }
        if let Some(t) = target {
            kept_budget = kept_budget.min(t / 2);
        }
        Limits {
            window: window.map(Calibrated::new),
            tokenizer,
            price: info.and_then(|i| i.price),
            trigger_tokens: trigger_tokens.map(Calibrated::new),
            trigger_from_window,
            usage_tokens: t.usage_tokens.map(Reported::new),
            every_iterations: t.every_iterations,
            target: target.map(Calibrated::new),
            kept_budget: Calibrated::new(kept_budget),
            clear_at_least: Calibrated::new(clear),
        }
    }

    /// The target for a compaction of this reason (the thread converts it
    /// with its calibration). Cadence-triggered compaction has no target:
    /// it clips old content only.
    pub fn target_for(&self, reason: Reason) -> Option<Calibrated> {
        match reason {
            Reason::Cadence => None,
            Reason::Usage => self.target.or(self
                .usage_tokens
                .map(|u| Calibrated::from_reported(u).scaled(0.5))),
            _ => self.target,
        }
    }
}
