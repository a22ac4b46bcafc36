-- Up Migration

-- A queue entry whose callback the workspace's dial-out policy refused when it was to be dialled (docs/contact-center.md,
-- Callback): it leaves `callback_refused`, and the number is never dialled.
ALTER TABLE queue_entries DROP CONSTRAINT queue_entries_state_check;
ALTER TABLE queue_entries ADD CONSTRAINT queue_entries_state_check
  CHECK (state IN ('waiting', 'offered', 'connected', 'abandoned', 'overflowed', 'callback', 'callback_refused'));
