-- Up Migration

-- The ring step's `mode` of the target an offer was made for (docs/phones.md, "Ring modes"): `ring` (the phone
-- rings out loud), `silent` (the phone shows the call without a sound) or `muted` (the phone rings, and the person
-- answers muted). Offers made before this migration rang out loud.
ALTER TABLE offers ADD COLUMN mode text NOT NULL DEFAULT 'ring' CHECK (mode IN ('ring', 'silent', 'muted'));
