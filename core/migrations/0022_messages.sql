-- Up Migration

-- Texting's records (docs/messaging.md, "Records"). A message is one SMS on one of a workspace's numbers, inbound or
-- outbound; it keeps the workspace it was sent or received in even if the number later leaves it.
CREATE TABLE messages (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  application_id text NOT NULL REFERENCES applications (id),
  workspace_id uuid NOT NULL REFERENCES workspaces (id),
  phone_number_id uuid NOT NULL REFERENCES phone_numbers (id),
  direction text NOT NULL CHECK (direction IN ('inbound', 'outbound')),
  from_number text NOT NULL,
  to_number text NOT NULL,
  -- The other end: what GET /messages?peer= filters on, whichever way the message went.
  peer text NOT NULL GENERATED ALWAYS AS (CASE direction WHEN 'outbound' THEN to_number ELSE from_number END) STORED,
  text text NOT NULL,
  -- [{ url, contentType, size }]
  media jsonb NOT NULL DEFAULT '[]',
  -- outbound: queued, sending, sent, delivered, failed; inbound: received.
  status text NOT NULL,
  -- { code, message } of the carrier's refusal or delivery error.
  error jsonb,
  segments integer NOT NULL CHECK (segments >= 0),
  -- The sender credential's actor (null for the service's own replies and for inbound messages).
  actor text,
  -- SHA-256 of from, to, text and media: the same message sent twice within the window is message_conflict.
  dedupe_hash text,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  updated_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX messages_page ON messages (workspace_id, created_at DESC, id DESC);
CREATE INDEX messages_number_page ON messages (workspace_id, phone_number_id, created_at DESC, id DESC);
CREATE INDEX messages_peer_page ON messages (workspace_id, peer, created_at DESC, id DESC);
CREATE INDEX messages_dedupe ON messages (dedupe_hash, created_at DESC) WHERE dedupe_hash IS NOT NULL;

-- One row per status change of a message: its status history (GET /messages/{id}).
CREATE TABLE message_events (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  message_id uuid NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
  status text NOT NULL,
  error jsonb,
  at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX message_events_message ON message_events (message_id, id);

-- The SMPP PDUs of messages. Outbound: one row per part of a message, `waiting` until the carrier's leader takes it,
-- `submitted` while its submit_sm is unanswered, then `acknowledged` (with the carrier's id) or `failed`. Inbound:
-- the parts of a concatenated text waiting for their siblings (`waiting`), and parts already made into a message
-- (`joined`, kept a little while so that a part the carrier repeats after a reconnect is known as a repeat).
CREATE TABLE message_parts (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  direction text NOT NULL CHECK (direction IN ('inbound', 'outbound')),
  -- The carrier the part travels through (the number's when the message was written).
  carrier text NOT NULL,
  message_id uuid REFERENCES messages (id) ON DELETE CASCADE,
  phone_number_id uuid NOT NULL REFERENCES phone_numbers (id),
  part_index integer NOT NULL CHECK (part_index >= 1),
  part_count integer NOT NULL CHECK (part_count >= 1),
  state text NOT NULL CHECK (state IN ('waiting', 'submitted', 'acknowledged', 'failed', 'joined')),
  -- short_message as sent or received, the concatenation header included.
  bytes bytea NOT NULL,
  esm_class smallint NOT NULL,
  data_coding smallint NOT NULL,
  -- Outbound: not taken before (a throttled part), submissions so far, the carrier's id, its receipt, its error.
  not_before timestamptz,
  attempts integer NOT NULL DEFAULT 0,
  submitted_at timestamptz,
  carrier_message_id text,
  -- The receipt's outcome for this part: 'delivered' or 'failed'.
  receipt text CHECK (receipt IN ('delivered', 'failed')),
  error jsonb,
  -- Inbound: who sent it, the concatenation reference, the decoded text, and what identifies a repeat of it.
  peer text,
  reference integer,
  text text,
  digest text,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  CHECK (direction = 'inbound' OR message_id IS NOT NULL),
  CHECK (direction = 'outbound' OR (peer IS NOT NULL AND digest IS NOT NULL))
);
-- The link's take: a carrier's waiting parts, oldest first.
CREATE INDEX message_parts_waiting ON message_parts (carrier, created_at, message_id, part_index)
  WHERE direction = 'outbound' AND state = 'waiting';
-- The requeue after a session ends.
CREATE INDEX message_parts_submitted ON message_parts (carrier) WHERE direction = 'outbound' AND state = 'submitted';
-- A receipt finds its part by the carrier's id.
CREATE INDEX message_parts_carrier_id ON message_parts (carrier, carrier_message_id)
  WHERE carrier_message_id IS NOT NULL;
CREATE INDEX message_parts_message ON message_parts (message_id, part_index) WHERE message_id IS NOT NULL;
-- An inbound part's siblings and repeats: the same peer to the same number.
CREATE INDEX message_parts_inbound ON message_parts (phone_number_id, peer, created_at) WHERE direction = 'inbound';
CREATE INDEX message_parts_joined ON message_parts (carrier, created_at) WHERE direction = 'inbound'
  AND state = 'joined';

-- Delivery receipts that overtook the submit_sm_resp they refer to: matched when that answer is recorded.
CREATE TABLE message_receipts (
  carrier text NOT NULL,
  carrier_message_id text NOT NULL,
  delivered boolean NOT NULL,
  -- The receipt's stat: word as the carrier sent it.
  state text NOT NULL,
  error jsonb,
  received_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  PRIMARY KEY (carrier, carrier_message_id)
);
CREATE INDEX message_receipts_age ON message_receipts (received_at);

-- Peers who opted out of a number's messages (an inbound STOP keyword): nothing is sent to them from it until they
-- opt back in. Kept with the number, whichever workspace holds it: the peer said no to that number.
CREATE TABLE opt_outs (
  phone_number_id uuid NOT NULL REFERENCES phone_numbers (id),
  peer text NOT NULL,
  workspace_id uuid NOT NULL REFERENCES workspaces (id),
  keyword text NOT NULL,
  at timestamptz NOT NULL DEFAULT clock_timestamp(),
  PRIMARY KEY (phone_number_id, peer)
);
