/**
 * The CRDs' structural schemas as JSON Schema validators (ajv), so a test can hold a custom resource to what the API
 * server would: test/core/crds.test.ts (the specs of a workspace) and test/charts/chart.test.ts (examples/ and the chart's Engine).
 */
import { Ajv, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import { customResourceDefinitions } from '../../core/resources/crds.ts';

type Json = Record<string, unknown>;

export interface CelRule {
  rule: string;
  message: string;
}

export interface Crd {
  metadata: { name: string };
  spec: {
    names: { kind: string };
    versions: Array<{
      schema: {
        openAPIV3Schema: Json & { properties: { spec: Json & { 'x-kubernetes-validations': CelRule[] } } };
      };
    }>;
  };
}

/** A structural schema as JSON Schema for ajv: `nullable` as a null type; the x-kubernetes-* keys left to ajv's non-strict mode. */
export function asJsonSchema(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(asJsonSchema);
  if (node === null || typeof node !== 'object') return node;
  const out: Json = {};
  for (const [key, value] of Object.entries(node as Json)) {
    if (key === 'nullable') continue;
    out[key] = key === 'enum' || key === 'required' ? value : asJsonSchema(value);
  }
  if ((node as Json).nullable === true) {
    out.type = [(node as Json).type, 'null'];
    if (Array.isArray(out.enum)) out.enum = [...(out.enum as unknown[]), null];
  }
  if ((node as Json).type === 'object' && (node as Json).properties && !('additionalProperties' in (node as Json))) {
    // Kubernetes prunes unknown fields; here they are refused, so a test spec cannot carry a field the CRD drops.
    out.additionalProperties = (node as Json)['x-kubernetes-preserve-unknown-fields'] === true;
  }
  return out;
}

/** The CRDs `npm run crds` writes, in kind order. */
export const crds = [...customResourceDefinitions().values()] as unknown as Crd[];

export const crdOf = (kind: string): Crd => {
  const crd = crds.find((candidate) => candidate.spec.names.kind === kind);
  if (crd === undefined) throw new Error(`no CRD of kind ${kind}`);
  return crd;
};
export const schemaOf = (kind: string) => crdOf(kind).spec.versions[0]?.schema.openAPIV3Schema as Json;
export const rulesOf = (kind: string): CelRule[] =>
  crdOf(kind).spec.versions[0]?.schema.openAPIV3Schema.properties.spec['x-kubernetes-validations'] ?? [];

/** One ajv validator of whole objects (apiVersion, kind, metadata, spec) per kind. */
export function crdValidators(): Map<string, ValidateFunction> {
  const ajv = new Ajv({ strict: false, allErrors: true });
  addFormats.default(ajv);
  return new Map(
    crds.map((crd) => [crd.spec.names.kind, ajv.compile(asJsonSchema(schemaOf(crd.spec.names.kind)) as Json)]),
  );
}
