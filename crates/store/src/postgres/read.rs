//! Reading back: entries, snapshots, request rows and totals, and
//! pruning by size and age.

use std::collections::HashMap;

use abridge::model::Family;
use abridge::tokens::{Calibrated, Reported};
use abridge::{SnapshotId, StoreConfig};

use super::{PgStore, pg};
use crate::row::{BODIES_IN_PARTS, SIDES, parse};
use crate::{Entry, Error, Pruned, RequestRecord, RequestStats, Result, Snapshot, SnapshotStore};

const ENTRY_COLUMNS: &str = "id, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), \
     source, model, family, tokens_before, tokens_after, summarizer, dropped_iterations, \
     provider_tokens_before, provider_tokens_after";

/// Columns in [`ENTRY_COLUMNS`]: what a query selects after them starts here.
const ENTRY_WIDTH: usize = 11;

/// The [`Entry`] in the first columns of a row ([`ENTRY_COLUMNS`]).
pub(super) fn entry(shown: &str, r: &tokio_postgres::Row) -> Result<Entry> {
    let family: String = r.get(4);
    Ok(Entry {
        id: SnapshotId(r.get(0)),
        created_at: r.get(1),
        source: r.get(2),
        model: r.get(3),
        family: family.parse::<Family>().map_err(|e| pg(shown, e))?,
        summarizer: r.get(7),
        dropped_iterations: r.get::<_, i64>(8).max(0) as usize,
        ..Entry::counted(r.get(5), r.get(6), r.get(9), r.get(10))
    })
}

const REQUEST_COLUMNS: &str = "source, to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), \
     model, tokens, usage, compacted, snapshot, trigger_tokens, target, recalls, tenant, \
     client_tokens, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost, \
     cost_without, over_window";

/// Columns in [`REQUEST_COLUMNS`]: what a query selects after them starts here.
const REQUEST_WIDTH: usize = 19;

pub(super) fn request(r: &tokio_postgres::Row) -> RequestRecord {
    let n = |i| r.get::<_, Option<i64>>(i).map(|v| v.max(0) as u64);
    RequestRecord {
        source: r.get(0),
        at: r.get(1),
        model: r.get(2),
        tokens: Calibrated::new(n(3).unwrap_or(0)),
        usage: n(4).map(Reported::new),
        compacted: r.get(5),
        snapshot: r.get::<_, Option<i64>>(6).map(SnapshotId),
        trigger: n(7).map(Calibrated::new),
        target: n(8).map(Calibrated::new),
        recalls: u32::try_from(n(9).unwrap_or(0)).unwrap_or(u32::MAX),
        account: crate::Accounting {
            tenant: r.get::<_, Option<String>>(10).unwrap_or_default(),
            client_tokens: Calibrated::new(n(11).unwrap_or(0)),
            input_tokens: n(12),
            output_tokens: n(13),
            cache_read_tokens: n(14),
            cache_write_tokens: n(15),
            cost: r.get(16),
            cost_without: r.get(17),
            over_window: r.get(18),
        },
    }
}

impl SnapshotStore for PgStore {
    fn requests(&self, source: &str, limit: usize) -> Result<Vec<RequestRecord>> {
        let sql = format!(
            "SELECT {REQUEST_COLUMNS} FROM (SELECT * FROM abridge_requests WHERE source = $1 ORDER BY id DESC LIMIT $2) r ORDER BY id"
        );
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self.run(async {
            self.client()
                .await?
                .query(&sql, &[&source, &limit])
                .await
                .map_err(|e| pg(&self.shown, e))
        })?;
        Ok(rows.iter().map(request).collect())
    }

    fn request_stats(&self) -> Result<HashMap<String, RequestStats>> {
        let sql = format!(
            "SELECT {REQUEST_COLUMNS}, c.n FROM abridge_requests r JOIN
               (SELECT max(id) AS last, count(*) AS n FROM abridge_requests GROUP BY source) c ON r.id = c.last"
        );
        let rows = self.run(async {
            self.client()
                .await?
                .query(&sql, &[])
                .await
                .map_err(|e| pg(&self.shown, e))
        })?;
        Ok(rows
            .iter()
            .map(|r| {
                let last = request(r);
                let n: i64 = r.get(REQUEST_WIDTH);
                (
                    last.source.clone(),
                    RequestStats {
                        requests: n.max(0) as u64,
                        last,
                    },
                )
            })
            .collect())
    }

    fn totals(&self, by: crate::GroupBy, limit: usize) -> Result<Vec<crate::Totals>> {
        // PostgreSQL sums integers as `numeric`: back to the columns' types.
        let sql = crate::totals::select("abridge_totals", by, "$1", ["::bigint", "::float8"]);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self.run(async {
            self.client()
                .await?
                .query(&sql, &[&limit])
                .await
                .map_err(|e| pg(&self.shown, e))
        })?;
        Ok(rows
            .iter()
            .map(|r| {
                let ints: [u64; 10] = std::array::from_fn(|k| r.get::<_, i64>(3 + k).max(0) as u64);
                let floats = [r.get(13), r.get(14), r.get(15)];
                crate::totals::line([r.get(0), r.get(1), r.get(2)], ints, floats)
            })
            .collect())
    }

    fn list(&self, limit: usize) -> Result<Vec<Entry>> {
        let sql =
            format!("SELECT {ENTRY_COLUMNS} FROM abridge_snapshots ORDER BY id DESC LIMIT $1");
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self.run(async {
            self.client()
                .await?
                .query(&sql, &[&limit])
                .await
                .map_err(|e| pg(&self.shown, e))
        })?;
        rows.iter().map(|r| entry(&self.shown, r)).collect()
    }

    fn get(&self, id: SnapshotId) -> Result<Snapshot> {
        let sql = format!(
            "SELECT {ENTRY_COLUMNS}, briefing, report, config, before_body, after_body, bodies,
                history_key FROM abridge_snapshots WHERE id = $1"
        );
        let row = self
            .run(async {
                self.client()
                    .await?
                    .query_opt(&sql, &[&id.0])
                    .await
                    .map_err(|e| pg(&self.shown, e))
            })?
            .ok_or(Error::NotFound(id))?;
        let text = |i: usize| row.get::<_, String>(i);
        let entry = entry(&self.shown, &row)?;
        let [before, after] = match i64::from(row.get::<_, i16>(ENTRY_WIDTH + 5)) {
            BODIES_IN_PARTS => {
                self.bodies(id, entry.source.as_deref(), row.get(ENTRY_WIDTH + 6))?
            }
            _ => [
                parse(id, SIDES[0], &text(ENTRY_WIDTH + 3))?,
                parse(id, SIDES[1], &text(ENTRY_WIDTH + 4))?,
            ],
        };
        Ok(Snapshot {
            entry,
            briefing: row.get(ENTRY_WIDTH),
            report: parse(id, "report", &text(ENTRY_WIDTH + 1))?,
            config: parse(id, "config", &text(ENTRY_WIDTH + 2))?,
            before,
            after,
        })
    }

    fn prune(&mut self, retention: &StoreConfig) -> Result<Pruned> {
        self.run(async {
            let mut client = self.client().await?;
            let tx = client.transaction().await.map_err(|e| pg(&self.shown, e))?;
            let (removed, sessions) = prune_rows(&tx, retention)
                .await
                .map_err(|e| pg(&self.shown, e))?;
            let kept: i64 = tx
                .query_one("SELECT count(*) FROM abridge_snapshots", &[])
                .await
                .map_err(|e| pg(&self.shown, e))?
                .get(0);
            let bytes = stored_bytes(&tx).await.map_err(|e| pg(&self.shown, e))?;
            tx.commit().await.map_err(|e| pg(&self.shown, e))?;
            Ok(Pruned {
                removed,
                kept: kept.max(0) as usize,
                sessions,
                bytes: bytes.max(0) as u64,
            })
        })
    }
}

impl PgStore {
    /// Snapshot `id`'s two bodies, from their parts.
    fn bodies(
        &self,
        id: SnapshotId,
        source: Option<&str>,
        key: Option<String>,
    ) -> Result<[serde_json::Value; 2]> {
        let rows = self.run(async {
            self.client()
                .await?
                .query(
                    "SELECT sp.side, p.body FROM abridge_snapshot_parts sp
                     LEFT JOIN abridge_parts p ON p.source = $2 AND p.hash = sp.hash
                     WHERE sp.snapshot = $1 ORDER BY sp.side, sp.position",
                    &[&id.0, &source.unwrap_or_default()],
                )
                .await
                .map_err(|e| pg(&self.shown, e))
        })?;
        let mut sides: [Vec<String>; 2] = Default::default();
        for r in rows {
            let side: i16 = r.get(0);
            let text: Option<String> = r.get(1);
            let text = text.ok_or_else(|| Error::Corrupt {
                id,
                what: "a part of its bodies is missing".into(),
            })?;
            if let Some(s) = sides.get_mut(side as usize) {
                s.push(text);
            }
        }
        let join = |what: &str, parts: &[String]| {
            crate::parts::join(key.as_deref(), parts).map_err(|e| Error::Corrupt {
                id,
                what: format!("stored {what} does not parse: {e}"),
            })
        };
        Ok([join(SIDES[0], &sides[0])?, join(SIDES[1], &sides[1])?])
    }
}

/// Bytes of what the store keeps: snapshots' rows' text, their bodies'
/// parts and their originals, and sessions' carried bodies and states
/// (PostgreSQL's own sizes include dead rows that only a vacuum gives
/// back, so what a prune removes would not show).
pub(super) async fn stored_bytes(
    tx: &tokio_postgres::Transaction<'_>,
) -> std::result::Result<i64, tokio_postgres::Error> {
    let row = tx
        .query_one(
            "SELECT (SELECT coalesce(sum(octet_length(report) + octet_length(config)
                        + octet_length(attempts) + octet_length(before_body)
                        + octet_length(after_body) + coalesce(octet_length(briefing), 0)), 0)
                     FROM abridge_snapshots)
                  + (SELECT coalesce(sum(octet_length(body)), 0) FROM abridge_parts)
                  + (SELECT coalesce(sum(octet_length(body)), 0) FROM abridge_originals)
                  + (SELECT coalesce(sum(coalesce(octet_length(body), 0)
                        + octet_length(calibration)), 0) FROM abridge_sessions)",
            &[],
        )
        .await?;
    Ok(row.get::<_, Option<i64>>(0).unwrap_or(0))
}

/// Removes what is past `retention` (by age; then, while what the store
/// keeps is over its size, the oldest snapshots and least recently saved
/// sessions, a sixteenth of each at a time), the newest snapshot always
/// kept; then the originals and parts only they held. How many snapshots
/// and sessions went.
pub(super) async fn prune_rows(
    tx: &tokio_postgres::Transaction<'_>,
    retention: &StoreConfig,
) -> std::result::Result<(usize, usize), tokio_postgres::Error> {
    let newest: i64 = tx
        .query_one("SELECT coalesce(max(id), 0) FROM abridge_snapshots", &[])
        .await?
        .get(0);
    let (mut removed, mut sessions) = (0, 0);
    if retention.max_age_days > 0 {
        let days = retention.max_age_days as i32;
        removed += tx
            .execute(
                "DELETE FROM abridge_snapshots WHERE id < $1
                 AND created_at < now() - make_interval(days => $2)",
                &[&newest, &days],
            )
            .await? as usize;
        sessions += tx
            .execute(
                "DELETE FROM abridge_sessions WHERE updated_at < now() - make_interval(days => $1)",
                &[&days],
            )
            .await? as usize;
    }
    if retention.max_megabytes > 0 {
        // A sixteenth under the limit, so that the next writes do not
        // prune again at once.
        let max = (retention.max_megabytes * 1_000_000) as i64;
        let under = max - max / 16;
        while stored_bytes(tx).await? > under {
            let gone = tx
                .execute(
                    "DELETE FROM abridge_snapshots WHERE id IN (
                         SELECT id FROM abridge_snapshots WHERE id < $1 ORDER BY id
                         LIMIT greatest(1, (SELECT count(*) FROM abridge_snapshots) / 16))",
                    &[&newest],
                )
                .await? as usize;
            let stale = tx
                .execute(
                    "DELETE FROM abridge_sessions WHERE id IN (
                         SELECT id FROM abridge_sessions ORDER BY updated_at
                         LIMIT greatest(1, (SELECT count(*) FROM abridge_sessions) / 16))",
                    &[],
                )
                .await? as usize;
            if gone + stale == 0 {
                break;
            }
            removed += gone;
            sessions += stale;
            forget_unlisted(tx).await?;
        }
    }
    if removed > 0 {
        forget_unlisted(tx).await?;
    }
    Ok((removed, sessions))
}

/// Drops what no snapshot lists any more: listings, originals, parts.
pub(super) async fn forget_unlisted(
    tx: &tokio_postgres::Transaction<'_>,
) -> std::result::Result<(), tokio_postgres::Error> {
    tx.batch_execute(
        "DELETE FROM abridge_snapshot_parts sp WHERE NOT EXISTS
             (SELECT 1 FROM abridge_snapshots s WHERE s.id = sp.snapshot);
         DELETE FROM abridge_originals o WHERE NOT EXISTS
             (SELECT 1 FROM abridge_snapshots s WHERE s.id = o.snapshot);
         DELETE FROM abridge_parts p WHERE NOT EXISTS
             (SELECT 1 FROM abridge_snapshot_parts sp JOIN abridge_snapshots s ON s.id = sp.snapshot
              WHERE sp.hash = p.hash AND coalesce(s.source, '') = p.source);",
    )
    .await
}
