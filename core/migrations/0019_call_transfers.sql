-- Up Migration

-- Operation 53 (`POST /calls/{id}/transfer`, docs/contact-center.md "Transfer"): the transfer asked of a connected
-- call as the typed call command records it (core/calls/commands.ts): a new transfer `{ id, target, warm, actor }` or
-- the end of a warm one `{ id, finish }`. The engine holding the call clears it as it takes it up (by its id, so the
-- notice and the re-read never act twice); a new connection of the call clears it too.
ALTER TABLE calls ADD COLUMN transfer_request jsonb;

-- The warm transfer being consulted now (its `{ target, actor }`), written by the engine when the agent starts
-- talking to the target and cleared when the transfer completes or is cancelled: the API answers 409 to a second
-- transfer meanwhile, and to `complete` or `cancel` when there is none.
ALTER TABLE calls ADD COLUMN transfer_consulting jsonb;
