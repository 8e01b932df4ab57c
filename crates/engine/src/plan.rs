//! A compaction as data: what to run, against which target, keeping how
//! much. The compactor builds one per evaluation — from its config for a
//! trigger or a forced compaction, or from an agent's request — and
//! executes it (`rewrite/`), so no evaluation mutates the config.

use abridge_tokens::Counted;

use crate::config::Config;
use crate::policy::{Policy, Step};
use crate::trigger::Reason;

/// One compaction to run.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Plan {
    /// Why it runs (reported).
    pub(crate) reason: Reason,
    /// Tokens to reach; without one, old content is clipped but no
    /// iteration is summarized or dropped.
    pub(crate) target: Option<Counted>,
    /// Steps in order; each stops as soon as the target is reached.
    pub(crate) steps: Vec<Step>,
    /// Fewest iterations the verbatim tail keeps.
    pub(crate) floor: usize,
    /// Most tokens the tail keeps above the floor.
    pub(crate) kept_budget: Counted,
    /// What briefings should focus on.
    pub(crate) focus: Option<String>,
    /// The tail may grow back into what an instant briefing leaves of the
    /// target (not when the agent asked for an exact tail).
    pub(crate) grow_tail: bool,
    /// Below the floor, the ladder (`rewrite/ladder.rs`) may shrink the tail and
    /// clip inside it (not when the agent asked for an exact tail).
    pub(crate) degrade: bool,
    /// The trigger that fired, when it is a size: the ladder stays under it
    /// rather than cut the newest results to reach the target.
    pub(crate) ceiling: Option<Counted>,
}

impl Plan {
    /// The configured pipeline, for `reason`, aiming at `target`, keeping at
    /// most `kept_budget` in the tail above the floor (both in abridge's count).
    pub(crate) fn configured(
        config: &Config,
        kept_budget: Counted,
        reason: Reason,
        target: Option<Counted>,
        focus: Option<String>,
    ) -> Plan {
        let mut steps = pipeline(config);
        if target.is_none() {
            // Without a target nothing says how far to go: clip only.
            steps.retain(|s| matches!(s, Step::Policy(p) if *p != Policy::DropIterations));
        }
        Plan {
            reason,
            target,
            steps,
            floor: config.budget.min_iterations,
            kept_budget,
            focus,
            grow_tail: true,
            degrade: true,
            ceiling: None,
        }
    }

    /// `budget.summarize_all`: everything before the last `floor`
    /// iterations goes into the briefing, whatever the target; any saving
    /// is enough.
    pub(crate) fn summarize_all(&mut self, config: &Config, tokens: Counted) {
        // A cadence gives no target, and the pipeline was cut to clipping.
        self.steps = pipeline(config);
        self.target = Some(tokens.saturating_sub(Counted::new(1)));
        self.kept_budget = Counted::ZERO;
        self.grow_tail = false;
    }

    /// An agent's `compact_history` request: everything before the last
    /// `keep_iterations` becomes a briefing (or is dropped when no
    /// summarizer gives one), whatever the triggers say.
    pub(crate) fn on_request(
        tokens: Counted,
        keep_iterations: usize,
        focus: Option<String>,
    ) -> Plan {
        Plan {
            reason: Reason::Forced,
            target: Some(tokens.saturating_sub(Counted::new(1))),
            steps: vec![Step::Summarize, Step::Policy(Policy::DropIterations)],
            floor: keep_iterations.max(1),
            kept_budget: Counted::ZERO,
            focus,
            grow_tail: false,
            degrade: false,
            ceiling: None,
        }
    }
}

/// The configured pipeline's steps, in order.
fn pipeline(config: &Config) -> Vec<Step> {
    config
        .policies
        .pipeline
        .iter()
        .map(|&k| Step::from(k))
        .collect()
}
