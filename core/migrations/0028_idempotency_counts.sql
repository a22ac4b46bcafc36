-- Up Migration

-- What each idempotency scope has stored (docs/foundation.md, "Idempotency"): answers and their bytes, by the hour
-- they were stored, so that a mutation checks its scope's limits by reading at most 24 hours x 8 rows instead of
-- counting its records. A stored answer adds to one of 8 shards of its hour, chosen at random, so that concurrent
-- mutations of one scope seldom wait on one row until commit. The purge drops hours past the retention; an answer
-- replaced or deleted earlier stays counted until its hour goes (the counts only ever err on the high side by that).
CREATE TABLE idempotency_counts (
  scope text NOT NULL,
  hour timestamptz NOT NULL,
  shard smallint NOT NULL,
  answers integer NOT NULL,
  bytes bigint NOT NULL,
  PRIMARY KEY (scope, hour, shard)
);
CREATE INDEX idempotency_counts_age ON idempotency_counts (hour);

-- The records already stored, counted once.
INSERT INTO idempotency_counts (scope, hour, shard, answers, bytes)
  SELECT scope, date_trunc('hour', created_at, 'UTC'), 0, count(*), sum(octet_length(response_body))
    FROM idempotency_records
   GROUP BY scope, date_trunc('hour', created_at, 'UTC');
