-- Up Migration

-- Stored answers are sealed (AES-256-GCM, api/idempotency.ts): they may hold a credential shown once (a new key, a
-- webhook signing secret, a token). Rows written before this version (and by a process of the previous version still
-- running during a rolling upgrade, which leaves the column out) are in clear text, `sealed` false: the API seals them
-- in place when it starts and every 10 minutes, and a replay of one seals it first. The partial index keeps that
-- sweep a probe of an empty index once they are gone.
ALTER TABLE idempotency_records ADD COLUMN sealed boolean NOT NULL DEFAULT false;
CREATE INDEX idempotency_records_clear ON idempotency_records (created_at) WHERE NOT sealed;

-- An answer that is finished after the change commits (a hangup waits for the engine with no transaction open): the
-- record holds a provisional answer until then. A retry before `pending_until` is 409 idempotency_in_progress; after
-- it (the first request's process died), the provisional answer becomes the answer.
ALTER TABLE idempotency_records ADD COLUMN pending_until timestamptz;
