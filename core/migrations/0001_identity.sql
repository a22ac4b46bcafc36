-- Up Migration

-- Secrets the service generates for itself (token and cursor signing) when SWITCHBOARD_SECRET is not set.
CREATE TABLE service_secrets (
  name text PRIMARY KEY,
  value text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE applications (
  id text PRIMARY KEY CHECK (id ~ '^[a-z][a-z0-9_-]{1,63}$'),
  -- The legacy application secret (header x-service-application), stored only as a SHA-256 hash.
  legacy_secret_hash bytea UNIQUE,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE TABLE workspaces (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  application_id text NOT NULL REFERENCES applications (id),
  external_workspace_id text NOT NULL CHECK (char_length(external_workspace_id) BETWEEN 1 AND 200),
  name text NOT NULL,
  timezone text NOT NULL,
  destination_policy jsonb NOT NULL,
  limits jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  updated_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  UNIQUE (application_id, external_workspace_id)
);
CREATE INDEX workspaces_page ON workspaces (application_id, created_at DESC, id DESC);

-- Application keys (workspace_id null) and workspace keys: random secrets, stored only as SHA-256 hashes.
CREATE TABLE api_keys (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  application_id text NOT NULL REFERENCES applications (id),
  workspace_id uuid REFERENCES workspaces (id),
  name text,
  prefix text NOT NULL,
  key_hash bytea NOT NULL UNIQUE,
  scopes text[] NOT NULL,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  last_used_at timestamptz,
  -- When the key stops working: now for an immediate revocation, later for a rotation with overlap.
  revoked_at timestamptz
);
CREATE INDEX api_keys_page ON api_keys (application_id, created_at DESC, id DESC);

CREATE TABLE app_users (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  workspace_id uuid NOT NULL REFERENCES workspaces (id),
  external_user_id text NOT NULL CHECK (char_length(external_user_id) BETWEEN 1 AND 200),
  display_name text NOT NULL,
  cell text,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  removed_at timestamptz
);
CREATE UNIQUE INDEX app_users_external_id ON app_users (workspace_id, external_user_id) WHERE removed_at IS NULL;
CREATE INDEX app_users_page ON app_users (workspace_id, created_at DESC, id DESC) WHERE removed_at IS NULL;

CREATE TABLE members (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  workspace_id uuid NOT NULL REFERENCES workspaces (id),
  email text NOT NULL,
  name text,
  scopes text[] NOT NULL,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE UNIQUE INDEX members_email ON members (workspace_id, lower(email));
CREATE INDEX members_page ON members (workspace_id, created_at DESC, id DESC);
CREATE INDEX members_by_email ON members (lower(email));

-- Stored answers of mutations, per credential scope and idempotency key, kept 24 hours.
CREATE TABLE idempotency_records (
  scope text NOT NULL,
  key text NOT NULL,
  fingerprint bytea NOT NULL,
  status_code integer NOT NULL,
  response_body text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (scope, key)
);
CREATE INDEX idempotency_records_age ON idempotency_records (created_at);
