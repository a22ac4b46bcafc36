-- Up Migration

-- The Engine custom resource (`namespace/name`) that declares a carrier in its spec; null for one added with
-- `switchboard carriers add`. The operator writes and removes only the carriers of the Engine it reconciles, and
-- neither it nor the CLI overwrites a carrier declared elsewhere (docs/kubernetes.md, Engine pools).
ALTER TABLE carriers ADD COLUMN engine text;
CREATE INDEX carriers_engine ON carriers (engine) WHERE engine IS NOT NULL;
