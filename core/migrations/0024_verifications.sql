-- Up Migration

-- One-time codes (docs/messaging.md, "One-time codes"): a code sent to `to` by SMS or by a call, kept only as an
-- HMAC (the service secret's verification key over the id and the code: six digits are too few for a bare hash).
-- A voice verification keeps its code sealed (core/sealing.ts, the id as associated data) until an engine takes the
-- call, which clears it in the statement that takes it.
CREATE TABLE verifications (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  application_id text NOT NULL REFERENCES applications (id),
  workspace_id uuid NOT NULL REFERENCES workspaces (id),
  to_number text NOT NULL,
  channel text NOT NULL CHECK (channel IN ('sms', 'call')),
  code_hash text NOT NULL,
  status text NOT NULL CHECK (status IN ('pending', 'approved', 'expired', 'spent')),
  -- Wrong codes checked so far (the fifth spends the verification).
  checks integer NOT NULL DEFAULT 0 CHECK (checks >= 0),
  expires_at timestamptz NOT NULL,
  -- SMS: the message that carries the code.
  message_id uuid REFERENCES messages (id),
  -- Call: the code sealed until an engine takes the call; how the call went: waiting (to be taken), placing (taken),
  -- answered (spoken and hung up), unanswered, failed (could not be placed).
  sealed_code text,
  call_state text CHECK (call_state IN ('waiting', 'placing', 'answered', 'unanswered', 'failed')),
  call_owner text,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  updated_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  CHECK ((channel = 'call') = (call_state IS NOT NULL))
);
-- The send limit: a workspace's recent verifications to one recipient.
CREATE INDEX verifications_recipient ON verifications (workspace_id, to_number, created_at DESC);
-- The engines' take: voice verifications still waiting for their call.
CREATE INDEX verifications_calls_waiting ON verifications (created_at) WHERE call_state = 'waiting';
