//! The tables, created on first connect (under an advisory lock, so
//! replicas starting together do not race).

pub(super) const SCHEMA: &str = "
SELECT pg_advisory_xact_lock(7400912);
CREATE TABLE IF NOT EXISTS abridge_sessions (
    id                 TEXT PRIMARY KEY,
    family             TEXT NOT NULL CHECK (family IN ('openai', 'anthropic', 'gemini')),
    model              TEXT,
    source_len         BIGINT,
    source_fingerprint BIGINT,
    tokens             BIGINT,
    body               TEXT,
    calibration        TEXT NOT NULL,
    version            BIGINT NOT NULL DEFAULT 0,
    updated_at         TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS abridge_snapshots (
    id                 BIGSERIAL PRIMARY KEY,
    created_at         TIMESTAMPTZ NOT NULL DEFAULT now(),
    source             TEXT,
    model              TEXT,
    family             TEXT NOT NULL,
    tokens_before      BIGINT NOT NULL,
    tokens_after       BIGINT NOT NULL,
    target             BIGINT,
    summarizer         TEXT,
    briefing           TEXT,
    attempts           TEXT NOT NULL,
    report             TEXT NOT NULL,
    config             TEXT NOT NULL,
    before_body        TEXT NOT NULL,
    after_body         TEXT NOT NULL,
    dropped_iterations BIGINT NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS abridge_requests (
    id             BIGSERIAL PRIMARY KEY,
    source         TEXT NOT NULL,
    at             TIMESTAMPTZ NOT NULL DEFAULT now(),
    model          TEXT,
    tokens         BIGINT NOT NULL,
    usage          BIGINT,
    compacted      BOOLEAN NOT NULL,
    snapshot       BIGINT,
    trigger_tokens BIGINT,
    target         BIGINT
);
CREATE INDEX IF NOT EXISTS abridge_requests_by_source ON abridge_requests (source, id);
ALTER TABLE abridge_snapshots ADD COLUMN IF NOT EXISTS provider_tokens_before BIGINT;
ALTER TABLE abridge_snapshots ADD COLUMN IF NOT EXISTS provider_tokens_after BIGINT;
CREATE TABLE IF NOT EXISTS abridge_originals (
    handle   TEXT PRIMARY KEY,
    snapshot BIGINT NOT NULL,
    kind     TEXT NOT NULL,
    label    TEXT NOT NULL,
    body     TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS abridge_originals_by_snapshot ON abridge_originals (snapshot);
ALTER TABLE abridge_requests ADD COLUMN IF NOT EXISTS recalls BIGINT NOT NULL DEFAULT 0;
ALTER TABLE abridge_requests ADD COLUMN IF NOT EXISTS tenant TEXT;
ALTER TABLE abridge_requests ADD COLUMN IF NOT EXISTS client_tokens BIGINT;
ALTER TABLE abridge_requests ADD COLUMN IF NOT EXISTS input_tokens BIGINT;
ALTER TABLE abridge_requests ADD COLUMN IF NOT EXISTS output_tokens BIGINT;
ALTER TABLE abridge_requests ADD COLUMN IF NOT EXISTS cache_read_tokens BIGINT;
ALTER TABLE abridge_requests ADD COLUMN IF NOT EXISTS cache_write_tokens BIGINT;
ALTER TABLE abridge_requests ADD COLUMN IF NOT EXISTS cost DOUBLE PRECISION;
ALTER TABLE abridge_requests ADD COLUMN IF NOT EXISTS cost_without DOUBLE PRECISION;
ALTER TABLE abridge_requests ADD COLUMN IF NOT EXISTS over_window BOOLEAN NOT NULL DEFAULT false;
CREATE TABLE IF NOT EXISTS abridge_totals (
    day                TEXT NOT NULL,
    tenant             TEXT NOT NULL,
    model              TEXT NOT NULL,
    requests           BIGINT NOT NULL DEFAULT 0,
    compacted          BIGINT NOT NULL DEFAULT 0,
    client_tokens      BIGINT NOT NULL DEFAULT 0,
    forwarded_tokens   BIGINT NOT NULL DEFAULT 0,
    input_tokens       BIGINT NOT NULL DEFAULT 0,
    output_tokens      BIGINT NOT NULL DEFAULT 0,
    cache_read_tokens  BIGINT NOT NULL DEFAULT 0,
    cache_write_tokens BIGINT NOT NULL DEFAULT 0,
    cost               DOUBLE PRECISION NOT NULL DEFAULT 0,
    compared           BIGINT NOT NULL DEFAULT 0,
    cost_compared      DOUBLE PRECISION NOT NULL DEFAULT 0,
    cost_without       DOUBLE PRECISION NOT NULL DEFAULT 0,
    over_window        BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (day, tenant, model)
);
ALTER TABLE abridge_snapshots ADD COLUMN IF NOT EXISTS bodies SMALLINT NOT NULL DEFAULT 0;
ALTER TABLE abridge_snapshots ADD COLUMN IF NOT EXISTS history_key TEXT;
CREATE TABLE IF NOT EXISTS abridge_parts (
    source TEXT NOT NULL,
    hash   BYTEA NOT NULL,
    body   TEXT NOT NULL,
    PRIMARY KEY (source, hash)
);
CREATE TABLE IF NOT EXISTS abridge_snapshot_parts (
    snapshot BIGINT NOT NULL,
    side     SMALLINT NOT NULL,
    position INTEGER NOT NULL,
    hash     BYTEA NOT NULL,
    PRIMARY KEY (snapshot, side, position)
);
CREATE INDEX IF NOT EXISTS abridge_snapshot_parts_by_hash ON abridge_snapshot_parts (hash);
CREATE TABLE IF NOT EXISTS abridge_settings (
    name  TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
DO $$ BEGIN
    -- Sessions of a store created before Gemini: widen their families.
    IF EXISTS (SELECT 1 FROM pg_constraint WHERE conname = 'abridge_sessions_family_check'
               AND pg_get_constraintdef(oid) NOT LIKE '%gemini%') THEN
        ALTER TABLE abridge_sessions DROP CONSTRAINT abridge_sessions_family_check;
        ALTER TABLE abridge_sessions ADD CONSTRAINT abridge_sessions_family_check
            CHECK (family IN ('openai', 'anthropic', 'gemini'));
    END IF;
END $$;";
