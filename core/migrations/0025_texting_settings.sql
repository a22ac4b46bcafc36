-- Up Migration

-- A workspace's texting settings (docs/messaging.md, "Receiving"): `{ helpText }`, what an inbound HELP is answered
-- with. An empty object (or a null helpText) is the default text ("Reply STOP to unsubscribe.").
ALTER TABLE workspaces ADD COLUMN texting jsonb NOT NULL DEFAULT '{}'::jsonb;

-- An inbound message whose concatenated parts did not all come within an hour (docs/messaging.md, "Receiving"): the
-- parts that came, in order, made into one message marked incomplete.
ALTER TABLE messages ADD COLUMN incomplete boolean NOT NULL DEFAULT false;

-- The sweep finds the inbound parts still waiting for siblings, oldest first.
CREATE INDEX message_parts_inbound_waiting ON message_parts (created_at) WHERE direction = 'inbound'
  AND state = 'waiting';
