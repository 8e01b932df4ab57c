//! Snapshots in the SQLite file: written (the row, its bodies' parts once
//! per source, its originals) inside the caller's transaction, read back
//! whole, and removed with whatever only they held.

use rusqlite::{Connection, OptionalExtension, params};

use crate::row::{BODIES_IN_COLUMNS, BODIES_IN_PARTS, SIDES, SnapshotRow};
use crate::{Error, Result, SnapshotId, parts};

/// Writes snapshot `r` of `source` on `conn` (in its transaction).
pub(crate) fn write(
    conn: &Connection,
    source: Option<&str>,
    r: &SnapshotRow,
) -> rusqlite::Result<SnapshotId> {
    conn.prepare_cached(
        "INSERT INTO snapshots (source, model, family, tokens_before, tokens_after, target,
                summarizer, briefing, attempts, report, config, before_body, after_body,
                dropped_iterations, provider_tokens_before, provider_tokens_after, bodies,
                history_key)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, '', '', ?12, ?13, ?14, ?15, ?16)",
    )?
    .execute(params![
        source,
        r.model,
        r.family,
        r.tokens_before,
        r.tokens_after,
        r.target,
        r.summarizer,
        r.briefing,
        r.attempts,
        r.report,
        r.config,
        r.dropped_iterations,
        r.provider_tokens_before,
        r.provider_tokens_after,
        BODIES_IN_PARTS,
        r.history_key(),
    ])?;
    let id = SnapshotId(conn.last_insert_rowid());
    let scope = source.unwrap_or_default();
    let mut part = conn.prepare_cached(
        "INSERT INTO parts (source, hash, body) VALUES (?1, ?2, ?3) ON CONFLICT DO NOTHING",
    )?;
    for (hash, text) in r.distinct_parts() {
        part.execute(params![scope, &hash[..], text])?;
    }
    let mut listed = conn.prepare_cached(
        "INSERT INTO snapshot_parts (snapshot, side, position, hash) VALUES (?1, ?2, ?3, ?4)",
    )?;
    for (side, at, hash) in r.listing() {
        listed.execute(params![id.0, side, at, &hash[..]])?;
    }
    // An original named again goes with the newest snapshot naming it.
    let mut original = conn.prepare_cached(
        "INSERT INTO originals (handle, snapshot, kind, label, body)
         VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (handle) DO UPDATE SET snapshot = excluded.snapshot,
            label = excluded.label",
    )?;
    for o in &r.originals {
        original.execute(params![o.handle, id.0, o.kind, o.label, o.body])?;
    }
    Ok(id)
}

/// Snapshot `id`'s two bodies, as JSON; `sql` names SQLite's errors.
pub(crate) fn bodies(
    conn: &Connection,
    id: SnapshotId,
    sql: impl Fn(rusqlite::Error) -> Error,
) -> Result<[serde_json::Value; 2]> {
    /// Where its bodies are, the history's key, its source, and the bodies
    /// of a row written before they went to parts.
    type Row = (i64, Option<String>, Option<String>, String, String);
    let row: Option<Row> = conn
        .query_row(
            "SELECT bodies, history_key, source, before_body, after_body FROM snapshots
             WHERE id = ?1",
            params![id.0],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
        )
        .optional()
        .map_err(&sql)?;
    let (kind, key, source, before, after) = row.ok_or(Error::NotFound(id))?;
    let corrupt = |what: &str, e: String| Error::Corrupt {
        id,
        what: format!("stored {what} does not parse: {e}"),
    };
    if kind == BODIES_IN_COLUMNS {
        let parse = |what: &str, text: &str| {
            serde_json::from_str(text).map_err(|e| corrupt(what, e.to_string()))
        };
        return Ok([parse(SIDES[0], &before)?, parse(SIDES[1], &after)?]);
    }
    let mut stmt = conn
        .prepare_cached(
            "SELECT sp.side, p.body FROM snapshot_parts sp
             LEFT JOIN parts p ON p.source = ?2 AND p.hash = sp.hash
             WHERE sp.snapshot = ?1 ORDER BY sp.side, sp.position",
        )
        .map_err(&sql)?;
    let rows = stmt
        .query_map(params![id.0, source.unwrap_or_default()], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, Option<String>>(1)?))
        })
        .map_err(&sql)?;
    let mut sides: [Vec<String>; 2] = Default::default();
    for row in rows {
        let (side, text) = row.map_err(&sql)?;
        let text = text.ok_or_else(|| corrupt(SIDES[0], "a part is missing".into()))?;
        if let Some(s) = sides.get_mut(side as usize) {
            s.push(text);
        }
    }
    let [before, after] = sides;
    let join = |what: &str, parts: &[String]| {
        parts::join(key.as_deref(), parts).map_err(|e| corrupt(what, e.to_string()))
    };
    Ok([join(SIDES[0], &before)?, join(SIDES[1], &after)?])
}

/// Removes snapshots `ids` with their listings and originals, then the
/// parts no snapshot of their sources lists any more.
pub(crate) fn remove(conn: &Connection, ids: &[(i64, String)]) -> rusqlite::Result<()> {
    for (id, _) in ids {
        conn.execute("DELETE FROM snapshot_parts WHERE snapshot = ?1", [id])?;
        conn.execute("DELETE FROM originals WHERE snapshot = ?1", [id])?;
        conn.execute("DELETE FROM snapshots WHERE id = ?1", [id])?;
    }
    let sources: std::collections::BTreeSet<&String> = ids.iter().map(|(_, s)| s).collect();
    for source in sources {
        conn.execute(
            "DELETE FROM parts WHERE source = ?1 AND NOT EXISTS (
                 SELECT 1 FROM snapshot_parts sp JOIN snapshots s ON s.id = sp.snapshot
                 WHERE sp.hash = parts.hash AND coalesce(s.source, '') = ?1)",
            [source],
        )?;
    }
    Ok(())
}

/// Bytes the file's pages in use take (its free pages aside).
pub(crate) fn occupied(conn: &Connection) -> rusqlite::Result<u64> {
    let pragma = |name: &str| conn.query_row(&format!("PRAGMA {name}"), [], |r| r.get::<_, i64>(0));
    let used = pragma("page_count")? - pragma("freelist_count")?;
    Ok((used.max(0) as u64) * pragma("page_size")?.max(0) as u64)
}
