-- Up Migration

-- A queue's own hold prompt and its announcements (docs/contact-center.md, "Queue entries and distribution").
-- `hold_prompt` is a prompt as a menu step's (`{ "tts": … }` or `{ "audioUrl": … }`), played looped to waiting
-- callers instead of the default hold music; NULL: the default music. A waiting caller hears their position and/or
-- expected wait every `announce_interval_secs` when the queue asks for them. SQL: core/routing/queues.ts.
ALTER TABLE queues
  ADD COLUMN hold_prompt jsonb,
  ADD COLUMN announce_position boolean NOT NULL DEFAULT false,
  ADD COLUMN announce_expected_wait boolean NOT NULL DEFAULT false,
  ADD COLUMN announce_interval_secs integer NOT NULL DEFAULT 60 CHECK (announce_interval_secs BETWEEN 15 AND 600);
