-- Up Migration

-- A carrier's messaging settings (docs/messaging.md, "Carriers speak SMPP 3.4"): where its SMSC listens and the
-- account the engine binds with, `{ host, port, systemId, password, systemType, tls, throughput }`, the password
-- sealed as the SIP one is (core/sealing.ts). NULL: the carrier carries no messages.
ALTER TABLE carriers ADD COLUMN messaging jsonb;
