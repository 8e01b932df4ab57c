//! Triggers: when a turn compacts. Everything about a trigger is here —
//! its `[trigger]` key, the [`Reason`] it reports, its check against what
//! the turn knows ([`TurnFacts`]) — so a new trigger is a change to this
//! module alone.

use abridge_tokens::{Calibrated, Reported};
use serde::{Deserialize, Serialize};

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

impl TriggerConfig {
    /// Says what is wrong with a value, if anything.
    pub(crate) fn check(&self) -> Result<(), String> {
        if let Some(f) = self.window_fraction
            && !(f > 0.0 && f <= 1.0)
        {
            return Err(format!(
                "trigger.window_fraction must be in (0, 1], got {f}"
            ));
        }
        if self.every_iterations == Some(0) {
            return Err("trigger.every_iterations must be at least 1".into());
        }
        Ok(())
    }

    /// The trigger that fires for this turn, if any (the token thresholds
    /// as the limits derived them from the model's window).
    pub(crate) fn fired(&self, limits: Thresholds, facts: &TurnFacts) -> Option<Reason> {
        if limits.tokens.is_some_and(|t| facts.tokens > t) {
            return Some(if limits.from_window {
                Reason::Window
            } else {
                Reason::Tokens
            });
        }
        if let (Some(limit), Some(u)) = (limits.usage, facts.usage)
            && u > limit
        {
            return Some(Reason::Usage);
        }
        if let Some(k) = self.every_iterations
            && facts.iterations >= facts.compacted_at + k
        {
            return Some(Reason::Cadence);
        }
        None
    }
}

/// The token thresholds a turn's triggers check, in the provider's units
/// (derived by the engine's limits from this config and the model).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Thresholds {
    /// History tokens above this fire.
    pub(crate) tokens: Option<Calibrated>,
    /// Whether `tokens` comes from the window fraction (else `max_tokens`).
    pub(crate) from_window: bool,
    /// Provider-reported usage above this fires.
    pub(crate) usage: Option<Reported>,
}

/// What a turn knows when its triggers are checked.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TurnFacts {
    /// The history's tokens, in the provider's units.
    pub(crate) tokens: Calibrated,
    /// Its iterations.
    pub(crate) iterations: usize,
    /// Its iterations when it last compacted.
    pub(crate) compacted_at: usize,
    /// What the provider reported for the last history sent.
    pub(crate) usage: Option<Reported>,
}

/// Why a compaction ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// Asked for directly ([`Compactor::compact`](crate::Compactor::compact)).
    Forced,
    /// History tokens above `trigger.max_tokens`.
    Tokens,
    /// History tokens above the window fraction.
    Window,
    /// Provider-reported usage above `trigger.usage_tokens`.
    Usage,
    /// `trigger.every_iterations` iterations since the last compaction.
    Cadence,
}

impl Reason {
    /// Lower-case name, as serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Forced => "forced",
            Reason::Tokens => "tokens",
            Reason::Window => "window",
            Reason::Usage => "usage",
            Reason::Cadence => "cadence",
        }
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
