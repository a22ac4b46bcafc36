-- Up Migration

-- Devices (docs/phones.md): one person's phone, a member's or an application user's (exactly one of the two), in a
-- workspace. A removed user is only marked removed (app_users.removed_at), so removing one deletes their devices in
-- the same transaction (core/identity/users.ts); a member's are deleted with the member row.
CREATE TABLE devices (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  workspace_id uuid NOT NULL REFERENCES workspaces (id),
  member_id uuid REFERENCES members (id) ON DELETE CASCADE,
  app_user_id uuid REFERENCES app_users (id) ON DELETE CASCADE,
  kind text NOT NULL CHECK (kind IN ('browser', 'mobile', 'sip')),
  name text CHECK (char_length(name) BETWEEN 1 AND 100),
  -- The client's own stable id for this phone: registering again with it re-registers the same device.
  client_id text CHECK (char_length(client_id) BETWEEN 1 AND 200),
  -- The presence lease (browser and mobile devices): rung only while it is in the future. A sip device's presence
  -- is its registration binding instead.
  presence_expires_at timestamptz,
  -- The call the device is on; null when free. Set by the ring step once calls ring devices.
  busy_call_id uuid REFERENCES calls (id) ON DELETE SET NULL,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  updated_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  CHECK (num_nonnulls(member_id, app_user_id) = 1)
);
CREATE INDEX devices_page ON devices (workspace_id, created_at DESC, id DESC);
CREATE INDEX devices_member ON devices (member_id, created_at DESC, id DESC) WHERE member_id IS NOT NULL;
CREATE INDEX devices_app_user ON devices (app_user_id, created_at DESC, id DESC) WHERE app_user_id IS NOT NULL;
CREATE UNIQUE INDEX devices_member_client ON devices (member_id, client_id)
  WHERE member_id IS NOT NULL AND client_id IS NOT NULL;
CREATE UNIQUE INDEX devices_app_user_client ON devices (app_user_id, client_id)
  WHERE app_user_id IS NOT NULL AND client_id IS NOT NULL;

-- SIP registration credentials of a sip device: one set per device, replaced when issued again, deleted with the
-- device. The password is sealed (AES-256-GCM, core/sealing.ts) under the key derived for SIP device passwords,
-- bound to the device and username: the registrar needs it back to check a digest.
CREATE TABLE sip_credentials (
  device_id uuid PRIMARY KEY REFERENCES devices (id) ON DELETE CASCADE,
  username text NOT NULL UNIQUE,
  password_sealed text NOT NULL,
  issued_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
