-- Up Migration

-- Fair claims (docs/events.md, "Sharing the attempts"): a claim visits each endpoint with pending lanes and takes
-- its oldest due ones, up to the endpoint's and its application's share of the attempts in flight, instead of the
-- oldest due lanes of all endpoints. It finds those endpoints by a loose scan of this index and each one's due
-- lanes by a range scan of it; it replaces the index of the oldest-first claim.
CREATE INDEX webhook_lanes_pending ON webhook_lanes (endpoint_id, next_attempt_at)
  WHERE next_attempt_at IS NOT NULL AND parked_at IS NULL;
DROP INDEX webhook_lanes_due;
-- The lanes held under a lease right now, counted per endpoint by every claim (at most the attempts in flight of
-- all dispatchers, plus the leases of dispatchers that died).
CREATE INDEX webhook_lanes_held ON webhook_lanes (endpoint_id, lease_until) WHERE lease_owner IS NOT NULL;
