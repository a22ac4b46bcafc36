-- Up Migration

-- Each engine's sweep asks for the queues where its own entries wait (queuesWithWaitingEntries) and, at start, for
-- the entries it held before a restart (abandonOwnedEntries): both by engine_owner over entries still in a queue,
-- which scanned the whole table.
CREATE INDEX queue_entries_owner ON queue_entries (engine_owner) WHERE left_at IS NULL;
