-- Up Migration

-- The networks a carrier's media may come from and go to besides its own address (docs/calls.md, Media addresses):
-- CIDR ranges or addresses of the carrier's media servers when they are not where its SIP is. Empty: the carrier's
-- address (its IP, CIDR range or host's addresses) alone.
ALTER TABLE carriers ADD COLUMN media_networks text[] NOT NULL DEFAULT '{}';
