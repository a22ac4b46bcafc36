-- Up Migration

-- Tombstones (deleted resources kept so watchers see the deletion) are purged once old (docs/routing-plans.md,
-- PostgreSQL store). The newest watch position purged, per kind and namespace: a watch from an older position could
-- miss a deletion, so it gets ResourceVersionExpired (Kubernetes: 410 Gone) and lists again.
CREATE TABLE resource_compactions (
  kind text NOT NULL,
  namespace text NOT NULL,
  tx_id xid8 NOT NULL,
  resource_version bigint NOT NULL,
  PRIMARY KEY (kind, namespace)
);
