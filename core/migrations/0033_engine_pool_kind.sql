-- Up Migration

-- The custom resource that describes an engine pool is the kind EnginePool (it was Engine): the resources kept
-- without a cluster, their compactions and the API's pending writes follow.
UPDATE resources SET kind = 'EnginePool' WHERE kind = 'Engine';
UPDATE resource_compactions SET kind = 'EnginePool' WHERE kind = 'Engine';
UPDATE resource_writes SET kind = 'EnginePool' WHERE kind = 'Engine';
