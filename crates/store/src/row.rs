//! A snapshot as the columns every SQL store writes.

use abridge::SnapshotId;
use abridge::recall::{Handle, Original, OriginalKind, Piece, StoredOriginal};
use abridge::{PolicyKind, Report, SnapshotData};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::parts::{PartHash, StoredBody};
use crate::{Error, Result};

/// One snapshot's columns, its bodies in parts, and its originals.
#[derive(Debug)]
pub(crate) struct SnapshotRow {
    pub(crate) model: Option<String>,
    pub(crate) family: &'static str,
    pub(crate) tokens_before: i64,
    pub(crate) tokens_after: i64,
    /// The same two in the provider's units (through the report's calibration).
    pub(crate) provider_tokens_before: i64,
    pub(crate) provider_tokens_after: i64,
    pub(crate) target: Option<i64>,
    pub(crate) summarizer: Option<String>,
    pub(crate) briefing: Option<String>,
    pub(crate) attempts: String,
    pub(crate) report: String,
    pub(crate) config: String,
    /// The history before, and after ([`SIDES`] order).
    pub(crate) bodies: [StoredBody; 2],
    pub(crate) dropped_iterations: i64,
    pub(crate) originals: Vec<OriginalRow>,
}

/// A snapshot's bodies in parts: `snapshot_parts.side` 0 and 1.
pub(crate) const SIDES: [&str; 2] = ["history before", "history after"];

/// Where a snapshot row's bodies are (its `bodies` column).
pub(crate) const BODIES_IN_COLUMNS: i64 = 0;
/// In `parts`, listed in `snapshot_parts`.
pub(crate) const BODIES_IN_PARTS: i64 = 1;

impl SnapshotRow {
    /// The columns of `s`.
    pub(crate) fn of(s: &SnapshotData<'_>) -> Result<SnapshotRow> {
        let briefing = s.report.briefing_text(s.after, &s.config.summary.wrapper);
        Ok(SnapshotRow {
            model: s.before.model.clone(),
            family: s.before.family.as_str(),
            tokens_before: int(s.report.tokens_before.get()),
            tokens_after: int(s.report.tokens_after.get()),
            provider_tokens_before: int(s.report.calibration.apply(s.report.tokens_before).get()),
            provider_tokens_after: int(s.report.calibration.apply(s.report.tokens_after).get()),
            target: s.report.target.map(|t| int(t.get())),
            summarizer: s.report.summarizer.clone(),
            briefing,
            attempts: to_json("attempts", &s.report.attempts)?,
            report: to_json("report", s.report)?,
            config: to_json("config", s.config)?,
            bodies: [StoredBody::of(s.before)?, StoredBody::of(s.after)?],
            dropped_iterations: dropped(s.report) as i64,
            originals: OriginalRow::all(s)?,
        })
    }

    /// Where the items go in both bodies' envelopes.
    pub(crate) fn history_key(&self) -> Option<&'static str> {
        self.bodies[0].history_key
    }

    /// Each distinct part of both bodies once: its hash and text.
    pub(crate) fn distinct_parts(&self) -> Vec<(&PartHash, &str)> {
        let mut seen = std::collections::HashSet::new();
        self.bodies
            .iter()
            .flat_map(|b| &b.parts)
            .filter(|(h, _)| seen.insert(*h))
            .map(|(h, t)| (h, t.as_str()))
            .collect()
    }

    /// Every part of both bodies in order: side, position, hash.
    pub(crate) fn listing(&self) -> impl Iterator<Item = (i64, i64, &PartHash)> {
        self.bodies.iter().enumerate().flat_map(|(side, b)| {
            b.parts
                .iter()
                .enumerate()
                .map(move |(at, (h, _))| (side as i64, at as i64, h))
        })
    }
}

/// Iterations the compaction dropped.
fn dropped(r: &Report) -> usize {
    r.policies
        .iter()
        .filter(|p| p.policy == PolicyKind::DropIterations)
        .map(|p| p.items)
        .sum()
}

pub(crate) fn to_json<T: Serialize + ?Sized>(what: &'static str, v: &T) -> Result<String> {
    serde_json::to_string(v).map_err(|e| Error::Serialize {
        what,
        message: e.to_string(),
    })
}

/// A stored JSON column of snapshot `id`, parsed.
pub(crate) fn parse<T: DeserializeOwned>(id: SnapshotId, what: &str, text: &str) -> Result<T> {
    serde_json::from_str(text).map_err(|e| Error::Corrupt {
        id,
        what: format!("stored {what} does not parse: {e}"),
    })
}

/// A count as a database integer (saturating: no count comes near).
pub(crate) fn int(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// A database integer as a count (a negative one, never written, as 0).
pub(crate) fn count(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

/// One original's columns: its handle, kind, label and pieces (JSON).
#[derive(Debug)]
pub(crate) struct OriginalRow {
    pub(crate) handle: String,
    pub(crate) kind: String,
    pub(crate) label: String,
    pub(crate) body: String,
}

impl OriginalRow {
    /// The columns of every original a snapshot names.
    pub(crate) fn all(s: &SnapshotData<'_>) -> Result<Vec<OriginalRow>> {
        s.originals
            .iter()
            .map(|o| {
                Ok(OriginalRow {
                    handle: o.handle.to_string(),
                    kind: to_json("original kind", &o.kind)?
                        .trim_matches('"')
                        .to_owned(),
                    label: o.label.clone(),
                    body: to_json("original", &o.pieces)?,
                })
            })
            .collect()
    }

    /// The original back from its columns, with the session that kept it.
    pub(crate) fn into_stored(self, source: Option<String>) -> Result<StoredOriginal> {
        Ok(StoredOriginal {
            original: self.into_original()?,
            source,
        })
    }

    /// The original back from its columns.
    pub(crate) fn into_original(self) -> Result<Original> {
        let corrupt = |what: String| Error::CorruptOriginal {
            handle: self.handle.clone(),
            what,
        };
        let handle = Handle::parse(&self.handle).ok_or_else(|| corrupt("not a handle".into()))?;
        let kind: OriginalKind = serde_json::from_value(self.kind.clone().into())
            .map_err(|e| corrupt(format!("kind {:?}: {e}", self.kind)))?;
        let pieces: Vec<Piece> =
            serde_json::from_str(&self.body).map_err(|e| corrupt(format!("content: {e}")))?;
        Ok(Original {
            handle,
            kind,
            label: self.label,
            pieces,
        })
    }
}
