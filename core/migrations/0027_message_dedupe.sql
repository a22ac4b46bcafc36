-- Up Migration

-- The duplicate check of operation 67 (docs/messaging.md, "Sending"; core/messages/dedupe.ts): per dedupe hash
-- (SHA-256 of from, to, text and media), the last message sent with it and when. A send claims its hash's row in one
-- statement (an upsert, which locks the row until commit, so two sends of the same message at once are decided one
-- after the other) and learns whether a message within the window came before it. No foreign key: the row is written
-- before its message, in the same transaction. Rows past the window are dropped by the messages sweep.
CREATE TABLE message_dedupe (
  hash text PRIMARY KEY,
  message_id uuid NOT NULL,
  at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX message_dedupe_age ON message_dedupe (at);
-- The check no longer reads messages by their hash.
DROP INDEX messages_dedupe;
