//! What the pages show, read from the store: sessions (snapshots grouped
//! by source), one session's compactions, one compaction in full.

use std::collections::HashMap;

use abridge::Report;
use abridge_model::{Conversation, Role, fingerprint};
use abridge_store::{Entry, SnapshotStore};
use abridge_tokens::{Calibrated, Registry, TokenCounter};
use serde::Deserialize;

/// Sessions listed per page.
pub(crate) const PAGE: usize = 50;

/// How the sessions page is sorted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionSort {
    /// Latest activity first.
    #[default]
    Last,
    /// By source name.
    Source,
    /// By model name.
    Model,
    /// Most requests first.
    Requests,
    /// Most compactions first.
    Compactions,
    /// Largest context (last request) first.
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
    /// Its model.
    pub model: Option<String>,
    /// The model's context window, when known.
    pub window: Option<u64>,
    /// Requests logged (`None`: the store has no request log for it).
    pub requests: Option<u64>,
    /// Tokens of its last request (else: after its last compaction), in
    /// the provider's units either way.
    pub context: Calibrated,
    /// Its last request was sent compacted (else: it has a compaction).
    pub compacted: bool,
    /// Compactions recorded.
    pub compactions: usize,
    /// Tokens saved, summed over its compactions, in the provider's units.
    pub saved: Calibrated,
    /// The last request at the model's input price, in dollars.
    pub cost_per_request: Option<f64>,
    /// What its last compaction saves on each request, in dollars.
    pub saving_per_request: Option<f64>,
    /// Its last activity (request or compaction), UTC.
    pub last_at: String,
    /// Its last snapshot.
    pub last_snapshot: Option<i64>,
}

/// A page of sessions and how many match in all.
pub(crate) struct SessionPage {
    pub(crate) rows: Vec<SessionSummary>,
    pub(crate) total: usize,
}

fn source_of(e: &Entry) -> String {
    e.source.clone().unwrap_or_else(|| "(no source)".to_owned())
}

fn summary(source: String, model: Option<String>, registry: &Registry) -> SessionSummary {
    let window = model
        .as_deref()
        .and_then(|m| registry.lookup(m))
        .map(|i| i.context_window);
    SessionSummary {
        source,
        model,
        window,
        requests: None,
        context: Calibrated::ZERO,
        compacted: false,
        compactions: 0,
        saved: Calibrated::ZERO,
        cost_per_request: None,
        saving_per_request: None,
        last_at: String::new(),
        last_snapshot: None,
    }
}

/// What a compaction cleared, in the provider's units.
fn cleared(e: &Entry) -> Calibrated {
    e.provider_tokens_before
        .saturating_sub(e.provider_tokens_after)
}

/// Every session, from the snapshots and the request log.
fn all_sessions(store: &dyn SnapshotStore) -> Result<Vec<SessionSummary>, String> {
    let entries = store.list(usize::MAX).map_err(|e| e.to_string())?;
    let stats = store.request_stats().map_err(|e| e.to_string())?;
    let registry = Registry::new();
    let mut by: HashMap<String, SessionSummary> = HashMap::new();
    let mut last_saved: HashMap<String, Calibrated> = HashMap::new();
    // Newest first: the first entry seen of a source is its last compaction.
    for e in &entries {
        let saved = cleared(e);
        let s = by.entry(source_of(e)).or_insert_with(|| {
            last_saved.insert(source_of(e), saved);
            let mut s = summary(source_of(e), e.model.clone(), &registry);
            s.context = e.provider_tokens_after;
            s.compacted = true;
            s.last_at = e.created_at.clone();
            s.last_snapshot = Some(e.id.0);
            s
        });
        s.compactions += 1;
        s.saved += saved;
    }
    for (source, st) in stats {
        let s = by
            .entry(source.clone())
            .or_insert_with(|| summary(source.clone(), st.last.model.clone(), &registry));
        s.requests = Some(st.requests);
        s.context = st.last.tokens;
        s.compacted = st.last.compacted;
        if st.last.at > s.last_at {
            s.last_at = st.last.at.clone();
        }
    }
    for s in by.values_mut() {
        let price = s
            .model
            .as_deref()
            .and_then(|m| registry.lookup(m))
            .and_then(|i| i.price);
        s.cost_per_request = price.map(|p| p.prompt_cost(Calibrated::ZERO, s.context));
        let saved = last_saved.get(&s.source).copied().unwrap_or_default();
        s.saving_per_request = price
            .filter(|_| s.compacted)
            .map(|p| p.prompt_cost(Calibrated::ZERO, saved));
    }
    Ok(by.into_values().collect())
}

/// Every session matching the query, sorted, one page of it.
pub(crate) fn sessions(store: &dyn SnapshotStore, q: &SessionQuery) -> Result<SessionPage, String> {
    let needle = q.q.to_lowercase();
    let mut rows: Vec<SessionSummary> = all_sessions(store)?
        .into_iter()
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
            SessionSort::Last => a.last_at.cmp(&b.last_at),
            SessionSort::Source => a.source.cmp(&b.source),
            SessionSort::Model => a.model.cmp(&b.model),
            SessionSort::Requests => a.requests.cmp(&b.requests),
            SessionSort::Compactions => a.compactions.cmp(&b.compactions),
            SessionSort::Tokens => a.context.cmp(&b.context),
            SessionSort::Saved => a.saved.cmp(&b.saved),
        };
        let ordered = if ascending { up } else { up.reverse() };
        ordered
            .then(b.last_at.cmp(&a.last_at))
            .then(a.source.cmp(&b.source))
    });
    let total = rows.len();
    let rows = rows.into_iter().skip(q.page * PAGE).take(PAGE).collect();
    Ok(SessionPage { rows, total })
}

/// One session: its compactions, oldest first.
pub(crate) struct SessionDetail {
    pub(crate) source: String,
    pub(crate) entries: Vec<Entry>,
    /// Its logged requests, oldest first (the newest [`CHARTED`]).
    pub(crate) requests: Vec<abridge_store::RequestRecord>,
    /// Its trigger and target (the last request's, else the last
    /// compaction's), in the provider's units.
    pub(crate) trigger: Option<Calibrated>,
    pub(crate) target: Option<Calibrated>,
    /// The charted requests at the model's input price, in dollars.
    pub(crate) cost: Option<f64>,
    /// What compaction kept off those requests, in dollars: each request
    /// sent compacted saves what the compaction before it cleared.
    pub(crate) saving: Option<f64>,
}

/// Cost and saving of a session's requests at its model's input price.
fn money(
    entries: &[Entry],
    requests: &[abridge_store::RequestRecord],
) -> (Option<f64>, Option<f64>) {
    let model = requests.iter().rev().find_map(|r| r.model.as_deref());
    let Some(price) = model
        .and_then(|m| Registry::new().lookup(m))
        .and_then(|i| i.price)
    else {
        return (None, None);
    };
    let cleared: HashMap<i64, Calibrated> = entries.iter().map(|e| (e.id.0, cleared(e))).collect();
    let (mut sent, mut saved, mut current) = (Calibrated::ZERO, Calibrated::ZERO, Calibrated::ZERO);
    for r in requests {
        // What the provider said it read, else abridge's calibrated count.
        sent += r.usage.map_or(r.tokens, Calibrated::from_reported);
        if let Some(id) = r.snapshot {
            current = cleared.get(&id.0).copied().unwrap_or(current);
        }
        if r.compacted {
            saved += current;
        }
    }
    (
        Some(price.prompt_cost(Calibrated::ZERO, sent)),
        Some(price.prompt_cost(Calibrated::ZERO, saved)),
    )
}

/// Requests a session's chart shows (the newest).
pub(crate) const CHARTED: usize = 2_000;

pub(crate) fn session(store: &dyn SnapshotStore, source: &str) -> Result<SessionDetail, String> {
    let mut entries: Vec<Entry> = store
        .list(usize::MAX)
        .map_err(|e| e.to_string())?
        .into_iter()
        .filter(|e| source_of(e) == source)
        .collect();
    entries.reverse();
    let requests = store.requests(source, CHARTED).map_err(|e| e.to_string())?;
    let (mut trigger, mut target) = match requests.last() {
        Some(r) => (r.trigger, r.target),
        None => (None, None),
    };
    if let Some(last) = entries.last().filter(|_| requests.is_empty()) {
        let snap = store.get(last.id).map_err(|e| e.to_string())?;
        trigger = snap.config.trigger.max_tokens.map(Calibrated::new);
        target = snap.report.target.map(|t| snap.report.calibration.apply(t));
    }
    if entries.is_empty() && requests.is_empty() {
        return Err(format!(
            "no request or compaction recorded for session {source}"
        ));
    }
    let (cost, saving) = money(&entries, &requests);
    Ok(SessionDetail {
        source: source.to_owned(),
        entries,
        requests,
        trigger,
        target,
        cost,
        saving,
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
    let (before, after) = (
        snap.history().map_err(|e| e.to_string())?,
        snap.compacted().map_err(|e| e.to_string())?,
    );
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
    // A briefing is found by the report's index (after), or by the wrapper
    // the compaction was configured with (an earlier one, before).
    let wrapper = &snap.config.summary.wrapper;
    let earlier =
        |_: usize, text: &str| abridge::summarize::wrapper::unwrap(wrapper, text).is_some();
    let before = lines(&before, &hb, &ha, &mut counter, earlier);
    let after = lines(&after, &ha, &hb, &mut counter, |i, _| {
        snap.report.briefing == Some(i)
    });
    Ok(CompactionDetail {
        entry: snap.entry,
        report: snap.report,
        briefing: snap.briefing,
        before,
        after,
    })
}

/// The diff's lines of `conv`; `is_briefing(i, text)`: whether message `i`,
/// whose text it is given, is one.
fn lines(
    conv: &Conversation,
    own: &[u64],
    other: &[u64],
    counter: &mut TokenCounter,
    is_briefing: impl Fn(usize, &str) -> bool,
) -> Vec<Line> {
    let other: std::collections::HashSet<u64> = other.iter().copied().collect();
    conv.messages
        .iter()
        .zip(own)
        .enumerate()
        .map(|(i, (m, h))| {
            let text = m.text_content();
            Line {
                role: m.role.clone(),
                kind: match is_briefing(i, &text) {
                    true => "briefing".to_owned(),
                    false => kind_of(m),
                },
                tokens: counter.count_message(m).total().get(),
                text: text.into_owned(),
                changed: !other.contains(h),
            }
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
    "text".to_owned()
}
