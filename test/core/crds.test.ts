/**
 * The CustomResourceDefinitions in crds/ (core/resources/crds.ts, docs/kubernetes.md): what `npm run crds` writes,
 * valid CRDs by Kubernetes' own schema (kubernetes-models), structural, and with CEL rules that evaluate as meant
 * (@marcbachmann/cel-js) on real specs, which the CRDs' schemas accept while they refuse bad ones.
 */
import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { evaluate } from '@marcbachmann/cel-js';
import test from 'ava';
import { CustomResourceDefinition } from 'kubernetes-models/apiextensions.k8s.io/v1/CustomResourceDefinition';
import { parse } from 'yaml';
import { crdFiles, customResourceDefinitions, structuralSchema } from '../../core/resources/crds.ts';
import { crds, crdValidators, rulesOf, schemaOf } from '../helpers/crd-schema.ts';

/** `npm run crds` writes the same files to both: crds/ for kubectl, the chart's copy for its crds.yaml template. */
const folders = ['../../crds/', '../../charts/switchboard/files/crds/'].map((path) =>
  fileURLToPath(new URL(path, import.meta.url)),
);

type Json = Record<string, unknown>;

const workspaceId = '0b5c3a2e-6f7d-4a8b-9c1d-2e3f4a5b6c7d';
const queueId = '1c6d4b3f-7a8e-4b9c-8d2e-3f4a5b6c7d8e';
const specs: Record<string, Json> = {
  RoutingPlan: {
    id: '2d7e5c4a-8b9f-4cad-9e3f-4a5b6c7d8e9f',
    applicationId: 'app-1',
    workspaceId,
    name: 'Front desk',
    definition: {
      entry: 'menu',
      steps: {
        menu: {
          type: 'menu',
          prompt: { tts: 'Press 1 for sales.' },
          options: { '1': 'sales' },
          noInput: 'bye',
          timeoutSecs: 5,
          maxRetries: 2,
        },
        sales: { type: 'queue', queueId, maxWaitSecs: 300, overflow: 'bye' },
        bye: { type: 'hangup', message: null },
      },
    },
    publishedVersion: null,
  },
  Queue: {
    id: queueId,
    applicationId: 'app-1',
    workspaceId,
    name: 'Sales',
    strategy: 'longest_idle',
    wrapUpSecs: 30,
    members: ['3e8f6d5b-9cae-4dbe-af4a-5b6c7d8e9fa0'],
  },
  WebhookEndpoint: {
    applicationId: 'app-1',
    url: 'https://hooks.example.com/switchboard',
    eventTypes: ['call.started', 'call.ended'],
    enabled: true,
    secretRef: { name: 'switchboard-webhook', key: 'secret' },
  },
  EnginePool: {
    replicas: 2,
    image: 'ghcr.io/example/switchboard:0.1.0',
    sipPort: 5060,
    rtpPortMin: 20000,
    rtpPortMax: 20999,
    hostNetwork: true,
    resources: { requests: { cpu: '500m', memory: '256Mi' } },
    carriers: [{ name: 'carrier-a', address: '198.51.100.0/24', transport: 'udp' }],
  },
};

const validators = crdValidators();
const accepts = (kind: string, spec: Json) => {
  const validate = validators.get(kind);
  if (!validate) throw new Error(kind);
  const ok = validate({ apiVersion: 'switchboard.dev/v1alpha1', kind, metadata: {}, spec });
  return { ok, errors: JSON.stringify(validate.errors) };
};

test('crds/ holds exactly what npm run crds writes', async (t) => {
  const files = crdFiles();
  for (const folder of folders) {
    const onDisk = (await readdir(folder)).filter((name) => name.endsWith('.yaml')).sort();
    t.deepEqual(onDisk, [...files.keys()].sort(), `${folder}: run npm run crds`);
    for (const [name, text] of files) {
      t.is(await readFile(`${folder}${name}`, 'utf8'), text, `${folder}${name} is stale: run npm run crds`);
    }
  }
  for (const [name, text] of files) t.deepEqual(parse(text), customResourceDefinitions().get(name));
  t.deepEqual(
    crds.map((crd) => crd.metadata.name),
    [
      'routingplans.switchboard.dev',
      'queues.switchboard.dev',
      'webhookendpoints.switchboard.dev',
      'enginepools.switchboard.dev',
    ],
  );
});

test('each CRD is valid by Kubernetes’ own schema for CustomResourceDefinition', (t) => {
  for (const crd of crds) t.notThrows(() => new CustomResourceDefinition(crd as never).validate(), crd.metadata.name);
  // The check can fail: a version without served or storage is refused.
  const broken = structuredClone(crds[0]) as unknown as { spec: { versions: Json[] } };
  delete broken.spec.versions[0]?.served;
  t.throws(() => new CustomResourceDefinition(broken as never).validate());
});

test('the schemas are structural: every node typed, no refs, unions, uniqueItems or additionalProperties beside properties', (t) => {
  const problems: string[] = [];
  const walk = (node: Json, where: string) => {
    if (!('type' in node) && node['x-kubernetes-preserve-unknown-fields'] !== true) problems.push(`${where}: no type`);
    for (const key of ['$ref', '$id', 'anyOf', 'oneOf', 'allOf', 'not', 'const', 'patternProperties', 'uniqueItems']) {
      if (key in node) problems.push(`${where}: ${key}`);
    }
    if ('properties' in node && 'additionalProperties' in node)
      problems.push(`${where}: properties and additionalProperties`);
    if (node.additionalProperties === false) problems.push(`${where}: additionalProperties false`);
    for (const [name, child] of Object.entries((node.properties ?? {}) as Record<string, Json>))
      walk(child, `${where}.${name}`);
    if (node.items) walk(node.items as Json, `${where}[]`);
    if (typeof node.additionalProperties === 'object') walk(node.additionalProperties as Json, `${where}{}`);
  };
  for (const crd of crds) walk(schemaOf(crd.spec.names.kind), crd.spec.names.kind);
  t.deepEqual(problems, []);
  // What the conversion does with the shapes TypeBox makes.
  t.deepEqual(structuralSchema({ anyOf: [{ type: 'integer', minimum: 1 }, { type: 'null' }] }), {
    type: 'integer',
    minimum: 1,
    nullable: true,
  });
  t.deepEqual(structuralSchema({ anyOf: [{ const: 'a' }, { const: 'b' }] }), { type: 'string', enum: ['a', 'b'] });
  t.deepEqual(structuralSchema({ type: 'array', items: { type: 'string' }, uniqueItems: true }), {
    type: 'array',
    items: { type: 'string' },
    'x-kubernetes-list-type': 'set',
  });
  t.throws(() => structuralSchema({ anyOf: [{ type: 'string' }, { type: 'integer' }] }), { message: /union/ });
});

test('a whole workspace’s specs are accepted; wrong ones are refused by the CRD schemas', (t) => {
  for (const [kind, spec] of Object.entries(specs)) {
    const { ok, errors } = accepts(kind, spec);
    t.true(ok, `${kind}: ${errors}`);
  }
  t.false(accepts('Queue', { ...specs.Queue, strategy: 'random' }).ok, 'an unknown strategy');
  t.false(accepts('Queue', { ...specs.Queue, workspaceId: 'not-a-uuid' }).ok, 'a workspace that is not a UUID');
  t.false(accepts('WebhookEndpoint', { ...specs.WebhookEndpoint, eventTypes: ['call.exploded'] }).ok);
  t.false(accepts('EnginePool', { ...specs.EnginePool, replicas: -1 }).ok);
  t.false(accepts('EnginePool', { ...specs.EnginePool, resources: { requests: { cpu: 'lots' } } }).ok);
  t.false(accepts('RoutingPlan', { ...specs.RoutingPlan, definition: { steps: {} } }).ok, 'a definition without entry');
  // Steps keep their fields (a union Kubernetes cannot describe): their shape is the validator's to check.
  const steps = (specs.RoutingPlan?.definition as Json).steps as Json;
  t.true(
    accepts('RoutingPlan', {
      ...specs.RoutingPlan,
      definition: { entry: 'x', steps: { ...steps, x: { type: 'odd' } } },
    }).ok,
  );
});

test('CEL rules: ids, application and workspace never change; https URLs; RTP range in order', (t) => {
  const holds = (kind: string, self: Json, oldSelf?: Json) =>
    rulesOf(kind)
      .filter((rule) => oldSelf !== undefined || !rule.rule.includes('oldSelf'))
      .filter((rule) => evaluate(rule.rule, { self, oldSelf: oldSelf ?? {} }) !== true)
      .map((rule) => rule.message);
  for (const [kind, spec] of Object.entries(specs)) {
    t.deepEqual(holds(kind, spec), [], `${kind} on create`);
    t.deepEqual(holds(kind, spec, spec), [], `${kind} updated unchanged`);
  }
  const plan = specs.RoutingPlan as Json;
  t.deepEqual(holds('RoutingPlan', { ...plan, id: queueId }, plan), ['spec.id cannot change once set']);
  const { id: _, ...withoutId } = plan;
  t.deepEqual(holds('RoutingPlan', withoutId, plan), ['spec.id cannot change once set'], 'an id cannot be removed');
  t.deepEqual(holds('RoutingPlan', plan, withoutId), [], 'an id may be set later');
  t.deepEqual(holds('Queue', { ...specs.Queue, workspaceId: queueId }, specs.Queue), [
    'spec.workspaceId cannot change',
  ]);
  t.deepEqual(holds('WebhookEndpoint', { ...specs.WebhookEndpoint, url: 'http://hooks.example.com/' }), [
    'spec.url must be an https URL',
  ]);
  t.deepEqual(holds('EnginePool', { ...specs.EnginePool, rtpPortMin: 30000, rtpPortMax: 20000 }), [
    'spec.rtpPortMin must not be above spec.rtpPortMax',
  ]);
});
