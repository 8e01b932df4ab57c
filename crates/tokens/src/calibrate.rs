//! How well a count agrees with what a provider billed.
//!
//! Recorded runs that carry provider-reported usage (Claude Code sessions,
//! mini-swe-agent trajectories) tell, for every model call, how many prompt
//! tokens the provider counted. Between two consecutive calls the prompt
//! grew by the messages added in between: the provider's growth against
//! this counter's count of the same messages is one *step*. System prompt
//! and tool declarations, identical in both calls, cancel out.

use abridge_model::{Conversation, Role};

use crate::counter::TokenCounter;

/// The prompt growth between two consecutive calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Growth {
    /// As the provider reported it.
    pub provider: u64,
    /// As the counter counts the added messages.
    pub counted: u64,
}

impl Growth {
    /// `counted / provider - 1`: negative when the counter under-counts.
    pub fn error(&self) -> f64 {
        self.counted as f64 / self.provider.max(1) as f64 - 1.0
    }
}

/// Every step of a recorded run, in order. Calls whose prompt did not grow
/// (a retry, a compaction) and steps across one of the agent's own
/// compactions are left out.
pub fn growth(conv: &Conversation, counter: &mut TokenCounter) -> Vec<Growth> {
    let calls: Vec<(usize, u64)> = conv
        .messages
        .iter()
        .enumerate()
        .filter(|(_, m)| m.role == Role::Assistant)
        .filter_map(|(i, m)| m.meta.usage.as_deref().map(|u| (i, u.prompt_tokens())))
        .collect();
    calls
        .windows(2)
        .filter(|w| {
            let ((a, pa), (b, pb)) = (w[0], w[1]);
            pb > pa && !conv.boundaries.iter().any(|x| x.index > a && x.index <= b)
        })
        .map(|w| {
            let ((a, pa), (b, pb)) = (w[0], w[1]);
            let counted = conv.messages[a..b]
                .iter()
                .map(|m| counter.count_message(m).total().get())
                .sum();
            Growth {
                provider: pb - pa,
                counted,
            }
        })
        .collect()
}

/// How far counts are from the provider's, over many steps.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Accuracy {
    /// Steps measured.
    pub steps: usize,
    /// Median of |error| per step.
    pub median_abs_error: f64,
    /// Share of steps under-counted by more than 10%.
    pub under_10: f64,
    /// Median |error| of the running total from a run's first call, once
    /// the provider has counted 5,000 tokens of growth: what a window
    /// threshold depends on.
    pub cumulative_median_abs_error: f64,
    /// Share of those running totals under-counted by more than 10%.
    pub cumulative_under_10: f64,
}

/// The accuracy over runs (each a [`growth`] series).
pub fn accuracy(runs: &[Vec<Growth>]) -> Accuracy {
    let steps: Vec<f64> = runs.iter().flatten().map(Growth::error).collect();
    let mut cumulative = Vec::new();
    for run in runs {
        let (mut p, mut c) = (0u64, 0u64);
        for g in run {
            p += g.provider;
            c += g.counted;
            if p >= 5_000 {
                cumulative.push(c as f64 / p as f64 - 1.0);
            }
        }
    }
    let under = |v: &[f64]| share(v, |e| e < -0.10);
    Accuracy {
        steps: steps.len(),
        median_abs_error: median_abs(&steps),
        under_10: under(&steps),
        cumulative_median_abs_error: median_abs(&cumulative),
        cumulative_under_10: under(&cumulative),
    }
}

fn median_abs(v: &[f64]) -> f64 {
    let mut a: Vec<f64> = v.iter().map(|e| e.abs()).collect();
    a.sort_by(f64::total_cmp);
    match a.len() {
        0 => 0.0,
        n if n % 2 == 1 => a[n / 2],
        n => (a[n / 2 - 1] + a[n / 2]) / 2.0,
    }
}

fn share(v: &[f64], f: impl Fn(f64) -> bool) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.iter().filter(|e| f(**e)).count() as f64 / v.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accuracy_of_known_errors() {
        let g = |provider, counted| Growth { provider, counted };
        let a = accuracy(&[vec![g(1000, 800), g(1000, 1000), g(4000, 4400)]]);
        assert_eq!(a.steps, 3);
        assert!((a.median_abs_error - 0.1).abs() < 1e-9);
        assert!((a.under_10 - 1.0 / 3.0).abs() < 1e-9);
        // Running totals from 5,000 provider tokens on: 6200 / 6000.
        assert!((a.cumulative_median_abs_error - 0.2 / 6.0).abs() < 1e-9);
        assert_eq!(a.cumulative_under_10, 0.0);
    }
}
