/**
 * The CustomResourceDefinitions of `switchboard.dev/v1alpha1`, built from the kinds' TypeBox schemas
 * (core/resources/kinds.ts) by pure functions; `npm run crds` writes them to `crds/` and a test fails when the files
 * are stale (docs/kubernetes.md).
 *
 * Kubernetes takes only structural schemas: every node typed, no `$ref`, no `anyOf` that types its branches, no
 * `additionalProperties` beside `properties`, no `uniqueItems`. `structuralSchema` turns the JSON Schema TypeBox
 * makes into that form: a nullable union becomes `nullable`, a union of literals an `enum`, a record
 * (`patternProperties`) `additionalProperties`, a set of scalars `x-kubernetes-list-type: set`, and a union of
 * objects (a routing plan's steps) an object that keeps its fields (`x-kubernetes-preserve-unknown-fields`), whose
 * shape the admission webhook and the operator check with the same validator as the REST API.
 */
import {
  EnginePoolSpec,
  EnginePoolStatus,
  QueueSpec,
  ReconciledStatus,
  RoutingPlanSpec,
  RoutingPlanStatus,
  WebhookEndpointSpec,
} from './kinds.ts';
import { stringify } from 'yaml';
import { type ResourceKind, resourceGroup } from './store.ts';

export const crdVersion = 'v1alpha1';

type Json = Record<string, unknown>;

/** JSON Schema keywords a structural schema keeps as they are. */
const kept = [
  'description',
  'format',
  'pattern',
  'minLength',
  'maxLength',
  'minimum',
  'maximum',
  'exclusiveMinimum',
  'exclusiveMaximum',
  'minItems',
  'maxItems',
  'minProperties',
  'maxProperties',
] as const;

function typeOfValue(value: unknown): string {
  if (typeof value === 'string') return 'string';
  if (typeof value === 'boolean') return 'boolean';
  if (typeof value === 'number') return Number.isInteger(value) ? 'integer' : 'number';
  throw new Error(`cannot type the literal ${JSON.stringify(value)}`);
}

/** The literal values a schema allows, when it is nothing but literals (const or enum). */
function literals(schema: Json): unknown[] | undefined {
  if ('const' in schema) return [schema.const];
  if (Array.isArray(schema.enum)) return schema.enum;
  if (Array.isArray(schema.anyOf)) {
    const parts = (schema.anyOf as Json[]).map(literals);
    if (parts.every((part) => part !== undefined)) return parts.flat();
  }
  return undefined;
}

/** A TypeBox (JSON Schema) node as a Kubernetes structural schema node. */
export function structuralSchema(schema: Json, where = '$'): Json {
  const out: Json = {};
  for (const key of kept) if (key in schema) out[key] = schema[key];

  const values = literals(schema);
  if (values !== undefined) {
    const types = new Set(values.map(typeOfValue));
    if (types.size !== 1) throw new Error(`${where}: literals of mixed types`);
    return { ...out, type: [...types][0], enum: values };
  }

  if (Array.isArray(schema.anyOf)) {
    const branches = schema.anyOf as Json[];
    const nonNull = branches.filter((branch) => branch.type !== 'null');
    const nullable = nonNull.length < branches.length;
    if (nonNull.length === 1) {
      const inner = structuralSchema(nonNull[0] as Json, where);
      return { ...inner, ...out, ...(nullable ? { nullable: true } : {}) };
    }
    if (nonNull.every((branch) => branch.type === 'object')) {
      // A union of object shapes: kept whole; its shape is checked by the validator (webhook, operator).
      return {
        ...out,
        type: 'object',
        'x-kubernetes-preserve-unknown-fields': true,
        ...(nullable ? { nullable } : {}),
      };
    }
    throw new Error(`${where}: a union Kubernetes cannot describe`);
  }

  switch (schema.type) {
    case 'string':
    case 'integer':
    case 'number':
    case 'boolean':
      return { ...out, type: schema.type };
    case 'array': {
      const items = structuralSchema(schema.items as Json, `${where}[]`);
      const scalar = ['string', 'integer', 'number', 'boolean'].includes(items.type as string);
      return {
        ...out,
        type: 'array',
        items,
        ...(schema.uniqueItems === true && scalar ? { 'x-kubernetes-list-type': 'set' } : {}),
      };
    }
    case 'object': {
      if (schema.patternProperties !== undefined) {
        const [[pattern, values]] = Object.entries(schema.patternProperties as Record<string, Json>) as [
          [string, Json],
        ];
        // Key patterns cannot be said in a structural schema; the validator checks them (`$.steps` names).
        return {
          ...out,
          type: 'object',
          additionalProperties: structuralSchema(values, `${where}{${pattern}}`),
        };
      }
      const properties: Record<string, Json> = {};
      for (const [name, property] of Object.entries((schema.properties ?? {}) as Record<string, Json>)) {
        properties[name] = structuralSchema(property, `${where}.${name}`);
      }
      const required = Array.isArray(schema.required) && schema.required.length > 0 ? schema.required : undefined;
      return { ...out, type: 'object', properties, ...(required ? { required } : {}) };
    }
    default:
      throw new Error(`${where}: no type Kubernetes can describe (${JSON.stringify(Object.keys(schema))})`);
  }
}

interface KindDefinition {
  kind: ResourceKind;
  plural: string;
  shortNames: string[];
  spec: Json;
  status: Json;
  /** CEL rules on the spec (x-kubernetes-validations), transition rules included. */
  specRules: Array<{ rule: string; message: string }>;
  columns: Array<{ name: string; type: string; jsonPath: string; description?: string; priority?: number }>;
  scale?: boolean;
}

const readyColumn = {
  name: 'Ready',
  type: 'string',
  jsonPath: '.status.conditions[?(@.type=="Ready")].status',
  description: 'Reconciled into the records calls and deliveries use',
};
const ageColumn = { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' };

/** Rules every workspace-scoped kind has: its id, application and workspace never change once written. */
const ownership = (scopes: string[]) => [
  { rule: '!has(oldSelf.id) || (has(self.id) && self.id == oldSelf.id)', message: 'spec.id cannot change once set' },
  ...scopes.map((field) => ({
    rule: `self.${field} == oldSelf.${field}`,
    message: `spec.${field} cannot change`,
  })),
];

export const kinds: readonly KindDefinition[] = [
  {
    kind: 'RoutingPlan',
    plural: 'routingplans',
    shortNames: ['plan', 'plans'],
    spec: RoutingPlanSpec as unknown as Json,
    status: RoutingPlanStatus as unknown as Json,
    specRules: ownership(['applicationId', 'workspaceId']),
    columns: [
      { name: 'Plan', type: 'string', jsonPath: '.spec.name' },
      {
        name: 'Published',
        type: 'integer',
        jsonPath: '.status.publishedVersion',
        description: 'The version calls run',
      },
      { name: 'Valid', type: 'string', jsonPath: '.status.conditions[?(@.type=="Valid")].status' },
      readyColumn,
      { name: 'Workspace', type: 'string', jsonPath: '.spec.workspaceId', priority: 1 },
      ageColumn,
    ],
  },
  {
    kind: 'Queue',
    plural: 'queues',
    shortNames: ['sbq'],
    spec: QueueSpec as unknown as Json,
    status: ReconciledStatus as unknown as Json,
    specRules: ownership(['applicationId', 'workspaceId']),
    columns: [
      { name: 'Queue', type: 'string', jsonPath: '.spec.name' },
      { name: 'Strategy', type: 'string', jsonPath: '.spec.strategy' },
      readyColumn,
      { name: 'Workspace', type: 'string', jsonPath: '.spec.workspaceId', priority: 1 },
      ageColumn,
    ],
  },
  {
    kind: 'WebhookEndpoint',
    plural: 'webhookendpoints',
    shortNames: ['webhook', 'webhooks'],
    spec: WebhookEndpointSpec as unknown as Json,
    status: ReconciledStatus as unknown as Json,
    specRules: [
      ...ownership(['applicationId']),
      { rule: "self.url.startsWith('https://')", message: 'spec.url must be an https URL' },
    ],
    columns: [
      { name: 'URL', type: 'string', jsonPath: '.spec.url' },
      { name: 'Enabled', type: 'boolean', jsonPath: '.spec.enabled' },
      readyColumn,
      ageColumn,
    ],
  },
  {
    kind: 'EnginePool',
    plural: 'enginepools',
    shortNames: ['sbe'],
    spec: EnginePoolSpec as unknown as Json,
    status: EnginePoolStatus as unknown as Json,
    specRules: [
      {
        rule: '!has(self.rtpPortMin) || !has(self.rtpPortMax) || self.rtpPortMin <= self.rtpPortMax',
        message: 'spec.rtpPortMin must not be above spec.rtpPortMax',
      },
    ],
    columns: [
      { name: 'Desired', type: 'integer', jsonPath: '.spec.replicas' },
      { name: 'Ready', type: 'integer', jsonPath: '.status.readyReplicas' },
      { name: 'Image', type: 'string', jsonPath: '.spec.image', priority: 1 },
      ageColumn,
    ],
    scale: true,
  },
];

/** The CustomResourceDefinition of one kind (apiextensions.k8s.io/v1). */
export function customResourceDefinition(definition: KindDefinition): Json {
  const spec = {
    ...structuralSchema(definition.spec, `${definition.kind}.spec`),
    'x-kubernetes-validations': definition.specRules,
  };
  const status = structuralSchema(definition.status, `${definition.kind}.status`);
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: {
      name: `${definition.plural}.${resourceGroup}`,
      labels: { 'app.kubernetes.io/part-of': 'switchboard' },
    },
    spec: {
      group: resourceGroup,
      names: {
        kind: definition.kind,
        listKind: `${definition.kind}List`,
        plural: definition.plural,
        singular: definition.kind.toLowerCase(),
        shortNames: definition.shortNames,
        categories: ['switchboard'],
      },
      scope: 'Namespaced',
      versions: [
        {
          name: crdVersion,
          served: true,
          storage: true,
          schema: {
            openAPIV3Schema: {
              type: 'object',
              description: `A switchboard ${definition.kind} (generated from the API's schemas by npm run crds)`,
              properties: {
                apiVersion: { type: 'string' },
                kind: { type: 'string' },
                metadata: { type: 'object' },
                spec,
                status,
              },
              required: ['spec'],
            },
          },
          subresources: {
            status: {},
            ...(definition.scale
              ? { scale: { specReplicasPath: '.spec.replicas', statusReplicasPath: '.status.readyReplicas' } }
              : {}),
          },
          additionalPrinterColumns: definition.columns,
        },
      ],
    },
  };
}

/** Every CRD, by the file name it is written to in `crds/`. */
export function customResourceDefinitions(): Map<string, Json> {
  return new Map(
    kinds.map((definition) => [`${resourceGroup}_${definition.plural}.yaml`, customResourceDefinition(definition)]),
  );
}

/** The text of each file in `crds/`: what `npm run crds` writes and the freshness test compares. */
export function crdFiles(): Map<string, string> {
  const files = new Map<string, string>();
  for (const [name, crd] of customResourceDefinitions()) {
    files.set(
      name,
      `# Generated by \`npm run crds\` from core/resources/kinds.ts; do not edit.\n${stringify(crd, { lineWidth: 0 })}`,
    );
  }
  return files;
}
