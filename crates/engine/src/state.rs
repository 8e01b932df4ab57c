//! What a thread keeps across restarts.

use std::collections::BTreeMap;

use abridge_tokens::Counted;
use serde::{Deserialize, Serialize};

use crate::calibration::Calibration;
use crate::carryover::Carryover;
use crate::recall::Handle;
use crate::summarize_step::KeptBriefing;

/// What a thread keeps across restarts: everything but its caches.
/// Serialized as JSON with a format version; the carried-over messages are
/// kept by the owner in their conversation's wire format (a store writes
/// them as a request body), so they are not part of the JSON.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ThreadState {
    /// Format version of this serialization ([`ThreadState::VERSION`]).
    #[serde(default)]
    pub format: u32,
    /// The correction to the provider's count learned so far, for
    /// [`model`](ThreadState::model).
    #[serde(default)]
    pub calibration: Calibration,
    /// The model of the last turn, whose calibration is `calibration`
    /// (none before the first turn, and in states stored before it was).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// What was learned for the other models the thread's turns named: a
    /// session that switches models takes each one's back.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub calibrations: BTreeMap<String, Calibration>,
    /// The compaction carried over to the next turn, if any.
    #[serde(skip)]
    pub carryover: Option<Carryover>,
    /// Tokens of the messages the carried compaction replaced, as they
    /// were (what its session's client keeps sending).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub carried_source: Option<Counted>,
    /// Iterations of the history when it last compacted (the cadence counts
    /// from there).
    #[serde(default)]
    pub compacted_at: usize,
    /// abridge's count of the history last sent (what the next reported
    /// usage is about).
    #[serde(default)]
    pub last_sent: Option<Counted>,
    /// What briefings should focus on.
    #[serde(default)]
    pub focus: Option<String>,
    /// The last briefing this thread made, as data (the offline sheet): a
    /// chained compaction merges it rather than parse its text back.
    #[serde(default)]
    pub briefing: Option<KeptBriefing>,
    /// Turns the thread has taken that checked the triggers (a status
    /// note's cadence counts them, across restarts and replicas).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub turns: u64,
    /// The handles of the originals its compactions kept, newest last (at
    /// most [`ThreadState::HANDLES`]): what the recall tool's search reads.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub handles: Vec<Handle>,
}

impl ThreadState {
    /// The format written by this release.
    pub const VERSION: u32 = 1;

    /// Most handles a thread keeps for the recall tool's search.
    pub const HANDLES: usize = 2048;

    /// Keeps `handles` (a compaction's) for the search, each once, the
    /// oldest going past [`HANDLES`](Self::HANDLES).
    pub(crate) fn keep_handles(&mut self, handles: &[Handle]) {
        let new: std::collections::HashSet<&Handle> = handles.iter().collect();
        self.handles.retain(|h| !new.contains(h));
        self.handles.extend(handles.iter().cloned());
        let over = self.handles.len().saturating_sub(Self::HANDLES);
        self.handles.drain(..over);
    }

    /// Reads a stored state: this release's JSON, or the bare calibration
    /// that stores wrote before threads were persisted whole.
    pub fn from_json(json: &str) -> serde_json::Result<ThreadState> {
        let state: ThreadState = serde_json::from_str(json)?;
        if state.format > 0 {
            return Ok(state);
        }
        Ok(ThreadState {
            calibration: serde_json::from_str(json)?,
            ..ThreadState::default()
        })
    }

    /// The state as JSON (the carryover's messages aside).
    pub fn to_json(&self) -> serde_json::Result<String> {
        serde_json::to_string(&ThreadState {
            format: ThreadState::VERSION,
            carryover: None,
            ..self.clone()
        })
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    use abridge_tokens::Reported;

    use super::*;

    #[test]
    fn a_state_round_trips_and_a_bare_calibration_reads_as_one() {
        let mut calibration = Calibration::default();
        calibration.observe(Counted::new(10_000), Reported::new(12_500));
        let state = ThreadState {
            calibration,
            compacted_at: 7,
            last_sent: Some(Counted::new(41_000)),
            focus: Some("the flaky test".into()),
            ..ThreadState::default()
        };
        let json = state.to_json().unwrap();
        let back = ThreadState::from_json(&json).unwrap();
        assert_eq!(back.format, ThreadState::VERSION);
        assert_eq!(ThreadState { format: 0, ..back }, state);
        // What stores held before threads were stored whole.
        let old = serde_json::to_string(&calibration).unwrap();
        let migrated = ThreadState::from_json(&old).unwrap();
        assert_eq!(migrated.calibration, calibration);
        assert_eq!((migrated.compacted_at, migrated.last_sent), (0, None));
        assert!(ThreadState::from_json(r#"{"factor": "high"}"#).is_err());
    }
}
