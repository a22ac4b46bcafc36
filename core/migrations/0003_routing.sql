-- Up Migration

-- Custom resources (RoutingPlan, Queue, later WebhookEndpoint and Engine) when no Kubernetes cluster holds them:
-- the PostgreSQL side of the ResourceStore interface (core/resources/). One row per resource; a deleted resource
-- stays as a tombstone (deleted = true) so that watchers see its deletion, and is purged later.
CREATE SEQUENCE resource_versions;

CREATE TABLE resources (
  kind text NOT NULL,
  namespace text NOT NULL,
  name text NOT NULL,
  uid uuid NOT NULL DEFAULT gen_random_uuid(),
  resource_version bigint NOT NULL,
  -- The resourceVersion it was created with (a watch reports that change as ADDED).
  created_version bigint NOT NULL,
  -- Increases when the spec changes (never for status or metadata).
  generation bigint NOT NULL DEFAULT 1,
  labels jsonb NOT NULL DEFAULT '{}',
  spec jsonb NOT NULL,
  status jsonb NOT NULL DEFAULT '{}',
  finalizers text[] NOT NULL DEFAULT '{}',
  deletion_timestamp timestamptz,
  deleted boolean NOT NULL DEFAULT false,
  field_manager text,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  updated_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  -- Watch position: the writing transaction, as for the event log (a watcher reads only below the horizon of
  -- transactions still running, so a late committer is never skipped).
  tx_id xid8 NOT NULL DEFAULT pg_current_xact_id(),
  PRIMARY KEY (kind, namespace, name)
);
CREATE INDEX resources_watch ON resources (kind, namespace, tx_id, resource_version);

-- The service's own numbers. workspace_id null: in the inventory, free to claim.
CREATE TABLE phone_numbers (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  e164 text NOT NULL UNIQUE CHECK (e164 ~ '^\+[1-9][0-9]{1,14}$'),
  carrier text NOT NULL,
  capabilities text[] NOT NULL,
  -- From the number (libphonenumber): its ISO region and national digits, for search by area code.
  region text,
  national_number text NOT NULL,
  workspace_id uuid REFERENCES workspaces (id),
  name text,
  -- 'service': calls run through routing plans on this service; 'off': no voice.
  voice_lane text NOT NULL DEFAULT 'service',
  texting_campaign_id text,
  emergency_address jsonb,
  routing_plan_id uuid,
  assigned_at timestamptz,
  claimed_at timestamptz,
  imported_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  updated_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX phone_numbers_page ON phone_numbers (workspace_id, claimed_at DESC, id DESC);
CREATE INDEX phone_numbers_inventory ON phone_numbers (region, national_number) WHERE workspace_id IS NULL;
CREATE INDEX phone_numbers_plan ON phone_numbers (routing_plan_id) WHERE routing_plan_id IS NOT NULL;

CREATE TABLE queues (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  workspace_id uuid NOT NULL REFERENCES workspaces (id),
  name text NOT NULL,
  strategy text NOT NULL,
  wrap_up_secs integer NOT NULL,
  member_ids uuid[] NOT NULL,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  updated_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX queues_page ON queues (workspace_id, created_at DESC, id DESC);

CREATE TABLE schedules (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  workspace_id uuid NOT NULL REFERENCES workspaces (id),
  name text NOT NULL,
  timezone text NOT NULL,
  weekly_hours jsonb NOT NULL,
  exceptions jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  updated_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX schedules_page ON schedules (workspace_id, created_at DESC, id DESC);

CREATE TABLE ai_agents (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  workspace_id uuid NOT NULL REFERENCES workspaces (id),
  name text NOT NULL,
  provider text NOT NULL,
  -- { url, model, instructions }; the provider's API key is sealed apart and never shown.
  connection jsonb NOT NULL,
  api_key text,
  minute_cap integer,
  seconds_used bigint NOT NULL DEFAULT 0,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  updated_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX ai_agents_page ON ai_agents (workspace_id, created_at DESC, id DESC);

CREATE TABLE routing_plans (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  workspace_id uuid NOT NULL REFERENCES workspaces (id),
  name text NOT NULL,
  newest_version integer NOT NULL,
  published_version integer,
  published_at timestamptz,
  archived_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  updated_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX routing_plans_page ON routing_plans (workspace_id, created_at DESC, id DESC) WHERE archived_at IS NULL;

-- Immutable versions. The definition is kept as sent (json keeps key order); the ids it refers to are kept apart
-- so that deleting a queue, schedule or AI agent can find the plans that use it.
CREATE TABLE routing_plan_versions (
  plan_id uuid NOT NULL REFERENCES routing_plans (id),
  version integer NOT NULL CHECK (version > 0),
  definition json NOT NULL,
  schedule_ids uuid[] NOT NULL,
  queue_ids uuid[] NOT NULL,
  ai_agent_ids uuid[] NOT NULL,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  PRIMARY KEY (plan_id, version)
);

ALTER TABLE phone_numbers ADD FOREIGN KEY (routing_plan_id) REFERENCES routing_plans (id);
