//! Writing in one transaction: a snapshot with its bodies and originals,
//! a session, the request log and its daily totals.

use abridge::SnapshotId;
use abridge::tokens::{Calibrated, Reported};
use tokio_postgres::GenericClient;

use crate::RequestRecord;
use crate::requests::KEPT_REQUESTS;
use crate::row::{BODIES_IN_PARTS, OriginalRow, SnapshotRow};
use crate::session::StoredParts;

/// Writes snapshot `r` of `source` in transaction `tx`: its row, its
/// bodies' parts once per source, and its originals, each in one statement.
pub(super) async fn write_snapshot(
    tx: &tokio_postgres::Transaction<'_>,
    source: Option<&str>,
    r: &SnapshotRow,
) -> std::result::Result<SnapshotId, tokio_postgres::Error> {
    let row = tx
        .query_one(
            "INSERT INTO abridge_snapshots (source, model, family, tokens_before,
                tokens_after, target, summarizer, briefing, attempts, report, config,
                before_body, after_body, dropped_iterations, provider_tokens_before,
                provider_tokens_after, bodies, history_key)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, '', '', $12, $13, $14, $15, $16)
             RETURNING id",
            &[
                &source,
                &r.model,
                &r.family,
                &r.tokens_before,
                &r.tokens_after,
                &r.target,
                &r.summarizer,
                &r.briefing,
                &r.attempts,
                &r.report,
                &r.config,
                &r.dropped_iterations,
                &r.provider_tokens_before,
                &r.provider_tokens_after,
                &(BODIES_IN_PARTS as i16),
                &r.history_key(),
            ],
        )
        .await?;
    let id: i64 = row.get(0);
    let distinct = r.distinct_parts();
    let hashes: Vec<&[u8]> = distinct.iter().map(|(h, _)| &h[..]).collect();
    let texts: Vec<&str> = distinct.iter().map(|(_, t)| *t).collect();
    tx.execute(
        "INSERT INTO abridge_parts (source, hash, body)
         SELECT $1, h, b FROM UNNEST($2::bytea[], $3::text[]) AS p(h, b)
         ON CONFLICT DO NOTHING",
        &[&source.unwrap_or_default(), &hashes, &texts],
    )
    .await?;
    let (mut sides, mut positions, mut listed) = (Vec::new(), Vec::new(), Vec::new());
    for (side, at, hash) in r.listing() {
        sides.push(side as i16);
        positions.push(at as i32);
        listed.push(&hash[..]);
    }
    tx.execute(
        "INSERT INTO abridge_snapshot_parts (snapshot, side, position, hash)
         SELECT $1, s, p, h FROM UNNEST($2::smallint[], $3::int[], $4::bytea[]) AS l(s, p, h)",
        &[&id, &sides, &positions, &listed],
    )
    .await?;
    // An original named again goes with the newest snapshot naming it; all
    // of them in one statement (one round trip).
    if !r.originals.is_empty() {
        let column =
            |f: fn(&OriginalRow) -> &str| -> Vec<&str> { r.originals.iter().map(f).collect() };
        tx.execute(
            "INSERT INTO abridge_originals (handle, snapshot, kind, label, body)
             SELECT h, $2, k, l, b FROM UNNEST($1::text[], $3::text[], $4::text[], $5::text[])
                AS o(h, k, l, b)
             ON CONFLICT (handle) DO UPDATE SET snapshot = EXCLUDED.snapshot,
                label = EXCLUDED.label",
            &[
                &column(|o| &o.handle),
                &id,
                &column(|o| &o.kind),
                &column(|o| &o.label),
                &column(|o| &o.body),
            ],
        )
        .await?;
    }
    Ok(SnapshotId(id))
}

/// Stores (or replaces) session `id` as `p`; its new version.
pub(super) async fn save_on(
    client: &impl GenericClient,
    id: &str,
    p: &StoredParts,
) -> std::result::Result<i64, tokio_postgres::Error> {
    let row = client
        .query_one(
            "INSERT INTO abridge_sessions (id, family, model, source_len,
                source_fingerprint, tokens, body, calibration, version, updated_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 1, now())
             ON CONFLICT (id) DO UPDATE SET family = $2, model = $3, source_len = $4,
                source_fingerprint = $5, tokens = $6, body = $7, calibration = $8,
                version = abridge_sessions.version + 1, updated_at = now()
             RETURNING version",
            &[
                &id,
                &p.family,
                &p.model,
                &p.len,
                &p.fingerprint,
                &p.tokens,
                &p.body,
                &p.state,
            ],
        )
        .await?;
    Ok(row.get(0))
}

/// Appends request rows to the log in one statement; past every thousandth
/// id, trims the log to [`KEPT_REQUESTS`].
pub(super) async fn insert_requests(
    client: &impl GenericClient,
    rows: &[&RequestRecord],
) -> std::result::Result<(), tokio_postgres::Error> {
    if rows.is_empty() {
        return Ok(());
    }
    let int = |v: Option<u64>| v.map(|v| i64::try_from(v).unwrap_or(i64::MAX));
    let col = |f: &dyn Fn(&RequestRecord) -> Option<i64>| -> Vec<Option<i64>> {
        rows.iter().map(|r| f(r)).collect()
    };
    let sources: Vec<&str> = rows.iter().map(|r| r.source.as_str()).collect();
    let models: Vec<Option<&str>> = rows.iter().map(|r| r.model.as_deref()).collect();
    let compacted: Vec<bool> = rows.iter().map(|r| r.compacted).collect();
    let tenants: Vec<&str> = rows.iter().map(|r| r.account.tenant.as_str()).collect();
    let float = |f: &dyn Fn(&RequestRecord) -> Option<f64>| -> Vec<Option<f64>> {
        rows.iter().map(|r| f(r)).collect()
    };
    let over: Vec<bool> = rows.iter().map(|r| r.account.over_window).collect();
    let row = client
        .query_one(
            "WITH added AS (
                 INSERT INTO abridge_requests (source, model, tokens, usage, compacted, snapshot,
                     trigger_tokens, target, recalls, tenant, client_tokens, input_tokens,
                     output_tokens, cache_read_tokens, cache_write_tokens, cost, cost_without,
                     over_window)
                 SELECT * FROM UNNEST($1::text[], $2::text[], $3::bigint[], $4::bigint[],
                     $5::boolean[], $6::bigint[], $7::bigint[], $8::bigint[], $9::bigint[],
                     $10::text[], $11::bigint[], $12::bigint[], $13::bigint[], $14::bigint[],
                     $15::bigint[], $16::float8[], $17::float8[], $18::boolean[])
                 RETURNING id)
             SELECT coalesce(min(id), 0), coalesce(max(id), 0) FROM added",
            &[
                &sources,
                &models,
                &col(&|r| int(Some(r.tokens.get()))),
                &col(&|r| int(r.usage.map(Reported::get))),
                &compacted,
                &col(&|r| r.snapshot.map(|s| s.0)),
                &col(&|r| int(r.trigger.map(Calibrated::get))),
                &col(&|r| int(r.target.map(Calibrated::get))),
                &col(&|r| Some(i64::from(r.recalls))),
                &tenants,
                &col(&|r| int(Some(r.account.client_tokens.get()))),
                &col(&|r| int(r.account.input_tokens)),
                &col(&|r| int(r.account.output_tokens)),
                &col(&|r| int(r.account.cache_read_tokens)),
                &col(&|r| int(r.account.cache_write_tokens)),
                &float(&|r| r.account.cost),
                &float(&|r| r.account.cost_without),
                &over,
            ],
        )
        .await?;
    add_totals(client, rows).await?;
    let (first, last): (i64, i64) = (row.get(0), row.get(1));
    if first / 1000 != last / 1000 || first % 1000 == 0 {
        client
            .execute(
                "DELETE FROM abridge_requests WHERE id <= $1",
                &[&(last - KEPT_REQUESTS)],
            )
            .await?;
    }
    Ok(())
}

/// Adds `rows` to their day's, tenant's and model's totals: one statement
/// per tenant and model of the batch.
pub(super) async fn add_totals(
    client: &impl GenericClient,
    rows: &[&RequestRecord],
) -> std::result::Result<(), tokio_postgres::Error> {
    let mut lines: std::collections::BTreeMap<(&str, &str), crate::Totals> =
        std::collections::BTreeMap::new();
    for r in rows {
        let model = r.model.as_deref().unwrap_or("");
        lines
            .entry((r.account.tenant.as_str(), model))
            .or_default()
            .add(r);
    }
    let sql = crate::totals::upsert(
        "abridge_totals",
        "to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD')",
        '$',
    );
    for ((tenant, model), line) in lines {
        let (ints, floats) = line.values();
        let mut values: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = vec![&tenant, &model];
        values.extend(
            ints.iter()
                .map(|v| v as &(dyn tokio_postgres::types::ToSql + Sync)),
        );
        values.extend(
            floats
                .iter()
                .map(|v| v as &(dyn tokio_postgres::types::ToSql + Sync)),
        );
        client.execute(&sql, &values).await?;
    }
    Ok(())
}
