-- Up Migration

-- Offers (docs/phones.md): one device asked to take one call in one round of the `ring` step, with the engine's
-- WebRTC SDP offer for that device's leg. `offered` while it rings; then
-- `accepted` (the device's SDP answer kept), `declined` by the device, `withdrawn` (another device of the call won,
-- the caller hung up, the round ended, the device's presence lapsed) or `expired` (its expires_at passed). Every
-- change of a call's offers takes the call row's lock first (core/devices/offers.ts), so the first accept wins.
CREATE TABLE offers (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  call_id uuid NOT NULL REFERENCES calls (id),
  device_id uuid NOT NULL REFERENCES devices (id) ON DELETE CASCADE,
  workspace_id uuid NOT NULL REFERENCES workspaces (id),
  -- The round of the ring step (call.ringing's ring.ringSeq).
  ring_seq integer NOT NULL CHECK (ring_seq > 0),
  sdp_offer text NOT NULL,
  state text NOT NULL DEFAULT 'offered' CHECK (state IN ('offered', 'accepted', 'declined', 'withdrawn', 'expired')),
  sdp_answer text,
  expires_at timestamptz NOT NULL,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  decided_at timestamptz,
  UNIQUE (call_id, ring_seq, device_id),
  CHECK ((state = 'accepted') = (sdp_answer IS NOT NULL)),
  CHECK ((state = 'offered') = (decided_at IS NULL))
);
-- A device's waiting offers (the long-poll), newest first.
CREATE INDEX offers_device_waiting ON offers (device_id, created_at DESC, id DESC) WHERE state = 'offered';
-- A call's offers (withdrawn together, the winner found by the engine).
CREATE INDEX offers_call ON offers (call_id, ring_seq);
-- The sweeps of offers past their expiry.
CREATE INDEX offers_expiry ON offers (expires_at) WHERE state = 'offered';
