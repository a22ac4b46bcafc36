-- Up Migration

-- The live figures (operation 81 and the queue gauges; docs/contact-center.md, "Live figures") read live rows only:
-- a workspace's calls not ended, by state (core/calls/calls.ts, `liveCallCounts`), and the agents who are not
-- offline, of every workspace (core/agents/agent-states.ts, `queuesWithAgentsOn`). Queue entries have theirs
-- (migration 0014: `queue_entries_line` and `queue_entries_left`).
CREATE INDEX calls_workspace_live ON calls (workspace_id, state) WHERE ended_at IS NULL;
CREATE INDEX agent_states_signed_in ON agent_states (workspace_id) WHERE state <> 'offline';
