//! Online calibration: a per-conversation correction from abridge's count
//! to the provider's, learned from the prompt tokens each response reports.
//!
//! The estimators are fitted on recorded runs, but an agent's provider may
//! count its own way (a system prompt abridge never sees, injected
//! reminders, hidden thinking). After every response that reports usage,
//! the ratio of the provider's prompt tokens to abridge's count of the same
//! prompt updates a smoothed factor; triggers, targets and the status
//! message then work in the provider's units.

use abridge_tokens::{Calibrated, Counted, Reported};
use serde::{Deserialize, Serialize};

/// The learned factor (1.0 until a response has reported usage).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    factor: f64,
    samples: u32,
}

impl Default for Calibration {
    fn default() -> Self {
        Calibration {
            factor: 1.0,
            samples: 0,
        }
    }
}

/// Weight of the newest observation in the smoothed factor.
const ALPHA: f64 = 0.3;
/// Prompts smaller than this say too little about the ratio.
const MIN_TOKENS: u64 = 500;

impl Calibration {
    /// Provider tokens per abridge token.
    pub fn factor(&self) -> f64 {
        self.factor
    }

    /// Responses learned from.
    pub fn samples(&self) -> u32 {
        self.samples
    }

    /// Learns from one response: the provider counted `reported` prompt
    /// tokens where abridge counted `counted`. The first observation is
    /// taken as it is; later ones are smoothed. A ratio outside 0.25–4 is
    /// taken for a mismatch (another prompt, a cached count) and ignored.
    pub fn observe(&mut self, counted: Counted, reported: Reported) {
        let (counted, reported) = (counted.get(), reported.get());
        if counted < MIN_TOKENS || reported == 0 {
            return;
        }
        let ratio = reported as f64 / counted as f64;
        if !(0.25..=4.0).contains(&ratio) {
            return;
        }
        self.factor = if self.samples == 0 {
            ratio
        } else {
            ALPHA * ratio + (1.0 - ALPHA) * self.factor
        };
        self.samples += 1;
    }

    /// This calibration for a history of `now` tokens that extends one the
    /// provider counted as `reported` where abridge counted `last`: the
    /// provider's count of the prefix stands and only what was added is
    /// estimated, so a history riding just under a limit is not misjudged
    /// by the smoothed factor's error on all of it. What the provider has
    /// not counted yet is never taken for less than abridge counts it: the
    /// factor is an average, and new content (a log, a page) may count
    /// above it.
    pub fn anchored(&self, now: Counted, last: Counted, reported: Reported) -> Calibration {
        let (now, last, reported) = (now.get(), last.get(), reported.get());
        if now < last || now < MIN_TOKENS || reported == 0 {
            return *self;
        }
        let estimate = reported as f64 + (now - last) as f64 * self.factor.max(1.0);
        let factor = estimate / now as f64;
        if !(0.25..=4.0).contains(&(factor / self.factor)) {
            return *self;
        }
        Calibration {
            factor,
            samples: self.samples,
        }
    }

    /// abridge's count in the provider's units (rounded up).
    pub fn apply(&self, counted: Counted) -> Calibrated {
        Calibrated::new((counted.get() as f64 * self.factor).ceil() as u64)
    }

    /// A figure in the provider's units as abridge counts it (rounded down,
    /// so a target is never overshot).
    pub fn unapply(&self, provider: Calibrated) -> Counted {
        Counted::new((provider.get() as f64 / self.factor).floor() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn learns_a_smoothed_factor_and_ignores_mismatches() {
        let mut c = Calibration::default();
        assert_eq!(c.apply(Counted::new(1_000)), Calibrated::new(1_000));
        c.observe(Counted::new(10_000), Reported::new(13_000));
        assert!((c.factor() - 1.3).abs() < 1e-9);
        c.observe(Counted::new(10_000), Reported::new(12_000));
        assert!((c.factor() - (0.3 * 1.2 + 0.7 * 1.3)).abs() < 1e-9);
        c.observe(Counted::new(10_000), Reported::new(90_000)); // 9×: not the same prompt
        c.observe(Counted::new(100), Reported::new(300)); // too small to tell
        assert_eq!(c.samples(), 2);
        let f = c.factor();
        assert_eq!(
            c.apply(Counted::new(100_000)),
            Calibrated::new((100_000.0 * f).ceil() as u64)
        );
        assert!(c.apply(c.unapply(Calibrated::new(60_000))) <= Calibrated::new(60_001));
    }

    #[test]
    fn an_anchored_calibration_keeps_the_providers_count_of_the_prefix() {
        let mut c = Calibration::default();
        c.observe(Counted::new(20_000), Reported::new(20_000));
        // The provider counted the last prompt 1% over the factor's guess.
        let a = c.anchored(
            Counted::new(25_000),
            Counted::new(20_000),
            Reported::new(20_200),
        );
        assert_eq!(a.apply(Counted::new(25_000)), Calibrated::new(25_200));
        // Where abridge counts more than the provider, what was added is
        // still taken at abridge's count.
        let mut over = Calibration::default();
        over.observe(Counted::new(20_000), Reported::new(14_000));
        let a = over.anchored(
            Counted::new(25_000),
            Counted::new(20_000),
            Reported::new(14_000),
        );
        assert_eq!(a.apply(Counted::new(25_000)), Calibrated::new(19_000));
        assert_eq!(a.samples(), c.samples());
        // A history that does not grow from it says nothing of it.
        assert_eq!(
            c.anchored(
                Counted::new(15_000),
                Counted::new(20_000),
                Reported::new(20_200)
            ),
            c
        );
    }
}
