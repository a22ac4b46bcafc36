-- Up Migration

-- Dispatchers that are awake: until awake_until, the dispatcher `owner` claims due lanes at least every 25 ms
-- whatever it hears, so an append committing meanwhile need not NOTIFY (a NOTIFY serialises commits at the
-- database's notify lock). See docs/events.md, Wake-ups.
CREATE TABLE webhook_dispatchers (
  owner text PRIMARY KEY,
  awake_until timestamptz NOT NULL
);
