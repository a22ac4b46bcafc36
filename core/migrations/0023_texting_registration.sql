-- Up Migration

-- A number's texting registration (docs/messaging.md, "Texting registration"): `unregistered` without a campaign,
-- `pending` once operation 23 names one, `approved` or `rejected` by the admin command
-- (`switchboard numbers texting`). Only `approved` numbers send (operation 67, 403 sender_not_eligible).
ALTER TABLE phone_numbers ADD COLUMN texting_registration text NOT NULL DEFAULT 'unregistered'
  CHECK (texting_registration IN ('unregistered', 'pending', 'approved', 'rejected'));
-- Numbers that showed `registered` (a campaign id set through operation 23) were never decided by anyone: they
-- wait for the admin's decision like any campaign named from now on.
UPDATE phone_numbers SET texting_registration = 'pending' WHERE texting_campaign_id IS NOT NULL;
-- A campaign id and a registration go together: no campaign is `unregistered`, and `unregistered` has none.
ALTER TABLE phone_numbers ADD CONSTRAINT phone_numbers_texting_registration_campaign
  CHECK ((texting_campaign_id IS NULL) = (texting_registration = 'unregistered'));
