/**
 * The Helm chart (charts/switchboard) and the example workspace (examples/), checked without helm or a cluster:
 *
 * - values.yaml and the ci/ values files are accepted by values.schema.json, which refuses unknown keys, wrong
 *   types, enums and bounds; every `.Values` path the templates read exists, and every value is read.
 * - The templates are well formed Go templates (balanced actions and blocks) and, with each action replaced by a
 *   placeholder, well formed YAML whose objects are valid by Kubernetes' schemas (kubernetes-models); the RBAC is
 *   exactly the least privilege the operator and the API need, namespaced; the env names are core/config.ts's.
 * - The EnginePool the chart writes has exactly the fields of EnginePoolSpec, and the engine values are a spec the EnginePool
 *   CRD accepts (ajv, CEL rules).
 * - examples/ is a whole workspace: each resource accepted by its CRD and its CEL rules, the plan valid by the plan
 *   validator with the example's queue, the references (queue id, Secrets and keys) resolved within the folder.
 */
import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { evaluate } from '@marcbachmann/cel-js';
import test from 'ava';
import { Ajv, type ValidateFunction } from 'ajv';
import { ValidatingWebhookConfiguration } from 'kubernetes-models/admissionregistration.k8s.io/v1/ValidatingWebhookConfiguration';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { Role } from 'kubernetes-models/rbac.authorization.k8s.io/v1/Role';
import { RoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1/RoleBinding';
import { Secret } from 'kubernetes-models/v1/Secret';
import { Service } from 'kubernetes-models/v1/Service';
import { ServiceAccount } from 'kubernetes-models/v1/ServiceAccount';
import { parse, parseAllDocuments } from 'yaml';
import { settings } from '../../core/config.ts';
import { EnginePoolSpec, QueueSpec, RoutingPlanSpec, WebhookEndpointSpec } from '../../core/resources/kinds.ts';
import { referencesOf, validateDefinition, type WorkspaceFacts } from '../../core/routing/validate.ts';
import { compileStrict } from '../../core/validation.ts';
import { crdValidators, rulesOf } from '../helpers/crd-schema.ts';

type Json = Record<string, unknown>;

const chartDir = fileURLToPath(new URL('../../charts/switchboard/', import.meta.url));
const examplesDir = fileURLToPath(new URL('../../examples/', import.meta.url));
const read = (path: string) => readFile(path, 'utf8');
const yamlFiles = async (dir: string) =>
  (await readdir(dir))
    .filter((name) => name.endsWith('.yaml'))
    .sort()
    .map((name) => `${dir}${name}`);

const packageJson = JSON.parse(await read(fileURLToPath(new URL('../../package.json', import.meta.url)))) as Json;
const chart = parse(await read(`${chartDir}Chart.yaml`)) as Json;
const values = parse(await read(`${chartDir}values.yaml`)) as Json;
const valuesSchema = JSON.parse(await read(`${chartDir}values.schema.json`)) as Json;
const ciFiles = await yamlFiles(`${chartDir}ci/`);
/** Each ci/ values file, parsed. */
const ciValues = new Map<string, unknown>();
for (const file of ciFiles) ciValues.set(file, parse(await read(file)));
const templateNames = (await readdir(`${chartDir}templates/`)).sort();
const templates = new Map<string, string>();
for (const name of templateNames) templates.set(name, await read(`${chartDir}templates/${name}`));
const template = (name: string) => {
  const text = templates.get(name);
  if (text === undefined) throw new Error(`no template ${name}`);
  return text;
};

interface ExampleDoc {
  file: string;
  object: Json & { kind: string; metadata: Json; spec?: Json };
}
const exampleFiles = await yamlFiles(examplesDir);
const exampleDocs: ExampleDoc[] = [];
const exampleErrors: string[] = [];
for (const file of exampleFiles) {
  for (const doc of parseAllDocuments(await read(file))) {
    if (doc.errors.length > 0) exampleErrors.push(`${file}: ${doc.errors.map((error) => error.message).join('; ')}`);
    else exampleDocs.push({ file, object: doc.toJS() as ExampleDoc['object'] });
  }
}
const isObject = (value: unknown): value is Json =>
  typeof value === 'object' && value !== null && !Array.isArray(value);
const clone = <T>(value: T): T => structuredClone(value);

/** Helm's merge of a values file over the chart's values: maps merge, anything else replaces, null deletes. */
function helmMerge(base: Json, override: Json): Json {
  const out: Json = { ...base };
  for (const [key, value] of Object.entries(override)) {
    if (value === null) delete out[key];
    else if (isObject(value) && isObject(out[key])) out[key] = helmMerge(out[key] as Json, value);
    else out[key] = value;
  }
  return out;
}

// Strict mode: a misspelled keyword in values.schema.json is an error here, not a silently ignored key.
const schemaAjv = new Ajv({ strict: true, allErrors: true });
const validateValues: ValidateFunction = schemaAjv.compile(valuesSchema);
const valuesErrors = (candidate: unknown) =>
  validateValues(candidate) ? [] : (validateValues.errors ?? []).map((e) => `${e.instancePath} ${e.message}`);

const crdValidatorsByKind = crdValidators();
/** The CRD's verdict on a whole custom resource, and the messages of the CEL rules that fail on create. */
function customResourceProblems(kind: string, object: Json): string[] {
  const validate = crdValidatorsByKind.get(kind);
  if (validate === undefined) return [`no CRD for kind ${kind}`];
  const problems = validate(object) ? [] : (validate.errors ?? []).map((e) => `${e.instancePath} ${e.message}`);
  for (const rule of rulesOf(kind)) {
    if (rule.rule.includes('oldSelf')) continue; // transition rules: only on update
    try {
      if (evaluate(rule.rule, { self: object.spec }) !== true) problems.push(rule.message);
    } catch (error) {
      problems.push(`${rule.message} (${(error as Error).message})`);
    }
  }
  return problems;
}
/** The kinds' specs as the REST API and the admission webhook check them (TypeBox schemas, strict, the API's uuid). */
const specValidators = new Map(
  Object.entries({
    RoutingPlan: RoutingPlanSpec,
    Queue: QueueSpec,
    WebhookEndpoint: WebhookEndpointSpec,
    EnginePool: EnginePoolSpec,
  }).map(([kind, schema]) => [kind, compileStrict(schema)]),
);
const apiAccepts = (kind: string, spec: unknown) => specValidators.get(kind)?.(spec) === true;
const engineResource = (spec: Json) => ({
  apiVersion: 'switchboard.dev/v1alpha1',
  kind: 'EnginePool',
  metadata: { name: 'switchboard' },
  spec,
});

// ---------------------------------------------------------------------------------------------------------------
// Templates without helm: actions, blocks and a YAML skeleton

/** The actions of a template, `{{ … }}`, in order, comments included; throws on an unclosed or stray delimiter. */
function actionsOf(text: string): string[] {
  const actions: string[] = [];
  let at = 0;
  for (;;) {
    const open = text.indexOf('{{', at);
    const strayClose = text.indexOf('}}', at);
    if (strayClose !== -1 && (open === -1 || strayClose < open)) throw new Error(`a stray }} at ${strayClose}`);
    if (open === -1) return actions;
    const comment = /^\{\{-?\s*\/\*/.test(text.slice(open));
    const close = comment ? text.indexOf('*/', open) : text.indexOf('}}', open + 2);
    if (close === -1) throw new Error(`an unclosed {{ at ${open}`);
    const end = text.indexOf('}}', close);
    if (end === -1) throw new Error(`an unclosed {{ at ${open}`);
    const inner = text.slice(open + 2, end);
    if (!comment && inner.includes('{{')) throw new Error(`{{ inside an action at ${open}`);
    actions.push(inner);
    at = end + 2;
  }
}

/** What is wrong with a template's structure: trim markers, quotes, parentheses, and blocks closed by `end`. */
function structureProblems(text: string): string[] {
  let actions: string[];
  try {
    actions = actionsOf(text);
  } catch (error) {
    return [(error as Error).message];
  }
  const problems: string[] = [];
  const blocks: string[] = [];
  for (const raw of actions) {
    // A trim marker is "{{- " or " -}}": the dash must be followed (or preceded) by a space.
    if (/^-\S/.test(raw) || /\S-$/.test(raw)) problems.push(`a trim marker without a space: {{${raw}}}`);
    const inner = raw.replace(/^-\s/, '').replace(/\s-$/, '').trim();
    if (inner.startsWith('/*')) {
      if (!inner.endsWith('*/')) problems.push(`a comment not closed before }}: {{${raw}}}`);
      continue;
    }
    const code = inner.replace(/"(?:[^"\\]|\\.)*"/g, 'S').replace(/`[^`]*`/g, 'S');
    if (code.includes('"')) problems.push(`an unclosed string: {{${raw}}}`);
    let depth = 0;
    for (const char of code) {
      depth += char === '(' ? 1 : char === ')' ? -1 : 0;
      if (depth < 0) break;
    }
    if (depth !== 0) problems.push(`unbalanced parentheses: {{${raw}}}`);
    const keyword = /^([a-z]+)\b/.exec(code)?.[1];
    if (keyword === 'if' || keyword === 'range' || keyword === 'with' || keyword === 'block') blocks.push(keyword);
    else if (keyword === 'define') {
      if (blocks.length > 0) problems.push(`define inside ${blocks.join(' > ')}: {{${raw}}}`);
      blocks.push(keyword);
    } else if (keyword === 'else') {
      const open = blocks.at(-1);
      if (open !== 'if' && open !== 'with' && open !== 'range') problems.push(`else outside if, with or range`);
    } else if (keyword === 'end') {
      if (blocks.pop() === undefined) problems.push('an end without a block');
    }
  }
  if (blocks.length > 0) problems.push(`blocks never ended: ${blocks.join(', ')}`);
  // `{{- … | nindent N }}` on a line of its own puts its text at column N: the line is written at that column too.
  for (const line of text.split('\n')) {
    const match = /^( *)\{\{-.*\|\s*nindent\s+(\d+)\s*\}\}$/.exec(line);
    if (match && match[1]!.length !== Number(match[2]))
      problems.push(`nindent ${match[2]} at column ${match[1]!.length}`);
  }
  return problems;
}

interface Skeleton {
  text: string;
  /** The inner text of the action each placeholder stands for, by placeholder. */
  actions: Map<string, string>;
}

/**
 * A template as YAML: comments gone, lines holding nothing but actions gone (control flow, `include … | nindent`),
 * every other action replaced by a placeholder: a number where the action yields one (`int64`, the grace period), a
 * string (`tplNNNNN`, also valid base64) otherwise. Templates are written so that this is valid YAML.
 */
function skeleton(text: string): Skeleton {
  const actions = new Map<string, string>();
  const lines = text
    .replace(/\{\{-?\s*\/\*[\s\S]*?\*\/\s*-?\}\}/g, '')
    .split('\n')
    .filter((line) => !(line.includes('{{') && line.replace(/\{\{[\s\S]*?\}\}/g, '').trim() === ''))
    .map((line) =>
      line.replace(/\{\{-?\s*([\s\S]*?)\s*-?\}\}/g, (_, inner: string) => {
        if (/\bint64\b|terminationGracePeriodSeconds/.test(inner) && !/\bquote\b/.test(inner)) return '1';
        const placeholder = `tpl${String(actions.size).padStart(5, '0')}`;
        actions.set(placeholder, inner);
        return placeholder;
      }),
    );
  return { text: lines.join('\n'), actions };
}

interface RenderedDoc {
  file: string;
  object: Json;
  /** The action a placeholder value stands for. */
  action(value: unknown): string | undefined;
}

/** The documents of every template's skeleton, and what kept a skeleton from being YAML. */
function skeletonDocs(): { docs: RenderedDoc[]; errors: string[] } {
  const docs: RenderedDoc[] = [];
  const errors: string[] = [];
  for (const [file, text] of templates) {
    if (!file.endsWith('.yaml')) continue;
    const { text: yamlText, actions } = skeleton(text);
    for (const doc of parseAllDocuments(yamlText)) {
      if (doc.errors.length > 0) {
        errors.push(`${file}: ${doc.errors.map((error) => error.message).join('; ')}`);
        continue;
      }
      const object = doc.toJS() as unknown;
      if (object === null) continue;
      if (isObject(object)) {
        docs.push({ file, object, action: (value) => (typeof value === 'string' ? actions.get(value) : undefined) });
      } else errors.push(`${file}: a document that is not a mapping`);
    }
  }
  return { docs, errors };
}

const at = (object: unknown, path: string): unknown =>
  path.split('.').reduce<unknown>((node, key) => (isObject(node) ? node[key] : undefined), object);

/** A document with each placeholder of a plain `.Values` path replaced by its value in values.yaml (the defaults). */
function withDefaults(doc: RenderedDoc): Json {
  const resolve = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(resolve);
    if (isObject(node)) return Object.fromEntries(Object.entries(node).map(([key, value]) => [key, resolve(value)]));
    const match = /^\$?\.Values\.([\w.]+)(\s*\|\s*quote)?$/.exec(doc.action(node) ?? '');
    if (match === null) return node;
    const value = at(values, match[1]!);
    return match[2] === undefined ? value : String(value);
  };
  return resolve(doc.object) as Json;
}

// ---------------------------------------------------------------------------------------------------------------
// The chart's metadata and values

test('Chart.yaml: a v2 application chart at the package’s version', (t) => {
  t.is(chart.apiVersion, 'v2');
  t.is(chart.name, 'switchboard');
  t.is(chart.type, 'application');
  t.is(chart.appVersion, '0.1.0');
  t.is(chart.appVersion, packageJson.version, 'appVersion is the version of the package the image holds');
  t.regex(String(chart.version), /^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$/, 'a SemVer 2 chart version');
});

test('values.yaml and every ci/ values file are accepted by values.schema.json', (t) => {
  t.is(valuesSchema.$schema, 'http://json-schema.org/draft-07/schema#');
  t.deepEqual(valuesErrors(values), []);
  t.true(ciFiles.length >= 2, 'ci/ holds values files');
  for (const [file, override] of ciValues) {
    t.true(isObject(override), `${file} is a mapping`);
    t.deepEqual(valuesErrors(helmMerge(values, override as Json)), [], `${file} over values.yaml`);
  }
  // Merged as Helm merges: maps key by key, lists whole, null deletes.
  t.deepEqual(helmMerge({ a: { b: 1, c: [1] }, d: 1 }, { a: { c: [2] }, d: null }), { a: { b: 1, c: [2] } });
});

test('values.schema.json refuses unknown keys at every level, and wrong types, enums and bounds', (t) => {
  const refused = (label: string, change: (candidate: Json) => void, keyword?: string) => {
    const candidate = clone(values);
    change(candidate);
    t.false(validateValues(candidate), `${label} is refused`);
    if (keyword !== undefined) {
      t.true(
        (validateValues.errors ?? []).some((error) => error.keyword === keyword),
        `${label}: ${keyword} (${JSON.stringify(validateValues.errors)})`,
      );
    }
  };
  const api = (candidate: Json) => candidate.api as Json;
  const engine = (candidate: Json) => candidate.engine as Json;
  refused('an unknown top-level key', (c) => (c.replicaCount = 2), 'additionalProperties');
  refused('an unknown key in api', (c) => (api(c).replicaCount = 2), 'additionalProperties');
  refused('an unknown key in api.oidc', (c) => ((api(c).oidc as Json).clientSecret = 'x'), 'additionalProperties');
  refused('an unknown resource', (c) => ((at(c, 'api.resources.requests') as Json).gpu = '1'), 'additionalProperties');
  refused('an unknown key in operator.webhook', (c) => ((at(c, 'operator.webhook') as Json).caBundle = 'x'));
  refused('an unknown key in a carrier', (c) => {
    engine(c).carriers = [{ name: 'a', address: '192.0.2.1', password: 'x' }];
  });
  refused('an unknown toleration field', (c) => (api(c).tolerations = [{ key: 'a', colour: 'red' }]));
  refused('a misspelt engine field', (c) => (engine(c).rtpPortMinimum = 20000), 'additionalProperties');
  refused('a log level config.ts refuses', (c) => (c.logLevel = 'verbose'), 'enum');
  refused('a failure policy Kubernetes refuses', (c) => ((at(c, 'operator.webhook') as Json).failurePolicy = 'Retry'));
  refused('a database URL that is not PostgreSQL', (c) => ((c.database as Json).url = 'mysql://db/x'), 'pattern');
  refused('port 0', (c) => (api(c).port = 0), 'minimum');
  refused('a body limit above config.ts’s bound', (c) => (api(c).bodyLimit = 104857601), 'maximum');
  refused('a pool size as a string', (c) => ((c.database as Json).poolSize = '10'), 'type');
  refused('root', (c) => ((c.securityContext as Json).runAsUser = 0), 'minimum');
  refused('no image for the engine', (c) => delete engine(c).image, 'required');
  // The check can pass: a known key with a good value is accepted.
  const accepted = clone(values);
  api(accepted).replicas = 5;
  t.deepEqual(valuesErrors(accepted), []);
});

test('values.schema.json: every object refuses unknown keys; only string maps and Helm’s global take free keys', (t) => {
  const open: string[] = [];
  const walk = (node: unknown, where: string) => {
    if (Array.isArray(node)) return node.forEach((item, index) => walk(item, `${where}/${index}`));
    if (!isObject(node)) return;
    if (node.type === 'object' || 'properties' in node) {
      const extra = node.additionalProperties;
      const stringMap = isObject(extra) && extra.type === 'string' && !('properties' in node);
      if (extra !== false && !stringMap) open.push(where);
      if (stringMap) open.push(`${where} (strings)`);
    }
    for (const [key, child] of Object.entries(node)) walk(child, `${where}/${key}`);
  };
  walk(valuesSchema, '#');
  t.deepEqual(open.sort(), ['#/definitions/stringMap (strings)', '#/properties/global'].sort());
});

// ---------------------------------------------------------------------------------------------------------------
// Templates

/** Every `.Values` path a template or helper reads: `.Values.a.b`, `index .Values "a" "b"`, `hasKey .Values.a "b"`. */
function valuesPaths(text: string): string[] {
  const paths = new Set<string>();
  for (const match of text.matchAll(/\$?\.Values((?:\.[A-Za-z_][A-Za-z0-9_]*)+)/g)) paths.add(match[1]!.slice(1));
  for (const match of text.matchAll(/\bindex\s+\$?\.Values((?:\.[A-Za-z_]\w*)*)((?:\s+"[^"]+")+)/g)) {
    const keys = [...match[2]!.matchAll(/"([^"]+)"/g)].map((key) => key[1]);
    paths.add([...match[1]!.split('.').filter(Boolean), ...keys].join('.'));
  }
  for (const match of text.matchAll(/\bhasKey\s+\$?\.Values((?:\.[A-Za-z_]\w*)+)\s+"([^"]+)"/g)) {
    paths.add(`${match[1]!.slice(1)}.${match[2]}`);
  }
  return [...paths].sort();
}
const allTemplateText = [...templates.values()].join('\n');
const usedPaths = valuesPaths(allTemplateText);

/** Keys of values.yaml whose contents are Kubernetes' or the user's (maps, lists, resources): used whole. */
const wholeValues = new Set([
  'resources',
  'podAnnotations',
  'nodeSelector',
  'tolerations',
  'annotations',
  'labels',
  'carriers',
  'imagePullSecrets',
]);
function valueLeaves(node: Json, prefix = ''): string[] {
  return Object.entries(node).flatMap(([key, value]) =>
    isObject(value) && !wholeValues.has(key) ? valueLeaves(value, `${prefix}${key}.`) : [`${prefix}${key}`],
  );
}

/** The paths that lead nowhere in values.yaml. */
const missingFromValues = (paths: string[]) =>
  paths.filter((path) => {
    let node: unknown = values;
    for (const key of path.split('.')) {
      if (!isObject(node) || !(key in node)) return true;
      node = node[key];
    }
    return false;
  });

test('every .Values path the templates read is in values.yaml, and every value is read', (t) => {
  t.true(usedPaths.length > 40, `found ${usedPaths.length} paths`);
  t.deepEqual(missingFromValues(usedPaths), [], 'read by a template but not in values.yaml');
  const unread = valueLeaves(values).filter(
    (leaf) => !usedPaths.some((path) => path === leaf || path.startsWith(`${leaf}.`)),
  );
  t.deepEqual(unread, [], 'in values.yaml but read by no template');
  // The scan finds what it should: these forms are recognised, and a missing path would be reported.
  t.deepEqual(
    valuesPaths('{{ index .Values "api" "port" }} {{ hasKey .Values.engine "sipPort" }} {{ $.Values.a.b }}'),
    ['a.b', 'api.port', 'engine', 'engine.sipPort'],
  );
  t.deepEqual(missingFromValues(['api.port', 'api.prot', 'engine.sipPort.x']), ['api.prot', 'engine.sipPort.x']);
});

test('every template is structurally a Go template Helm can parse: delimiters, strings, blocks closed by end', (t) => {
  t.true(templates.has('_helpers.tpl') && templates.has('NOTES.txt'));
  for (const [name, text] of templates) t.deepEqual(structureProblems(text), [], name);
  // The checks fail on broken templates.
  t.deepEqual(structureProblems('{{- if .Values.a }}x'), ['blocks never ended: if']);
  t.deepEqual(structureProblems('x{{ end }}'), ['an end without a block']);
  t.deepEqual(structureProblems('{{ .Values.a }'), ['an unclosed {{ at 0']);
  t.deepEqual(structureProblems('a }} b'), ['a stray }} at 2']);
  t.deepEqual(structureProblems('{{-.Values.a }}'), ['a trim marker without a space: {{-.Values.a }}']);
  t.deepEqual(structureProblems('{{ include "x . }}'), ['an unclosed string: {{ include "x . }}']);
  t.deepEqual(structureProblems('{{ (include "x" . }}'), ['unbalanced parentheses: {{ (include "x" . }}']);
  t.deepEqual(structureProblems('{{ else }}'), ['else outside if, with or range']);
  t.deepEqual(structureProblems('a:\n    {{- toYaml .b | nindent 2 }}'), ['nindent 2 at column 4']);
  t.deepEqual(structureProblems('{{ if .a }}{{ define "x" }}{{ end }}{{ end }}'), [
    'define inside if: {{ define "x" }}',
  ]);
});

const { docs, errors: skeletonErrors } = skeletonDocs();
const ofKind = (kind: string) => docs.filter((doc) => doc.object.kind === kind);

test('the templates are YAML of valid Kubernetes objects, all standard-labelled, with no cluster-wide RBAC', (t) => {
  t.deepEqual(skeletonErrors, []);
  const kinds = docs.map((doc) => String(doc.object.kind)).sort();
  t.deepEqual(
    [...new Set(kinds)],
    [
      'Deployment',
      'EnginePool',
      'PodDisruptionBudget',
      'Role',
      'RoleBinding',
      'Secret',
      'Service',
      'ServiceAccount',
      'ServiceMonitor',
      'ValidatingWebhookConfiguration',
    ],
  );
  const models: Record<string, new (data: never) => { validate(): void }> = {
    Deployment,
    PodDisruptionBudget,
    Role,
    RoleBinding,
    Secret,
    Service,
    ServiceAccount,
    ValidatingWebhookConfiguration,
  };
  for (const doc of docs) {
    const Model = models[String(doc.object.kind)];
    if (Model)
      t.notThrows(() => new Model(withDefaults(doc) as never).validate(), `${doc.file} ${String(doc.object.kind)}`);
    t.truthy(at(doc.object, 'metadata.name'), `${doc.file}: a name`);
    t.regex(template(doc.file), /include "switchboard\.labels"/, `${doc.file}: standard labels`);
  }
  // The labels helper gives the five standard labels.
  const labels = template('_helpers.tpl');
  for (const label of ['name', 'instance', 'version', 'component', 'managed-by']) {
    t.regex(labels, new RegExp(`app\\.kubernetes\\.io/${label}: `), label);
  }
  // Kubernetes' schema is applied: a Deployment without containers is refused.
  const deployment = clone(ofKind('Deployment')[0]!.object);
  delete (at(deployment, 'spec.template.spec') as Json).containers;
  t.throws(() => new Deployment(deployment as never).validate());
});

/** A Role's rules as `group/resource` to sorted verbs. */
function permissions(rules: unknown): Record<string, string> {
  const out: Record<string, string[]> = {};
  for (const rule of rules as Array<{ apiGroups: string[]; resources: string[]; verbs: string[] }>) {
    for (const group of rule.apiGroups) {
      for (const resource of rule.resources) (out[`${group}/${resource}`] ??= []).push(...rule.verbs);
    }
  }
  return Object.fromEntries(Object.entries(out).map(([key, verbs]) => [key, [...new Set(verbs)].sort().join(',')]));
}
const kindsOf = ['routingplans', 'queues', 'webhookendpoints', 'enginepools'];
const each = (names: string[], verbs: string) => Object.fromEntries(names.map((name) => [name, verbs]));

test('RBAC: namespaced Roles of least privilege for the operator and the API, bound to their service accounts', (t) => {
  t.is(ofKind('ClusterRole').length + ofKind('ClusterRoleBinding').length, 0);
  const roles = ofKind('Role');
  const byComponent = (component: string) =>
    roles.filter((role) => role.action(at(role.object, 'metadata.name'))?.includes(`"component" "${component}"`));
  const [operator] = byComponent('operator');
  const [leases] = byComponent('operator-leader-election');
  const [api] = byComponent('api');
  t.is(roles.length, 3);
  t.deepEqual(permissions(operator?.object.rules), {
    ...each(
      kindsOf.map((kind) => `switchboard.dev/${kind}`),
      'get,list,patch,update,watch',
    ),
    ...each(
      [
        ...kindsOf.map((kind) => `switchboard.dev/${kind}/status`),
        ...kindsOf.map((kind) => `switchboard.dev/${kind}/finalizers`),
        'switchboard.dev/enginepools/scale',
      ],
      'get,patch,update',
    ),
    ...each(
      ['apps/deployments', '/services', '/configmaps', 'policy/poddisruptionbudgets'],
      'create,delete,get,list,patch,watch',
    ),
    ...each(['/events', 'events.k8s.io/events'], 'create,patch'),
    '/secrets': 'get',
  });
  t.deepEqual(permissions(leases?.object.rules), { 'coordination.k8s.io/leases': 'create,get,update' });
  t.deepEqual(permissions(api?.object.rules), {
    ...each(
      kindsOf.map((kind) => `switchboard.dev/${kind}`),
      'create,delete,get,list,patch,update,watch',
    ),
    'switchboard.dev/routingplans/status': 'get,patch,update',
  });
  // Where each Role lives: the resources' namespace, and the Lease beside the operator.
  const namespaceOf = (doc: RenderedDoc | undefined) => doc?.action(at(doc.object, 'metadata.namespace'));
  t.is(namespaceOf(operator), 'include "switchboard.resourceNamespace" .');
  t.is(namespaceOf(api), 'include "switchboard.resourceNamespace" .');
  t.is(namespaceOf(leases), '.Release.Namespace');
  // Each binding names its Role and the component's service account.
  const bindings = ofKind('RoleBinding');
  t.is(bindings.length, 3);
  for (const binding of bindings) {
    const role = binding.action(at(binding.object, 'roleRef.name'));
    const [subject] = at(binding.object, 'subjects') as Json[];
    t.is(at(binding.object, 'roleRef.kind'), 'Role');
    t.is(subject?.kind, 'ServiceAccount');
    const account = binding.action(subject?.name);
    t.is(
      account,
      role?.includes('"component" "api"')
        ? 'include "switchboard.apiServiceAccountName" .'
        : 'include "switchboard.operatorServiceAccountName" .',
    );
    t.true(roles.some((candidate) => candidate.action(at(candidate.object, 'metadata.name')) === role));
  }
});

test('the API and operator Deployments: their role (args for the image’s entrypoint), probes, ports, settings from core/config.ts', (t) => {
  const deployments = ofKind('Deployment');
  t.is(deployments.length, 2);
  const container = (role: string) => {
    const doc = deployments.find((candidate) => candidate.file === `${role}.yaml`);
    return (at(doc?.object, 'spec.template.spec.containers') as Json[])[0] as Json;
  };
  for (const [role, port] of [
    ['api', 'http'],
    ['operator', 'metrics'],
  ] as const) {
    const main = container(role);
    // The image's entrypoint (tini, then `switchboard`) runs the role: a `command` would bypass tini.
    t.deepEqual(main.args, [role]);
    t.false('command' in main);
    t.is(at(main, 'readinessProbe.httpGet.path'), '/readyz');
    t.is(at(main, 'livenessProbe.httpGet.path'), '/healthz');
    t.is(at(main, 'readinessProbe.httpGet.port'), port);
    t.true((main.ports as Json[]).some((candidate) => candidate.name === port));
    t.regex(template(`${role}.yaml`), /include "switchboard\.sharedEnv"/);
    t.regex(template(`${role}.yaml`), /securityContext:\n\s+\{\{- include "switchboard\.containerSecurityContext"/);
  }
  t.regex(template('_helpers.tpl'), /allowPrivilegeEscalation: false\nreadOnlyRootFilesystem: true\n/);
  t.true((container('operator').ports as Json[]).some((port) => port.name === 'webhook'));
  // Settings are core/config.ts's variables, by their exact names.
  const known = new Set(settings.map((setting) => setting.name));
  const envNames = [...allTemplateText.matchAll(/^\s*- name: ([A-Z][A-Z0-9_]*)\s*$/gm)].map((match) => match[1]!);
  t.true(envNames.length >= 15, `found ${envNames.length}`);
  t.deepEqual(
    envNames.filter((name) => !known.has(name)),
    [],
    'every env name is a setting of core/config.ts',
  );
  for (const name of [
    'DATABASE_URL',
    'PORT',
    'OPERATOR_HTTP_PORT',
    'RESOURCE_NAMESPACE',
    'RESOURCE_STORE',
    'LEASE_NAMESPACE',
    'ENGINE_DATABASE_SECRET',
    'LOG_LEVEL',
    'HOST',
  ]) {
    t.true(envNames.includes(name), name);
  }
  // DATABASE_URL comes from a Secret: database.existingSecret, or the one the chart makes from database.url.
  const helpers = template('_helpers.tpl');
  t.regex(helpers, /- name: DATABASE_URL\n\s+valueFrom:\n\s+secretKeyRef:/);
  const secret = ofKind('Secret').find((doc) => doc.file === 'database-secret.yaml');
  t.is(secret?.action(at(secret.object, 'stringData.url')), '.Values.database.url | quote');
  t.regex(template('database-secret.yaml'), /^\{\{- if not \.Values\.database\.existingSecret \}\}$/m);
  // In the cluster the resources are the cluster's; the Lease beside the operator; the engine pods' database URL
  // from the same Secret.
  t.regex(helpers, /- name: RESOURCE_STORE\n\s+value: kubernetes\n/);
  t.regex(template('operator.yaml'), /- name: LEASE_NAMESPACE\n\s+value: \{\{ \.Release\.Namespace \| quote \}\}/);
  t.regex(
    template('operator.yaml'),
    /- name: ENGINE_DATABASE_SECRET\n\s+value: \{\{ printf "%s\/%s" \(include "switchboard\.databaseSecretName" \.\) \(include "switchboard\.databaseSecretKey" \.\) \| quote \}\}/,
  );
});

/** A helper's body in _helpers.tpl, `{{- define "<name>" -}}` to its `{{- end }}`. */
function helper(name: string): string {
  const text = template('_helpers.tpl');
  const start = text.indexOf(`{{- define "${name}" -}}`);
  if (start === -1) return '';
  return text.slice(start, text.indexOf('{{- end }}', start));
}

test('SWITCHBOARD_SECRET is required: the install fails with a clear message without one, from an existing Secret or one the chart makes', (t) => {
  // The Secret's name: switchboardSecret.existingSecret, else the Secret made from switchboardSecret.value, else the
  // install fails (Helm prints the message and installs nothing).
  const name = helper('switchboard.switchboardSecretName');
  t.regex(
    name,
    /^\{\{- define "switchboard\.switchboardSecretName" -\}\}\n\{\{- if \.Values\.switchboardSecret\.existingSecret -\}\}\n\{\{- \.Values\.switchboardSecret\.existingSecret -\}\}\n\{\{- else if \.Values\.switchboardSecret\.value -\}\}\n\{\{- include "switchboard\.componentName" \(dict "root" \. "component" "secret"\) -\}\}\n\{\{- else -\}\}\n\{\{- fail "[^"]+" -\}\}\n\{\{- end -\}\}\n$/,
  );
  const message = /fail "([^"]+)"/.exec(name)?.[1] ?? '';
  t.regex(message, /switchboardSecret\.existingSecret/);
  t.regex(message, /switchboardSecret\.value/);
  t.regex(message, /32 characters/);
  t.regex(message, /database/, 'it says why: the secret would be kept in the database it protects');
  // Read by every pod the chart runs: the helper that fails is in the shared settings, outside any condition.
  const shared = helper('switchboard.sharedEnv');
  t.regex(
    shared,
    /\n- name: SWITCHBOARD_SECRET\n {2}valueFrom:\n {4}secretKeyRef:\n {6}name: \{\{ include "switchboard\.switchboardSecretName" \. \}\}\n {6}key: \{\{ include "switchboard\.switchboardSecretKey" \. \}\}\n/,
  );
  t.false(/switchboardSecret[\s\S]*\{\{- if[^}]*switchboardSecret/.test(shared), 'no condition around it');
  t.regex(
    helper('switchboard.switchboardSecretKey'),
    /existingSecret -\}\}\n\{\{- \.Values\.switchboardSecret\.key -\}\}\n\{\{- else -\}\}\nsecret\n/,
  );
  // The operator tells the engine pods the same Secret, always.
  t.regex(
    template('operator.yaml'),
    /\n {12}- name: ENGINE_SWITCHBOARD_SECRET\n {14}value: \{\{ printf "%s\/%s" \(include "switchboard\.switchboardSecretName" \.\) \(include "switchboard\.switchboardSecretKey" \.\) \| quote \}\}\n/,
  );
  t.false(/\{\{- if \.Values\.switchboardSecret/.test(template('operator.yaml')), 'no condition around it');
  t.is(template('operator.yaml').match(/ENGINE_SWITCHBOARD_SECRET/g)?.length, 1, 'named nowhere else');
  t.regex(template('operator.yaml'), /include "switchboard\.sharedEnv"/);
  t.false(template('api.yaml').includes('ENGINE_SWITCHBOARD_SECRET'), 'only the operator runs engine pods');
  // The Secret the chart makes from a value, only when no existing one is named; a new value rolls the pods.
  const secret = ofKind('Secret').find((doc) => doc.file === 'switchboard-secret.yaml');
  t.is(secret?.action(at(secret.object, 'metadata.name')), 'include "switchboard.switchboardSecretName" .');
  t.is(secret?.action(at(secret.object, 'stringData.secret')), '.Values.switchboardSecret.value | quote');
  t.regex(
    template('switchboard-secret.yaml'),
    /^\{\{- if and \(not \.Values\.switchboardSecret\.existingSecret\) \.Values\.switchboardSecret\.value \}\}$/m,
  );
  for (const role of ['api', 'operator']) {
    t.regex(
      template(`${role}.yaml`),
      /checksum\/switchboard-secret: \{\{ include \(print \$\.Template\.BasePath "\/switchboard-secret\.yaml"\) \. \| sha256sum \}\}/,
      role,
    );
  }
  // values.yaml names none (the install needs one of the two); each ci/ values file names one, and the schema
  // refuses a value under 32 characters, as config.ts does.
  const given = (candidate: Json) =>
    Boolean(at(candidate, 'switchboardSecret.existingSecret')) || Boolean(at(candidate, 'switchboardSecret.value'));
  t.false(given(values), 'values.yaml alone fails the install');
  for (const [file, override] of ciValues) t.true(given(helmMerge(values, override as Json)), file);
  const withValue = (value: string) => helmMerge(values, { switchboardSecret: { value } });
  t.deepEqual(valuesErrors(withValue('x'.repeat(32))), []);
  t.false(validateValues(withValue('x'.repeat(31))), 'under 32 characters');
});

test('ICE_SERVERS: the API reads it from iceServers’ Secret, and the operator tells the engine pods the same Secret', (t) => {
  /** What a template writes only when the chart is given iceServers.existingSecret. */
  const whenGiven = (text: string) =>
    [...text.matchAll(/\{\{- if \.Values\.iceServers\.existingSecret \}\}\n([\s\S]*?)\{\{- end \}\}/g)]
      .map((match) => match[1])
      .join('\n');
  // A TURN credential is a credential: from a Secret, never a value in the chart's templates.
  t.regex(
    whenGiven(template('api.yaml')),
    /- name: ICE_SERVERS\n\s+valueFrom:\n\s+secretKeyRef:\n\s+name: \{\{ \.Values\.iceServers\.existingSecret \}\}\n\s+key: \{\{ \.Values\.iceServers\.key \}\}\n/,
  );
  t.regex(
    whenGiven(template('operator.yaml')),
    /- name: ENGINE_ICE_SERVERS_SECRET\n\s+value: \{\{ printf "%s\/%s" \.Values\.iceServers\.existingSecret \.Values\.iceServers\.key \| quote \}\}\n/,
  );
  t.is(allTemplateText.match(/- name: ICE_SERVERS\b/g)?.length, 1, 'only the API reads it (the operator does not)');
  t.is(allTemplateText.match(/ENGINE_ICE_SERVERS_SECRET/g)?.length, 1, 'only the operator runs engine pods');
});

test('the admission webhook: plans on create and update, queues on delete, at /validate, with one generated CA', (t) => {
  const [configuration] = ofKind('ValidatingWebhookConfiguration');
  const webhooks = at(configuration?.object, 'webhooks') as Json[];
  t.deepEqual(
    webhooks.map((webhook) => (webhook.rules as Json[]).map((rule) => [rule.resources, rule.operations])),
    [[[['routingplans'], ['CREATE', 'UPDATE']]], [[['queues'], ['DELETE']]]],
  );
  const service = ofKind('Service').find((doc) => doc.file === 'operator.yaml');
  const tls = ofKind('Secret').find((doc) => doc.file === 'webhook.yaml');
  for (const webhook of webhooks) {
    t.is(at(webhook, 'clientConfig.service.path'), '/validate');
    t.is(at(webhook, 'clientConfig.service.port'), 443);
    t.is(configuration?.action(webhook.failurePolicy), '.Values.operator.webhook.failurePolicy');
    t.deepEqual(webhook.admissionReviewVersions, ['v1']);
    t.is(webhook.sideEffects, 'None');
    // The caBundle is the CA of the serving certificate in the Secret: the same variable of the one generation.
    t.is(configuration?.action(at(webhook, 'clientConfig.caBundle')), '$caCert');
    t.is(configuration?.action(at(webhook, 'clientConfig.service.name')), '$service');
  }
  t.is(tls?.object.type, 'kubernetes.io/tls');
  t.is(tls?.action((tls.object.data as Json)['ca.crt']), '$caCert');
  const text = template('webhook.yaml').replace(/\{\{-?\s*\/\*[\s\S]*?\*\/\s*-?\}\}/g, '');
  t.is(text.match(/\bgenCA\b/g)?.length, 1);
  t.is(text.match(/\bgenSignedCert\b/g)?.length, 1);
  t.regex(text, /\$service := include "switchboard\.webhookServiceName" \./);
  // The operator's Service carries 443 to the container's webhook port.
  t.is(service?.action(at(service.object, 'metadata.name')), 'include "switchboard.webhookServiceName" .');
  const port = (at(service?.object, 'spec.ports') as Json[]).find((candidate) => candidate.name === 'webhook');
  t.deepEqual([port?.port, port?.targetPort], [443, 'webhook']);
});

test('CRDs from the generated files behind crds.create, kept on uninstall; PDBs and an optional ServiceMonitor', (t) => {
  const crds = template('crds.yaml');
  t.regex(crds, /\{\{- if \.Values\.crds\.create \}\}/);
  t.regex(crds, /\.Files\.Glob "files\/crds\/\*\.yaml"/);
  t.regex(crds, /"helm\.sh\/resource-policy" "keep"/);
  t.is(at(values, 'crds.create'), true);
  const budgets = ofKind('PodDisruptionBudget');
  t.deepEqual(budgets.map((doc) => doc.action(at(doc.object, 'spec.maxUnavailable'))).sort(), [
    '.Values.api.podDisruptionBudget.maxUnavailable',
    '.Values.operator.podDisruptionBudget.maxUnavailable',
  ]);
  const [monitor] = ofKind('ServiceMonitor');
  t.is(monitor?.object.apiVersion, 'monitoring.coreos.com/v1');
  t.regex(template('servicemonitor.yaml'), /^\{\{- if \.Values\.serviceMonitor\.enabled \}\}$/m);
  t.is(at(values, 'serviceMonitor.enabled'), false);
  const endpoints = at(monitor?.object, 'spec.endpoints') as Json[];
  // One endpoint, the `metrics` ports: the API's (on a Service of its own) and the operator's; never the API's `http`.
  t.deepEqual(
    endpoints.map((endpoint) => [endpoint.port, endpoint.path]),
    [['metrics', '/metrics']],
  );
  // Each port it scrapes is a port of the API's or the operator's Service.
  const servicePorts = ofKind('Service').flatMap((doc) => (at(doc.object, 'spec.ports') as Json[]).map((p) => p.name));
  for (const endpoint of endpoints) t.true(servicePorts.includes(endpoint.port), String(endpoint.port));
  const notes = template('NOTES.txt');
  t.regex(notes, /port-forward service\//);
  t.regex(notes, /apply -f examples\//);
});

test('the API serves /metrics on a port of its own (METRICS_PORT) behind a ClusterIP Service of its own, never on its public one', (t) => {
  const api = ofKind('Deployment').find((doc) => doc.file === 'api.yaml');
  const container = (at(api?.object, 'spec.template.spec.containers') as Json[])[0] as Json;
  const env = container.env as Json[];
  const metricsEnv = env.find((entry) => entry.name === 'METRICS_PORT');
  t.is(api?.action(metricsEnv?.value), '.Values.api.metricsPort | int64 | quote');
  const ports = container.ports as Json[];
  t.deepEqual(
    ports.map((port) => port.name),
    ['http', 'metrics'],
  );
  t.is(at(values, 'api.metricsPort'), 9090);
  t.not(at(values, 'api.metricsPort'), at(values, 'api.port'));
  const services = ofKind('Service').filter((doc) => doc.file === 'api.yaml');
  const byName = (name: string) => services.find((doc) => doc.action(at(doc.object, 'metadata.name')) === name);
  const main = byName('include "switchboard.componentName" (dict "root" . "component" "api")');
  const metrics = byName('include "switchboard.componentName" (dict "root" . "component" "api-metrics")');
  t.deepEqual(
    (at(main?.object, 'spec.ports') as Json[]).map((port) => port.targetPort),
    ['http'],
    'the public Service: the API only',
  );
  t.is(main?.action(at(main.object, 'spec.type')), '.Values.api.service.type');
  t.is(at(metrics?.object, 'spec.type'), 'ClusterIP');
  t.deepEqual(
    (at(metrics?.object, 'spec.ports') as Json[]).map((port) => [port.name, port.targetPort]),
    [['metrics', 'metrics']],
  );
  // It selects the API's pods, and is labelled as the API's for the ServiceMonitor's selector.
  t.regex(
    template('api.yaml'),
    /selector:\n\s+\{\{- include "switchboard\.selectorLabels" \(dict "root" \. "component" "api"\)[^\n]*\n\s+ports:\n\s+- name: metrics\n/,
  );
  t.deepEqual(
    valuesErrors(helmMerge(values, { api: { metricsPort: 0 } })).length > 0,
    true,
    'the schema refuses port 0',
  );
});

// ---------------------------------------------------------------------------------------------------------------
// The EnginePool

const engineSpecKeys = Object.keys(EnginePoolSpec.properties).sort();
const engineValues = (source: Json): Json => {
  const { enabled: _, ...spec } = source.engine as Json;
  return spec;
};

test('the EnginePool template writes exactly EnginePoolSpec’s fields, each from its engine value', (t) => {
  const [engine] = ofKind('EnginePool');
  t.is(engine?.object.apiVersion, 'switchboard.dev/v1alpha1');
  t.deepEqual(Object.keys(engine?.object.spec as Json).sort(), engineSpecKeys);
  const text = template('engine.yaml');
  for (const key of engineSpecKeys) t.regex(text, new RegExp(`\\.Values\\.engine\\.${key}\\b`), key);
  t.deepEqual(
    Object.keys(values.engine as Json)
      .filter((key) => key !== 'enabled')
      .sort(),
    engineSpecKeys,
    'values.yaml engine',
  );
  const schemaEngine = at(valuesSchema, 'properties.engine.properties') as Json;
  t.deepEqual(
    Object.keys(schemaEngine)
      .filter((key) => key !== 'enabled')
      .sort(),
    engineSpecKeys,
    'values.schema.json engine',
  );
  t.regex(text, /^\{\{- if and \.Values\.engine\.enabled /m);
});

test('the engine values are a spec the EnginePool CRD accepts, and the values schema refuses what the CRD refuses', (t) => {
  t.deepEqual(customResourceProblems('EnginePool', engineResource(engineValues(values))), [], 'values.yaml');
  t.true(apiAccepts('EnginePool', engineValues(values)), 'values.yaml, by the API’s schema');
  for (const [file, override] of ciValues) {
    const merged = helmMerge(values, override as Json);
    if (at(merged, 'engine.enabled') !== true) continue;
    t.deepEqual(customResourceProblems('EnginePool', engineResource(engineValues(merged))), [], file);
  }
  // The engine pool runs the chart's image at the chart's version.
  t.is(at(values, 'engine.image'), `${String(at(values, 'image.repository'))}:${String(chart.appVersion)}`);
  const wrong: Array<[string, Json]> = [
    ['no replicas', { replicas: undefined }],
    ['too many replicas', { replicas: 101 }],
    ['an empty image', { image: '' }],
    ['SIP port 0', { sipPort: 0 }],
    ['an RTP port below 1024', { rtpPortMin: 80 }],
    ['a CPU quantity Kubernetes cannot read', { resources: { requests: { cpu: 'lots' } } }],
    ['a carrier over SCTP', { carriers: [{ name: 'a', address: '192.0.2.1', transport: 'sctp' }] }],
    ['a carrier name starting with -', { carriers: [{ name: '-a', address: '192.0.2.1' }] }],
    ['a carrier without an address', { carriers: [{ name: 'a' }] }],
  ];
  for (const [label, change] of wrong) {
    const spec = JSON.parse(JSON.stringify({ ...engineValues(values), ...change })) as Json;
    t.notDeepEqual(customResourceProblems('EnginePool', engineResource(spec)), [], `the CRD refuses ${label}`);
    t.false(validateValues({ ...values, engine: { enabled: true, ...spec } }), `the values schema refuses ${label}`);
  }
  // The CRD's CEL rule holds the RTP range in order; the values schema cannot say it, the CRD refuses it.
  t.deepEqual(
    customResourceProblems(
      'EnginePool',
      engineResource({ ...engineValues(values), rtpPortMin: 30000, rtpPortMax: 20000 }),
    ),
    ['spec.rtpPortMin must not be above spec.rtpPortMax'],
  );
});

// ---------------------------------------------------------------------------------------------------------------
// examples/

const examples = (kind: string) => exampleDocs.filter((doc) => doc.object.kind === kind).map((doc) => doc.object);
const exampleSecret = (name: unknown) => examples('Secret').find((secret) => secret.metadata.name === name);
/** A Secret's value by key, from stringData or (base64) data. */
function secretValue(secret: Json | undefined, key: string): string | undefined {
  const clear = at(secret, 'stringData') as Json | undefined;
  if (clear && typeof clear[key] === 'string') return clear[key];
  const encoded = (at(secret, 'data') as Json | undefined)?.[key];
  return typeof encoded === 'string' ? Buffer.from(encoded, 'base64').toString('utf8') : undefined;
}
const customKinds = ['Queue', 'WebhookEndpoint', 'RoutingPlan', 'EnginePool'];

test('examples/: every document parses; a whole workspace in one namespace, with a README', async (t) => {
  t.deepEqual(exampleErrors, []);
  t.true(exampleFiles.length >= 2);
  t.deepEqual(exampleDocs.map((doc) => doc.object.kind).sort(), [
    'EnginePool',
    'Queue',
    'RoutingPlan',
    'Secret',
    'Secret',
    'WebhookEndpoint',
  ]);
  // One namespace: none is written, so kubectl --namespace (the resources' namespace) puts them all in one.
  t.deepEqual(
    exampleDocs.filter((doc) => doc.object.metadata.namespace !== undefined).map((doc) => doc.file),
    [],
  );
  for (const doc of exampleDocs) {
    t.regex(String(doc.object.metadata.name), /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, `${doc.file}: a DNS-1123 name`);
  }
  const names = exampleDocs.map((doc) => `${doc.object.kind}/${String(doc.object.metadata.name)}`);
  t.is(new Set(names).size, names.length, 'no two objects of a kind share a name');
  t.regex(await read(`${examplesDir}README.md`), /kubectl --namespace \S+ apply -f examples\//);
});

test('examples/: each custom resource is accepted by its CRD and its CEL rules; one application and workspace', (t) => {
  for (const kind of customKinds) {
    const [resource, ...more] = examples(kind);
    t.is(more.length, 0, kind);
    t.is(resource?.apiVersion, 'switchboard.dev/v1alpha1', kind);
    t.deepEqual(customResourceProblems(kind, resource as Json), [], kind);
    t.true(apiAccepts(kind, resource?.spec), `${kind}: the spec the REST API and the admission webhook accept`);
  }
  t.false(apiAccepts('Queue', { ...examples('Queue')[0]?.spec, id: '7a1b2c3d-4e5f-0a6b-8c7d-9e0f1a2b3c4d' }));
  const scoped = ['Queue', 'WebhookEndpoint', 'RoutingPlan'].map((kind) => examples(kind)[0]?.spec as Json);
  t.deepEqual(new Set(scoped.map((spec) => spec.applicationId)), new Set(['app-example']));
  const workspaces = new Set(scoped.filter((spec) => 'workspaceId' in spec).map((spec) => spec.workspaceId));
  t.is(workspaces.size, 1, 'one workspace');
  const ids = scoped.map((spec) => spec.id);
  t.true(
    ids.every((id) => typeof id === 'string'),
    'fixed ids',
  );
  t.is(new Set(ids).size, ids.length, 'distinct ids');
  // The checks can fail: a Queue of another shape is refused by its CRD.
  const queue = clone(examples('Queue')[0]) as Json;
  (queue.spec as Json).strategy = 'random';
  t.notDeepEqual(customResourceProblems('Queue', queue), []);
  const webhook = clone(examples('WebhookEndpoint')[0]) as Json;
  (webhook.spec as Json).url = 'http://hooks.example.com/';
  t.deepEqual(customResourceProblems('WebhookEndpoint', webhook), ['spec.url must be an https URL']);
});

test('examples/: the routing plan is valid by the plan validator, and uses the example queue by its id', (t) => {
  const plan = examples('RoutingPlan')[0]?.spec as Json;
  const queue = examples('Queue')[0]?.spec as Json;
  const facts = (queues: string[]): WorkspaceFacts => ({
    schedules: new Set(),
    queues: new Set(queues),
    aiAgents: new Map(),
    members: new Set(),
    users: new Set(),
    destinationPolicy: { allowedPrefixes: [], blockedPrefixes: [] },
  });
  t.deepEqual(validateDefinition(plan.definition, facts([String(queue.id)])), { valid: true, issues: [] });
  t.deepEqual(referencesOf(plan.definition).queueIds, [queue.id]);
  const steps = (plan.definition as Json).steps as Record<string, Json>;
  t.deepEqual(
    new Set(Object.values(steps).map((step) => step.type)),
    new Set(['menu', 'queue', 'voicemail', 'hangup']),
  );
  t.is(plan.workspaceId, queue.workspaceId);
  // Without the queue the plan is refused: the facts are what make it valid.
  const without = validateDefinition(plan.definition, facts([]));
  t.false(without.valid);
  t.deepEqual(
    without.issues.map((issue) => issue.code),
    ['unknown_queue'],
  );
  // And a structural fault is found too: a menu option to a step that does not exist.
  const broken = clone(plan.definition) as Json;
  ((broken.steps as Record<string, Json>).welcome!.options as Json)['3'] = 'nowhere';
  t.false(validateDefinition(broken, facts([String(queue.id)])).valid);
});

test('examples/: the Secrets are valid v1 Secrets holding what the resources name', (t) => {
  for (const secret of examples('Secret')) {
    t.notThrows(() => new Secret(secret as never).validate(), String(secret.metadata.name));
  }
  const secretRef = at(examples('WebhookEndpoint')[0], 'spec.secretRef') as Json;
  const signing = exampleSecret(secretRef.name);
  t.truthy(signing, 'the webhook endpoint’s secretRef names a Secret of examples/');
  t.regex(
    secretValue(signing, String(secretRef.key)) ?? '',
    /^whsec_[A-Za-z0-9_-]{43}$/,
    'a signing secret at its key',
  );
  for (const carrier of at(examples('EnginePool')[0], 'spec.carriers') as Json[]) {
    const ref = at(carrier, 'credentialsSecretRef.name');
    if (ref === undefined) continue;
    const credentials = exampleSecret(ref);
    t.truthy(credentials, `${String(carrier.name)}: its Secret is in examples/`);
    t.truthy(secretValue(credentials, 'username'), 'username');
    t.truthy(secretValue(credentials, 'password'), 'password');
  }
  // The checks can fail: a Secret whose data is not base64, and a key the Secret lacks.
  t.throws(() => new Secret({ metadata: { name: 'x' }, data: { a: 'not base64!' } }).validate());
  t.is(secretValue(signing, 'no-such-key'), undefined);
});
