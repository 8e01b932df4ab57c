//! What a proxy remembers of a session between requests: its thread's
//! state — the compaction it carries over, the calibration it learned, its
//! cadence — so a restarted proxy (or another replica) sends the same
//! compacted prefix.

use abridge::model::{Conversation, Family, Wire, decode_value, encode};
use abridge::recall::{Handle, StoredOriginal};
use abridge::tokens::Counted;
use abridge::{Carryover, PrefixKey, SnapshotData, SnapshotId, ThreadState};
use rusqlite::{OptionalExtension, params};

use crate::{Error, Result, Store};

/// One session's state, as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionRecord {
    /// The session id: a digest, never a credential.
    pub id: String,
    /// Wire format of its requests (stored as its family; a Responses
    /// session is told by its carried body).
    pub wire: Wire,
    /// Model of its requests.
    pub model: Option<String>,
    /// Its thread's state: the compaction carried over to the next request
    /// (stored as a request body of `wire`), the calibration, the cadence.
    pub thread: ThreadState,
    /// How many times it was saved (0: never): another replica's save
    /// shows as a newer version.
    pub version: i64,
}

/// One write of a batch ([`SessionStore::write_all`]).
#[derive(Debug, Clone, Copy)]
pub enum Write<'a> {
    /// A compaction of session `.0`.
    Snapshot(&'a str, SnapshotData<'a>),
    /// A session's state.
    Session(&'a SessionRecord),
    /// A request's row of the log.
    Request(&'a crate::RequestRecord),
}

/// What a write of a batch gave back, in its order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// The snapshot's id.
    Snapshot(SnapshotId),
    /// The session's new version.
    Session(i64),
    /// The request's row.
    Request,
}

/// What a proxy keeps, whatever the database behind it: sessions, and a
/// snapshot of every compaction under the session's id.
pub trait SessionStore: Send {
    /// Records a compaction of session `source`.
    fn record_snapshot(&mut self, source: &str, snapshot: &SnapshotData<'_>) -> Result<SnapshotId>;
    /// The session with this id, if stored.
    fn load_session(&self, id: &str) -> Result<Option<SessionRecord>>;
    /// Stores (or replaces) a session; returns its new version.
    fn save_session(&mut self, record: &SessionRecord) -> Result<i64>;
    /// The stored version of a session, if stored.
    fn session_version(&self, id: &str) -> Result<Option<i64>>;
    /// Logs a request sent upstream (its `at` is set by the store).
    fn record_request(&mut self, request: &crate::RequestRecord) -> Result<()>;
    /// True when other processes write to the same store (replicas): a
    /// session in memory is then checked against its stored version on
    /// every request.
    fn shared(&self) -> bool {
        false
    }
    /// The original a handle names, if kept (for the proxy's recall tool),
    /// with the session that kept it.
    fn load_original(&self, handle: &Handle) -> Result<Option<StoredOriginal>>;
    /// The setting `name`: the stored value, or `fresh`, stored now, when
    /// there is none yet (the first of several replicas to ask sets it).
    fn setting_or(&mut self, name: &str, fresh: &str) -> Result<String>;
    /// Before a write: reconnects when the database it writes to is gone
    /// (an embedded file deleted or replaced). True when it did.
    fn reconnect_if_gone(&mut self) -> Result<bool> {
        Ok(false)
    }
    /// Another handle on the same database, for reads beside this one's
    /// writes; `None` when reads share this handle (a store in memory).
    fn reader(&self) -> Option<Box<dyn SessionStore>> {
        None
    }
    /// Writes a batch, in one transaction where the database has them (all
    /// land, or none); what each gave back, in order. The default writes
    /// them one by one.
    fn write_all(&mut self, writes: &[Write<'_>]) -> Result<Vec<Written>> {
        writes
            .iter()
            .map(|w| {
                Ok(match w {
                    Write::Snapshot(source, data) => {
                        Written::Snapshot(self.record_snapshot(source, data)?)
                    }
                    Write::Session(record) => Written::Session(self.save_session(record)?),
                    Write::Request(request) => {
                        self.record_request(request)?;
                        Written::Request
                    }
                })
            })
            .collect()
    }
}

/// A carryover's messages as a request body of `wire`, for storage.
pub(crate) fn carried_body(wire: Wire, carry: &Carryover) -> Result<String> {
    let mut conv = Conversation::new(wire.family());
    conv.format = wire.format();
    conv.messages = carry.messages().to_vec();
    encode(&conv)
        .map(|v| v.to_string())
        .map_err(|e| Error::Serialize {
            what: "carried messages",
            message: e.to_string(),
        })
}

/// A carryover back from its stored parts, and the wire format of its body.
pub(crate) fn carryover_from(
    id: &str,
    family: Family,
    source: PrefixKey,
    body: &str,
    tokens: Counted,
) -> Result<(Carryover, Wire)> {
    let corrupt = |what: String| Error::CorruptSession {
        id: id.to_owned(),
        what,
    };
    let value = serde_json::from_str(body).map_err(|e| corrupt(format!("body: {e}")))?;
    let format = crate::stored_format(family, &value);
    let mut convs = decode_value(value, format).map_err(|e| corrupt(format!("body: {e}")))?;
    let messages = convs.pop().map(|c| c.messages).unwrap_or_default();
    Ok((
        Carryover::from_parts(source, messages, tokens),
        Wire::of(format),
    ))
}

impl SessionStore for Store {
    fn record_snapshot(&mut self, source: &str, snapshot: &SnapshotData<'_>) -> Result<SnapshotId> {
        self.record_as(source, snapshot)
    }

    fn load_original(&self, handle: &Handle) -> Result<Option<StoredOriginal>> {
        self.original(handle)
    }

    fn reconnect_if_gone(&mut self) -> Result<bool> {
        self.reopen_if_moved()
    }

    fn reader(&self) -> Option<Box<dyn SessionStore>> {
        // The file in WAL mode: a connection of its own reads beside the writer.
        let path = self.file_path()?;
        // One that cannot open leaves the reads to the writer's handle.
        Store::open(path)
            .map(|s| Box::new(s) as Box<dyn SessionStore>)
            .ok()
    }

    fn setting_or(&mut self, name: &str, fresh: &str) -> Result<String> {
        self.conn()
            .execute(
                "INSERT OR IGNORE INTO settings (name, value) VALUES (?1, ?2)",
                params![name, fresh],
            )
            .map_err(|e| self.sql(e))?;
        self.conn()
            .query_row(
                "SELECT value FROM settings WHERE name = ?1",
                params![name],
                |r| r.get(0),
            )
            .map_err(|e| self.sql(e))
    }

    fn record_request(&mut self, request: &crate::RequestRecord) -> Result<()> {
        self.insert_request(request)
    }

    fn load_session(&self, id: &str) -> Result<Option<SessionRecord>> {
        let row = self
            .conn()
            .query_row(
                "SELECT family, model, source_len, source_fingerprint, tokens, body, calibration,
                    version FROM sessions WHERE id = ?1",
                params![id],
                |r| {
                    Ok(StoredParts {
                        family: r.get(0)?,
                        model: r.get(1)?,
                        len: r.get(2)?,
                        fingerprint: r.get(3)?,
                        tokens: r.get(4)?,
                        body: r.get(5)?,
                        state: r.get(6)?,
                        version: r.get(7)?,
                    })
                },
            )
            .optional()
            .map_err(|e| self.sql(e))?;
        row.map(|parts| record_from(id, parts)).transpose()
    }

    fn session_version(&self, id: &str) -> Result<Option<i64>> {
        self.conn()
            .query_row(
                "SELECT version FROM sessions WHERE id = ?1",
                params![id],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.sql(e))
    }

    fn save_session(&mut self, record: &SessionRecord) -> Result<i64> {
        let p = stored_parts(record)?;
        save_on(&self.conn(), &record.id, &p).map_err(|e| self.sql(e))
    }

    fn write_all(&mut self, writes: &[Write<'_>]) -> Result<Vec<Written>> {
        // Encoded before the transaction: it holds the file's write lock.
        enum Row<'a> {
            Snapshot(&'a str, crate::row::SnapshotRow),
            Session(&'a str, StoredParts),
            Request(&'a crate::RequestRecord),
        }
        let rows = writes
            .iter()
            .map(|w| {
                Ok(match w {
                    Write::Snapshot(source, data) => {
                        Row::Snapshot(source, crate::row::SnapshotRow::of(data)?)
                    }
                    Write::Session(record) => Row::Session(&record.id, stored_parts(record)?),
                    Write::Request(r) => Row::Request(r),
                })
            })
            .collect::<Result<Vec<Row<'_>>>>()?;
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(|e| self.sql(e))?;
        let mut out = Vec::with_capacity(rows.len());
        for row in &rows {
            let written = match row {
                Row::Snapshot(source, r) => {
                    crate::sqlite::snapshots::write(&tx, Some(source), r).map(Written::Snapshot)
                }
                Row::Session(id, p) => save_on(&tx, id, p).map(Written::Session),
                Row::Request(r) => crate::requests::insert_on(&tx, r).map(|()| Written::Request),
            };
            out.push(written.map_err(|e| self.sql(e))?);
        }
        tx.commit().map_err(|e| self.sql(e))?;
        drop(conn);
        // Everything is stored: a retention pass that fails now is tried
        // again after the next batch.
        let _ = self.prune_if_due();
        Ok(out)
    }
}

/// Stores (or replaces) session `id` as `p` on `conn`; its new version.
fn save_on(conn: &rusqlite::Connection, id: &str, p: &StoredParts) -> rusqlite::Result<i64> {
    conn.prepare_cached(
        "INSERT INTO sessions (id, family, model, source_len, source_fingerprint, tokens,
            body, calibration, version, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 1, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
         ON CONFLICT (id) DO UPDATE SET family = ?2, model = ?3, source_len = ?4,
            source_fingerprint = ?5, tokens = ?6, body = ?7, calibration = ?8,
            version = version + 1, updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
         RETURNING version",
    )?
    .query_row(
        params![
            id,
            p.family,
            p.model,
            p.len,
            p.fingerprint,
            p.tokens,
            p.body,
            p.state
        ],
        |r| r.get(0),
    )
}

/// A record's columns, as any SQL store keeps them (a fingerprint is
/// stored as the signed integer with the same bits).
#[derive(Debug)]
pub(crate) struct StoredParts {
    /// Wire family.
    pub(crate) family: String,
    /// Model.
    pub(crate) model: Option<String>,
    /// Stored version.
    pub(crate) version: i64,
    /// Messages the carried prefix replaces.
    pub(crate) len: Option<i64>,
    /// Their fingerprint's bits.
    pub(crate) fingerprint: Option<i64>,
    /// Tokens of the carried messages.
    pub(crate) tokens: Option<i64>,
    /// The carried messages as a wire body.
    pub(crate) body: Option<String>,
    /// The thread's state as JSON, its carried messages aside (the
    /// `calibration` column: a store written before threads were stored
    /// whole holds the bare calibration there, which reads as a state).
    pub(crate) state: String,
}

/// The columns of `record`.
pub(crate) fn stored_parts(record: &SessionRecord) -> Result<StoredParts> {
    let carry = record.thread.carryover.as_ref();
    let body = match carry {
        Some(c) => Some(carried_body(record.wire, c)?),
        None => None,
    };
    Ok(StoredParts {
        family: record.wire.family().as_str().to_owned(),
        model: record.model.clone(),
        version: record.version,
        len: carry.map(|c| c.source().len as i64),
        fingerprint: carry.map(|c| c.source().fingerprint as i64),
        tokens: carry.map(|c| crate::row::int(c.tokens().get())),
        body,
        state: record.thread.to_json().map_err(|e| Error::Serialize {
            what: "thread state",
            message: e.to_string(),
        })?,
    })
}

/// A record back from its columns.
pub(crate) fn record_from(id: &str, parts: StoredParts) -> Result<SessionRecord> {
    let corrupt = |what: String| Error::CorruptSession {
        id: id.to_owned(),
        what,
    };
    let family: Family = parts
        .family
        .parse()
        .map_err(|e| corrupt(format!("family: {e}")))?;
    let mut thread =
        ThreadState::from_json(&parts.state).map_err(|e| corrupt(format!("thread state: {e}")))?;
    let (carryover, wire) = match (parts.len, parts.fingerprint, parts.tokens, parts.body) {
        (Some(len), Some(fp), Some(tokens), Some(body)) => {
            let source = PrefixKey {
                len: len.max(0) as usize,
                fingerprint: fp as u64,
            };
            let (carry, wire) = carryover_from(
                id,
                family,
                source,
                &body,
                Counted::new(crate::row::count(tokens)),
            )?;
            (Some(carry), wire)
        }
        _ => (None, Wire::from(family)),
    };
    Ok(SessionRecord {
        id: id.to_owned(),
        wire,
        model: parts.model,
        thread: ThreadState {
            carryover,
            ..std::mem::take(&mut thread)
        },
        version: parts.version,
    })
}
