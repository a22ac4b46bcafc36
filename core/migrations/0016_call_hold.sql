-- Up Migration

-- Operation 54 (`POST /calls/{id}/hold`, docs/contact-center.md "Call control"): the hold asked of a connected call,
-- as the typed call command `hold` records it (core/calls/commands.ts). NULL: nothing asked since the call was last
-- connected (a new connection clears it, so a hold never carries over to the next party).
ALTER TABLE calls ADD COLUMN hold_requested boolean;
