//! What the pages show, read from the store: sessions (snapshots grouped
//! by source), one session's compactions, one compaction in full.

use std::collections::HashMap;

use abridge::Report;
use abridge_model::{Conversation, Role, decode_value, fingerprint};
use abridge_store::{Entry, SnapshotStore};
use abridge_tokens::{Registry, TokenCounter};
use serde::Deserialize;

/// Sessions listed per page.
pub(crate) const PAGE: usize = 50;

/// How the sessions page is sorted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionSort {
    /// Latest compaction first.
    #[default]
    Last,
    /// By source name.
    Source,
    /// By model name.
    Model,
    /// Most compactions first.
    Compactions,
    /// Largest context after the last compaction first.
    Tokens,
    /// Most tokens saved first.
    Saved,
}

impl SessionSort {
    /// Names sort A→Z by default, figures and dates largest first.
    pub fn ascending_by_default(self) -> bool {
        matches!(self, SessionSort::Source | SessionSort::Model)
    }
}

impl SessionQuery {
    /// Whether the list is ascending.
    pub fn ascending(&self) -> bool {
        self.asc.unwrap_or(self.sort.ascending_by_default())
    }
}

/// The sessions page's query: filter, sort, page.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct SessionQuery {
    /// Substring of the source or the model.
    pub q: String,
    /// Sort key.
    pub sort: SessionSort,
    /// Ascending (`true`) or descending; absent: names ascending, figures
    /// and dates descending.
    pub asc: Option<bool>,
    /// Page number, from 0.
    pub page: usize,
}

/// One session (a proxy session, or a conversation compacted by the CLI or
/// the library) as the list shows it.
#[derive(Debug, Clone)]
pub struct SessionSummary {
    /// The session id or the conversation's label.
    pub source: String,
    /// Model of its last compaction.
    pub model: Option<String>,
    /// The model's context window, when known.
    pub window: Option<u64>,
    /// Compactions recorded.
    pub compactions: usize,
    /// Tokens before and after its last compaction.
    pub last_before: u64,
    /// Tokens sent after its last compaction.
    pub last_after: u64,
    /// Tokens saved, summed over its compactions.
    pub saved: u64,
    /// What the last compaction saves on each request at the model's input
    /// price, in dollars (when the price is known).
    pub saving_per_request: Option<f64>,
    /// When it last compacted.
    pub last_at: String,
    /// Its last snapshot.
    pub last_id: i64,
}

/// A page of sessions and how many match in all.
pub(crate) struct SessionPage {
    pub(crate) rows: Vec<SessionSummary>,
    pub(crate) total: usize,
}

fn source_of(e: &Entry) -> String {
    e.source.clone().unwrap_or_else(|| "(no source)".to_owned())
}

/// Every session matching the query, sorted, one page of it.
pub(crate) fn sessions(store: &dyn SnapshotStore, q: &SessionQuery) -> Result<SessionPage, String> {
    let entries = store.list(usize::MAX).map_err(|e| e.to_string())?;
    let registry = Registry::new();
    let mut by: HashMap<String, SessionSummary> = HashMap::new();
    // Newest first: the first entry seen of a source is its last compaction.
    for e in &entries {
        let saved = e.tokens_before.saturating_sub(e.tokens_after);
        let s = by.entry(source_of(e)).or_insert_with(|| {
            let info = e.model.as_deref().and_then(|m| registry.lookup(m));
            SessionSummary {
                source: source_of(e),
                model: e.model.clone(),
                window: info.map(|i| i.context_window),
                compactions: 0,
                last_before: e.tokens_before,
                last_after: e.tokens_after,
                saved: 0,
                saving_per_request: info.and_then(|i| i.price).map(|p| p.prompt_cost(0, saved)),
                last_at: e.created_at.clone(),
                last_id: e.id.0,
            }
        });
        s.compactions += 1;
        s.saved += saved;
    }
    let needle = q.q.to_lowercase();
    let mut rows: Vec<SessionSummary> = by
        .into_values()
        .filter(|s| {
            needle.is_empty()
                || s.source.to_lowercase().contains(&needle)
                || s.model
                    .as_deref()
                    .is_some_and(|m| m.to_lowercase().contains(&needle))
        })
        .collect();
    let ascending = q.ascending();
    rows.sort_by(|a, b| {
        let up = match q.sort {
            SessionSort::Last => a.last_id.cmp(&b.last_id),
            SessionSort::Source => a.source.cmp(&b.source),
            SessionSort::Model => a.model.cmp(&b.model),
            SessionSort::Compactions => a.compactions.cmp(&b.compactions),
            SessionSort::Tokens => a.last_after.cmp(&b.last_after),
            SessionSort::Saved => a.saved.cmp(&b.saved),
        };
        let ordered = if ascending { up } else { up.reverse() };
        ordered.then(b.last_id.cmp(&a.last_id))
    });
    let total = rows.len();
    let rows = rows.into_iter().skip(q.page * PAGE).take(PAGE).collect();
    Ok(SessionPage { rows, total })
}

/// One session: its compactions, oldest first.
pub(crate) struct SessionDetail {
    pub(crate) source: String,
    pub(crate) entries: Vec<Entry>,
    /// Trigger and target of its last compaction's config, when set.
    pub(crate) trigger: Option<u64>,
    pub(crate) target: Option<u64>,
}

pub(crate) fn session(store: &dyn SnapshotStore, source: &str) -> Result<SessionDetail, String> {
    let mut entries: Vec<Entry> = store
        .list(usize::MAX)
        .map_err(|e| e.to_string())?
        .into_iter()
        .filter(|e| source_of(e) == source)
        .collect();
    let Some(last) = entries.first() else {
        return Err(format!("no compaction recorded for session {source}"));
    };
    let snap = store.get(last.id).map_err(|e| e.to_string())?;
    entries.reverse();
    Ok(SessionDetail {
        source: source.to_owned(),
        trigger: snap.config.trigger.max_tokens,
        target: snap.report.target,
        entries,
    })
}

/// One message as the diff lists it.
pub(crate) struct Line {
    pub(crate) role: Role,
    pub(crate) kind: String,
    pub(crate) tokens: u64,
    pub(crate) text: String,
    /// Not on the other side.
    pub(crate) changed: bool,
}

/// One compaction in full.
pub(crate) struct CompactionDetail {
    pub(crate) entry: Entry,
    pub(crate) report: Report,
    pub(crate) briefing: Option<String>,
    pub(crate) before: Vec<Line>,
    pub(crate) after: Vec<Line>,
}

pub(crate) fn compaction(store: &dyn SnapshotStore, id: i64) -> Result<CompactionDetail, String> {
    let snap = store
        .get(abridge::SnapshotId(id))
        .map_err(|e| e.to_string())?;
    let format = Conversation::new(snap.entry.family).format;
    let decode = |v: &serde_json::Value| {
        decode_value(v.clone(), format)
            .map_err(|e| format!("snapshot {id}: stored history does not decode: {e}"))
            .map(|mut c| c.remove(0))
    };
    let (before, after) = (decode(&snap.before)?, decode(&snap.after)?);
    let kind = snap
        .config
        .tokenizer
        .unwrap_or_else(|| Registry::new().tokenizer_for(snap.entry.model.as_deref()));
    let mut counter = TokenCounter::new(kind);
    // Every wire field counts (ids too): two `cargo test` calls are two messages.
    let hashes = |c: &Conversation| -> Vec<u64> {
        c.messages
            .iter()
            .map(|m| fingerprint(std::slice::from_ref(m)))
            .collect()
    };
    let (hb, ha) = (hashes(&before), hashes(&after));
    let before = lines(&before, &hb, &ha, &mut counter);
    let after = lines(&after, &ha, &hb, &mut counter);
    Ok(CompactionDetail {
        entry: snap.entry,
        report: snap.report,
        briefing: snap.briefing,
        before,
        after,
    })
}

fn lines(conv: &Conversation, own: &[u64], other: &[u64], counter: &mut TokenCounter) -> Vec<Line> {
    let other: std::collections::HashSet<u64> = other.iter().copied().collect();
    conv.messages
        .iter()
        .zip(own)
        .map(|(m, h)| Line {
            role: m.role.clone(),
            kind: kind_of(m),
            tokens: counter.count_message(m).total() as u64,
            text: m.text_content(),
            changed: !other.contains(h),
        })
        .collect()
}

/// What a message holds, in a few words.
fn kind_of(m: &abridge_model::Message) -> String {
    let calls: Vec<&str> = m.tool_calls().map(|c| c.name.as_str()).collect();
    if !calls.is_empty() {
        return format!("calls {}", calls.join(", "));
    }
    if m.tool_results().next().is_some() {
        return "tool result".to_owned();
    }
    if m.text_content().contains("<compacted-history>") {
        return "briefing".to_owned();
    }
    "text".to_owned()
}
