-- Up Migration

-- The API's writes of custom resources in a cluster (docs/kubernetes.md, "The API's writes"): the request's
-- transaction records the resource as it must become (`pending`), and the resource is applied to the Kubernetes API
-- once that transaction committed, with no database connection held; then the row keeps the uid and generation the
-- apply answered. A reconcile leaves a resource's records alone while its write is pending, and takes a resource it
-- read before that generation for stale. SQL: core/resources/writes.ts.
CREATE TABLE resource_writes (
  kind text NOT NULL,
  namespace text NOT NULL,
  name text NOT NULL,
  -- apply (with spec, labels and the status to write after it) or delete.
  operation text NOT NULL CHECK (operation IN ('apply', 'delete')),
  spec jsonb,
  labels jsonb NOT NULL DEFAULT '{}',
  status jsonb,
  pending boolean NOT NULL,
  -- Each write recorded has an id of its own: carrying it out changes the row only while it is still that write.
  write_id uuid NOT NULL DEFAULT gen_random_uuid(),
  written_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  attempts integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  last_error text,
  -- The resource as the last apply answered (a delete keeps those of the resource it deleted).
  uid text,
  generation bigint,
  PRIMARY KEY (kind, namespace, name)
);
CREATE INDEX resource_writes_due ON resource_writes (next_attempt_at) WHERE pending;
