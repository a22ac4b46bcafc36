-- Up Migration

-- A lane's pending deliveries are keyed by their place in the stream: one index serves the head lookup, the
-- deletion of a delivered run and a replay's "already queued" check (an event is one (stream_key, sequence)).
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_pkey;
DROP INDEX webhook_deliveries_head;
ALTER TABLE webhook_deliveries ADD PRIMARY KEY (endpoint_id, stream_key, sequence);
