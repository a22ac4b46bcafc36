-- Up Migration

-- MMS (docs/messaging.md, "MMS"): an outbound MMS is one outbound part that travels to the carrier's HTTP media
-- interface instead of its SMPP session. `channel` keeps the SMPP link away from it (and the MMS sender away from SMPP
-- parts); receipts still find it by (carrier, carrier_message_id), whichever way they come.
ALTER TABLE message_parts ADD COLUMN channel text NOT NULL DEFAULT 'smpp' CHECK (channel IN ('smpp', 'mms'));
-- The MMS sender's take: waiting parts, and parts whose sender's lease ran out (its engine stopped mid-POST).
CREATE INDEX message_parts_mms ON message_parts (created_at)
  WHERE direction = 'outbound' AND channel = 'mms' AND state IN ('waiting', 'submitted');
