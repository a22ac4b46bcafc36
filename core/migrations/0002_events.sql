-- Up Migration

-- The last sequence handed out per stream (call:<id>, number:<id>, agent:<memberId>). The upsert in appendEvent
-- row-locks a stream until commit, so one stream's events commit in sequence order.
CREATE TABLE event_streams (
  stream_key text PRIMARY KEY,
  last_sequence bigint NOT NULL
);

CREATE TABLE events (
  id uuid PRIMARY KEY,
  log_index bigint GENERATED ALWAYS AS IDENTITY,
  -- Log position: the writing transaction's id, then log_index within it.
  tx_id xid8 NOT NULL DEFAULT pg_current_xact_id(),
  -- The oldest transaction still running when this event was written: where `after=<event id>` resumes.
  resume_tx xid8 NOT NULL DEFAULT pg_snapshot_xmin(pg_current_snapshot()),
  application_id text NOT NULL REFERENCES applications (id),
  workspace_id uuid,
  type text NOT NULL,
  stream_key text NOT NULL,
  sequence bigint NOT NULL CHECK (sequence > 0),
  occurred_at timestamptz NOT NULL,
  -- The event JSON exactly as delivered and signed.
  payload text NOT NULL,
  UNIQUE (stream_key, sequence)
);
CREATE INDEX events_log ON events (application_id, tx_id, log_index);
CREATE INDEX events_by_time ON events (application_id, occurred_at);

CREATE TABLE webhook_endpoints (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  application_id text NOT NULL REFERENCES applications (id),
  url text NOT NULL,
  -- null: every event type.
  event_types text[],
  enabled boolean NOT NULL DEFAULT true,
  description text,
  -- Signing secrets, encrypted (core/webhooks/secrets.ts). The previous one signs too until it expires.
  secret text NOT NULL,
  previous_secret text,
  previous_secret_expires_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  updated_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX webhook_endpoints_page ON webhook_endpoints (application_id, created_at DESC, id DESC);

-- What each endpoint still has to receive: one row per (endpoint, event) until it is acknowledged.
CREATE TABLE webhook_deliveries (
  endpoint_id uuid NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
  event_id uuid NOT NULL REFERENCES events (id),
  stream_key text NOT NULL,
  sequence bigint NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (endpoint_id, event_id)
);
CREATE INDEX webhook_deliveries_head ON webhook_deliveries (endpoint_id, stream_key, sequence);

-- One lane per (endpoint, stream): the delivery state of its head event. One attempt in flight per lane.
CREATE TABLE webhook_lanes (
  endpoint_id uuid NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
  stream_key text NOT NULL,
  -- When the head is due; null when nothing is pending.
  next_attempt_at timestamptz,
  -- Failed attempts of the head event, and when its first attempt was (the parking clock).
  attempts integer NOT NULL DEFAULT 0,
  head_event_id uuid,
  head_first_attempt_at timestamptz,
  parked_at timestamptz,
  last_attempt_at timestamptz,
  last_error text,
  lease_owner text,
  -- While held: when the lease ends. Once released: when it was let go (idle lanes are swept a day later).
  lease_until timestamptz,
  PRIMARY KEY (endpoint_id, stream_key)
);
CREATE INDEX webhook_lanes_due ON webhook_lanes (next_attempt_at) WHERE next_attempt_at IS NOT NULL AND parked_at IS NULL;
