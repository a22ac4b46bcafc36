-- Up Migration

-- Registration bindings of SIP devices (docs/phones.md, "SIP devices and the registrar"): one row per contact a
-- device registered, with where the REGISTER came from. INVITEs to the device go to that source (address, port,
-- transport), never to the host its Contact names: a Contact is the device's own word, and would let anyone holding
-- credentials aim the engine's INVITEs at another host. `engine_owner` is the engine process that took the REGISTER
-- (over TCP it holds the connection the INVITE must go on). A binding belongs to the credentials it was made with:
-- deleting them (with the device, or when the device is re-registered as another kind) deletes it, and issuing new
-- credentials deletes the device's bindings in the same statement (core/devices/sip-credentials.ts), so a phone
-- registered with the old password is never rung again.
ALTER TABLE sip_credentials ADD CONSTRAINT sip_credentials_device_username UNIQUE (device_id, username);

CREATE TABLE sip_bindings (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  device_id uuid NOT NULL REFERENCES devices (id) ON DELETE CASCADE,
  username text NOT NULL,
  -- The Contact URI as the device wrote it (at most 1,024 characters), for the 200 OK's list of contacts.
  contact_uri text NOT NULL CHECK (char_length(contact_uri) BETWEEN 1 AND 1024),
  source_protocol text NOT NULL CHECK (source_protocol IN ('udp', 'tcp')),
  source_address text NOT NULL,
  source_port integer NOT NULL CHECK (source_port BETWEEN 1 AND 65535),
  -- RFC 3261 section 10.3: a refresh with the same Call-ID must carry a higher CSeq.
  call_id text NOT NULL,
  cseq bigint NOT NULL CHECK (cseq >= 0),
  expires_at timestamptz NOT NULL,
  engine_owner text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  updated_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  UNIQUE (device_id, contact_uri),
  FOREIGN KEY (device_id, username) REFERENCES sip_credentials (device_id, username) ON DELETE CASCADE
);
-- The sweep of expired bindings.
CREATE INDEX sip_bindings_expiry ON sip_bindings (expires_at);
