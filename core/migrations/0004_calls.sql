-- Up Migration

-- Carriers: the SIP peers calls come from and go out through (switchboard carriers add).
CREATE TABLE carriers (
  name text PRIMARY KEY CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$'),
  -- Where INVITEs may come from: a host name, an address, or a CIDR range.
  address text NOT NULL,
  port integer NOT NULL CHECK (port BETWEEN 1 AND 65535),
  transport text NOT NULL CHECK (transport IN ('udp', 'tcp')),
  username text,
  -- Sealed like webhook secrets (AES-256-GCM under a key derived from the service secret).
  password text,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE TABLE calls (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  application_id text NOT NULL REFERENCES applications (id),
  workspace_id uuid NOT NULL REFERENCES workspaces (id),
  direction text NOT NULL,
  from_number text NOT NULL,
  to_number text NOT NULL,
  phone_number_id uuid REFERENCES phone_numbers (id),
  routing_plan_id uuid REFERENCES routing_plans (id),
  routing_plan_version integer,
  state text NOT NULL,
  started_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  answered_at timestamptz,
  connected_at timestamptz,
  ended_at timestamptz,
  end_reason text,
  -- The engine process that holds the call's media (it alone can act on it).
  engine_owner text NOT NULL,
  sip_call_id text,
  -- When the API asked the owning engine to hang up (the notice is a wake-up; this row is the request).
  hangup_requested_at timestamptz,
  -- The plan steps the call went through, in order (written when the plan run ends).
  steps_taken text[] NOT NULL DEFAULT '{}',
  created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX calls_page ON calls (workspace_id, created_at DESC, id DESC);
CREATE INDEX calls_live ON calls (engine_owner) WHERE ended_at IS NULL;

CREATE TABLE call_legs (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  call_id uuid NOT NULL REFERENCES calls (id),
  -- 'caller' (the inbound leg), 'forward' (a dial-out of a forward step).
  role text NOT NULL,
  remote text NOT NULL,
  state text NOT NULL,
  sip_call_id text,
  started_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  answered_at timestamptz,
  ended_at timestamptz,
  -- RTP packets the engine received from and sent to this leg (written when the leg ends).
  packets_in bigint NOT NULL DEFAULT 0,
  packets_out bigint NOT NULL DEFAULT 0
);
CREATE INDEX call_legs_call ON call_legs (call_id, started_at);

CREATE TABLE recordings (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  call_id uuid NOT NULL REFERENCES calls (id),
  workspace_id uuid NOT NULL REFERENCES workspaces (id),
  -- 'voicemail' or 'recording'.
  kind text NOT NULL,
  path text NOT NULL,
  duration_ms integer NOT NULL,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX recordings_call ON recordings (call_id);
