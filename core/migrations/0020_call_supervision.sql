-- Up Migration

-- Operation 56 (`POST /calls/{id}/supervise`, docs/contact-center.md "Call control"): the supervisions asked of a
-- connected call as the typed call command records them (core/calls/commands.ts), one per supervisor:
-- `{ "<memberId>": { id, mode, actor } }`. A second request for the same supervisor replaces theirs (the mode changes).
-- The engine holding the call removes a supervisor's request as it takes it up (by its id, so the notice and the
-- re-read never act twice).
ALTER TABLE calls ADD COLUMN supervise_requests jsonb;
