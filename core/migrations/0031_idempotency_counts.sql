-- Up Migration

-- What each idempotency scope has stored (docs/foundation.md, "Idempotency"): answers and their bytes, by the hour
-- they were stored, so that a mutation checks its scope's limits by reading at most 24 rows instead of counting its
-- records. Each API process adds what it stored about once a second, in one statement for every scope (never in a
-- request's transaction); the purge drops hours past the retention.
CREATE TABLE idempotency_counts (
  scope text NOT NULL,
  hour timestamptz NOT NULL,
  answers integer NOT NULL,
  bytes bigint NOT NULL,
  PRIMARY KEY (scope, hour)
);
CREATE INDEX idempotency_counts_age ON idempotency_counts (hour);

-- The records already stored, counted once.
INSERT INTO idempotency_counts (scope, hour, answers, bytes)
  SELECT scope, date_trunc('hour', created_at, 'UTC'), count(*), sum(octet_length(response_body))
    FROM idempotency_records
   GROUP BY scope, date_trunc('hour', created_at, 'UTC');
