-- Up Migration

-- Agents' states and queue entries (docs/contact-center.md). An agent is a member; a member without a row here is
-- `offline`. `idle_since` orders longest-idle distribution, `last_offered_at` round robin, `calls_answered` fewest
-- calls; `missed_offers` counts offers missed in a row (the third sends the agent away); `entry_id` is the queue
-- entry the agent is offered or on a call for; `wrap_up_until` ends a wrap-up. SQL: core/agents/agent-states.ts.
CREATE TABLE agent_states (
  member_id uuid PRIMARY KEY REFERENCES members (id) ON DELETE CASCADE,
  workspace_id uuid NOT NULL REFERENCES workspaces (id),
  state text NOT NULL CHECK (state IN ('offline', 'available', 'offered', 'on_call', 'wrap_up', 'away')),
  reason text CHECK (char_length(reason) BETWEEN 1 AND 200),
  actor text,
  changed_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  idle_since timestamptz,
  missed_offers integer NOT NULL DEFAULT 0 CHECK (missed_offers >= 0),
  last_offered_at timestamptz,
  calls_answered bigint NOT NULL DEFAULT 0 CHECK (calls_answered >= 0),
  entry_id uuid,
  wrap_up_until timestamptz,
  CHECK ((state IN ('offered', 'on_call')) = (entry_id IS NOT NULL)),
  CHECK ((state = 'wrap_up') = (wrap_up_until IS NOT NULL))
);
CREATE INDEX agent_states_workspace ON agent_states (workspace_id, state);
CREATE INDEX agent_states_wrap_up ON agent_states (wrap_up_until) WHERE state = 'wrap_up';
CREATE INDEX agent_states_entry ON agent_states (entry_id) WHERE entry_id IS NOT NULL;

-- One call waiting in one queue. `waiting` (or `callback`: the caller hung up to be called back) until an agent is
-- offered it (`offered`), then `connected`; or it leaves `abandoned` or `overflowed`. `engine_owner` is the engine
-- holding the call (it rings the agent). SQL: core/queues/entries.ts.
CREATE TABLE queue_entries (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  queue_id uuid NOT NULL REFERENCES queues (id) ON DELETE CASCADE,
  call_id uuid NOT NULL REFERENCES calls (id),
  workspace_id uuid NOT NULL REFERENCES workspaces (id),
  priority integer NOT NULL DEFAULT 0,
  state text NOT NULL DEFAULT 'waiting'
    CHECK (state IN ('waiting', 'offered', 'connected', 'abandoned', 'overflowed', 'callback')),
  engine_owner text NOT NULL,
  callback_number text,
  enqueued_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  offered_at timestamptz,
  connected_at timestamptz,
  left_at timestamptz,
  CHECK ((left_at IS NULL) = (state IN ('waiting', 'offered', 'callback')))
);
-- The line of a queue: entries still in it, highest priority first, then longest waiting.
CREATE INDEX queue_entries_line ON queue_entries (queue_id, priority DESC, enqueued_at, id) WHERE left_at IS NULL;
-- The live figures' last interval.
CREATE INDEX queue_entries_left ON queue_entries (queue_id, left_at) WHERE left_at IS NOT NULL;
CREATE INDEX queue_entries_call ON queue_entries (call_id);
