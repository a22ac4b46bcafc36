/**
 * A Kubernetes API server for tests (docs/kubernetes.md): no kube-apiserver runs here, so the operator and the
 * Kubernetes ResourceStore are tested against this one, which speaks the REST and watch protocol the way the real one
 * does, closely enough that `@kubernetes/client-node` 1.4 (typed APIs, `KubernetesObjectApi`, `Watch`, informers)
 * works against it unchanged.
 *
 * What it honours: discovery; namespaced storage of the built-in kinds the operator touches and of the project's
 * custom resources (from core/resources/crds.ts, validated and pruned by their structural schemas, with their CEL
 * rules); one global resourceVersion; 409 on a stale resourceVersion; generation; the status subresource; merge, JSON,
 * strategic-merge (as merge, built-in kinds only) and server-side apply patches with per-manager field ownership;
 * finalizers; owner-reference cascade (Background, Foreground, Orphan, done at once rather than by a controller);
 * watches replayed from a bounded history with bookmarks, timeouts and 410 Gone once it is compacted. Faults can be
 * injected: watches cut mid-stream, history expired, 409s and 5xx answers on demand, slow answers.
 *
 * Simplifications: no authentication, admission or dryRun; only Apply managers own fields (an Update writer takes
 * nothing over); lists are atomic in server-side apply except `metadata.finalizers` (a set); a strategic merge patch
 * is a merge patch; garbage collection happens synchronously within the write that triggers it.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';
import { parse as parseCel, type ParseResult } from '@marcbachmann/cel-js';
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import { parse as parseYaml } from 'yaml';
import { customResourceDefinitions } from '../../core/resources/crds.ts';
import { asJsonSchema } from './crd-schema.ts';

type Json = Record<string, unknown>;

export interface ManagedFieldsEntry {
  manager: string;
  operation: 'Apply' | 'Update';
  apiVersion: string;
  time: string;
  fieldsType: 'FieldsV1';
  fieldsV1: Json;
  subresource?: string;
}

export interface ObjectMeta {
  name: string;
  namespace: string;
  uid: string;
  resourceVersion: string;
  generation: number;
  creationTimestamp: string;
  generateName?: string;
  deletionTimestamp?: string;
  deletionGracePeriodSeconds?: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  finalizers?: string[];
  ownerReferences?: Array<{ apiVersion: string; kind: string; name: string; uid: string; [field: string]: unknown }>;
  managedFields?: ManagedFieldsEntry[];
  [field: string]: unknown;
}

/** An object as stored and served. */
export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: ObjectMeta;
  [field: string]: unknown;
}

export interface KubeApiServerOptions {
  /** How often a watch that allows bookmarks gets one, in ms (default 1000). */
  bookmarkIntervalMs?: number;
  /** Changes the watch history keeps before compacting the oldest (default 10,000); a watch from before: 410. */
  historyLimit?: number;
  /** The CustomResourceDefinitions served besides the built-in kinds (default the project's, core/resources/crds.ts). */
  crds?: Iterable<Json>;
}

/** One request as it arrived. */
export interface RecordedRequest {
  method: string;
  /** Path and query string. */
  path: string;
  contentType: string | undefined;
  /** Date.now() on arrival. */
  time: number;
  /** The HTTP status answered, once the answer has begun (200 for a watch, whatever its events). */
  status?: number;
}

/** An open watch, as `cutWatches` filters see it. */
export interface WatchInfo {
  group: string;
  plural: string;
  /** Undefined for a watch across namespaces. */
  namespace: string | undefined;
  path: string;
}

export interface KubeApiFaults {
  /** Destroys open watch connections mid-stream (no closing chunk), those of a plural or a filter; how many. */
  cutWatches(filter?: string | ((watch: WatchInfo) => boolean)): number;
  /** Forgets the watch history: a watch from any resourceVersion handed out so far gets the 410 ERROR event. */
  expireHistory(): void;
  /** The next `count` watches of a plural get the 410 ERROR event whatever their resourceVersion. */
  goneOnNextWatch(plural: string, count?: number): void;
  /** The next `count` updates (PUT or PATCH, status included) of that object answer 409 Conflict. */
  conflictOnNextWrite(plural: string, name: string, count?: number): void;
  /**
   * The next `count` requests (of `method`, whose path and query include `pathIncludes`) answer `status` (default
   * 500) with a Status; replaces the previous such fault, so `failNext(0)` ends it.
   */
  failNext(count: number, options?: { status?: number; pathIncludes?: string; method?: string }): void;
  /** Milliseconds every answer waits before it is made. */
  delayMs: number;
}

export interface KubeApiServer {
  /** `http://127.0.0.1:<port>`. */
  readonly url: string;
  /** A KubeConfig whose current context is this server, a token user and `namespace`. */
  kubeConfig(namespace?: string): KubeConfig;
  /** Every request so far, in order. */
  readonly requests: RecordedRequest[];
  /** The stored object at an API path (`/apis/{group}/{version}/namespaces/{ns}/{plural}/{name}`), a copy. */
  object<T = KubeObject>(apiPath: string): T | undefined;
  /** The stored objects of a plural (`enginepools`, or `events.events.k8s.io` to name the group), copies. */
  objects<T = KubeObject>(plural: string, namespace?: string): T[];
  /**
   * Writes an object's status as its controller would (the Deployment controller reporting ready pods): through the
   * status subresource, a new resourceVersion and a MODIFIED event. The stored object, a copy.
   */
  setStatus<T = KubeObject>(apiPath: string, status: Json): T;
  /** The current global resourceVersion. */
  resourceVersion(): string;
  /** How many watches are open. */
  openWatches(): number;
  readonly faults: KubeApiFaults;
  /** Ends every watch and stops the server. */
  close(): Promise<void>;
}

// ---------------------------------------------------------------------------------------------------------------
// Kinds served

interface CelRule {
  /** The schema path of the node the rule is on (`spec`). */
  path: string[];
  rule: string;
  message: string;
  check: ParseResult;
  transition: boolean;
}

interface ResourceType {
  group: string;
  version: string;
  groupVersion: string;
  plural: string;
  singular: string;
  kind: string;
  shortNames: string[];
  /** A status subresource: the main endpoint ignores status, `/status` ignores everything else. */
  statusSubresource: boolean;
  /** A custom resource: schema-validated, no strategic merge, a PUT must name the resourceVersion it replaces. */
  custom: boolean;
  validate?: ValidateFunction;
  rules: CelRule[];
}

const builtInKinds: Array<[group: string, plural: string, kind: string, status: boolean, shortNames: string[]]> = [
  ['', 'configmaps', 'ConfigMap', false, ['cm']],
  ['', 'secrets', 'Secret', false, []],
  ['', 'services', 'Service', true, ['svc']],
  ['', 'events', 'Event', false, ['ev']],
  ['', 'pods', 'Pod', true, ['po']],
  ['', 'serviceaccounts', 'ServiceAccount', false, ['sa']],
  ['apps', 'deployments', 'Deployment', true, ['deploy']],
  ['policy', 'poddisruptionbudgets', 'PodDisruptionBudget', true, ['pdb']],
  ['coordination.k8s.io', 'leases', 'Lease', false, []],
  ['events.k8s.io', 'events', 'Event', false, ['ev']],
];

function builtInType([group, plural, kind, status, shortNames]: (typeof builtInKinds)[number]): ResourceType {
  const version = 'v1';
  return {
    group,
    version,
    groupVersion: group === '' ? version : `${group}/${version}`,
    plural,
    singular: kind.toLowerCase(),
    kind,
    shortNames,
    statusSubresource: status,
    custom: false,
    rules: [],
  };
}

/** The CEL rules (`x-kubernetes-validations`) of a structural schema, on nodes reached through `properties`. */
function celRules(schema: Json, path: string[] = []): CelRule[] {
  const here = ((schema['x-kubernetes-validations'] ?? []) as Array<{ rule: string; message?: string }>).map(
    ({ rule, message }) => ({
      path,
      rule,
      message: message ?? `failed rule: ${rule}`,
      check: parseCel(rule),
      transition: /\boldSelf\b/.test(rule),
    }),
  );
  const children = Object.entries((schema.properties ?? {}) as Record<string, Json>).flatMap(([name, child]) =>
    celRules(child, [...path, name]),
  );
  return [...here, ...children];
}

function customTypes(crd: Json, ajv: Ajv): ResourceType[] {
  const spec = crd.spec as {
    group: string;
    names: { kind: string; plural: string; singular?: string; shortNames?: string[] };
    versions: Array<{ name: string; served: boolean; schema?: { openAPIV3Schema?: Json }; subresources?: Json }>;
  };
  return spec.versions
    .filter((version) => version.served)
    .map((version) => {
      const schema = version.schema?.openAPIV3Schema;
      return {
        group: spec.group,
        version: version.name,
        groupVersion: `${spec.group}/${version.name}`,
        plural: spec.names.plural,
        singular: spec.names.singular ?? spec.names.kind.toLowerCase(),
        kind: spec.names.kind,
        shortNames: spec.names.shortNames ?? [],
        statusSubresource: version.subresources?.status !== undefined,
        custom: true,
        validate: schema === undefined ? undefined : ajv.compile(asJsonSchema(schema) as Json),
        rules: schema === undefined ? [] : celRules(schema),
      };
    });
}

const qualifiedResource = (type: ResourceType) => (type.group === '' ? type.plural : `${type.plural}.${type.group}`);
const qualifiedKind = (type: ResourceType) => (type.group === '' ? type.kind : `${type.kind}.${type.group}`);

// ---------------------------------------------------------------------------------------------------------------
// Errors: always a Status

class StatusError extends Error {
  constructor(
    readonly code: number,
    readonly reason: string,
    message: string,
    readonly details?: Json,
  ) {
    super(message);
  }

  get status(): Json {
    return {
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: this.message,
      reason: this.reason,
      ...(this.details === undefined ? {} : { details: this.details }),
      code: this.code,
    };
  }
}

const reasons: Record<number, string> = {
  400: 'BadRequest',
  404: 'NotFound',
  405: 'MethodNotAllowed',
  409: 'Conflict',
  410: 'Gone',
  415: 'UnsupportedMediaType',
  422: 'Invalid',
  429: 'TooManyRequests',
  503: 'ServiceUnavailable',
  504: 'Timeout',
};

const badRequest = (message: string) => new StatusError(400, 'BadRequest', message);
const noSuchResource = () => new StatusError(404, 'NotFound', 'the server could not find the requested resource');
const notFound = (type: ResourceType, name: string) =>
  new StatusError(404, 'NotFound', `${qualifiedResource(type)} "${name}" not found`, {
    name,
    group: type.group,
    kind: type.plural,
  });
const conflict = (
  type: ResourceType,
  name: string,
  why = 'the object has been modified; please apply your changes to the latest version and try again',
) =>
  new StatusError(409, 'Conflict', `Operation cannot be fulfilled on ${qualifiedResource(type)} "${name}": ${why}`, {
    name,
    group: type.group,
    kind: type.plural,
  });

interface Cause {
  reason: string;
  field: string;
  message: string;
}

function invalid(type: ResourceType, name: string, causes: Cause[]): StatusError {
  const listed = causes.map((cause) => `${cause.field}: ${cause.message}`);
  const summary = listed.length === 1 ? listed[0] : `[${listed.join(', ')}]`;
  return new StatusError(422, 'Invalid', `${qualifiedKind(type)} "${name}" is invalid: ${summary}`, {
    name,
    group: type.group,
    kind: type.kind,
    causes,
  });
}

/** Refused patch options (k8s.io/apiserver's ValidatePatchOptions). */
const patchOptionsInvalid = (reason: string, field: string, message: string) =>
  new StatusError(422, 'Invalid', `PatchOptions.meta.k8s.io "" is invalid: ${field}: ${message}`, {
    group: 'meta.k8s.io',
    kind: 'PatchOptions',
    causes: [{ reason, message, field }],
  });

const unsupportedPatch = () =>
  new StatusError(
    415,
    'UnsupportedMediaType',
    'the body of the request was in an unknown format - accepted media types include: application/json-patch+json, ' +
      'application/merge-patch+json, application/apply-patch+yaml',
  );

// ---------------------------------------------------------------------------------------------------------------
// JSON values

const isObject = (value: unknown): value is Json =>
  typeof value === 'object' && value !== null && !Array.isArray(value);
const clone = <T>(value: T): T => structuredClone(value);

function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((x, i) => deepEqual(x, b[i]));
  }
  if (!isObject(a) || !isObject(b)) return false;
  const keys = Object.keys(a);
  return (
    keys.length === Object.keys(b).length && keys.every((key) => Object.hasOwn(b, key) && deepEqual(a[key], b[key]))
  );
}

/** RFC 3339 to the second, as Kubernetes writes timestamps. */
const timestamp = () => new Date().toISOString().replace(/\.\d+Z$/, 'Z');

/** A JSON Merge Patch (RFC 7386) applied to a value. */
function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isObject(patch)) return clone(patch);
  const result: Json = isObject(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (key === '__proto__') continue;
    if (value === null) delete result[key];
    else result[key] = mergePatch(result[key], value);
  }
  return result;
}

function pointer(path: unknown): string[] {
  if (typeof path !== 'string' || (path !== '' && !path.startsWith('/'))) {
    throw badRequest(`invalid JSON pointer: ${JSON.stringify(path)}`);
  }
  return path === ''
    ? []
    : path
        .slice(1)
        .split('/')
        .map((token) => token.replace(/~1/g, '/').replace(/~0/g, '~'));
}

const patchFailed = (message: string) => new StatusError(422, 'Invalid', message);

/** A JSON Patch (RFC 6902) applied to a copy of a document: 400 when malformed, 422 when it does not apply. */
function jsonPatch(document: unknown, operations: unknown): unknown {
  if (!Array.isArray(operations)) throw badRequest('a JSON patch must be an array of operations');
  let doc = clone(document);
  const locate = (tokens: string[], op: string, path: string) => {
    let parent: unknown = doc;
    for (const token of tokens.slice(0, -1)) {
      parent = Array.isArray(parent) ? parent[Number(token)] : isObject(parent) ? parent[token] : undefined;
    }
    if (!isObject(parent) && !Array.isArray(parent)) {
      throw patchFailed(`${op} operation does not apply: doc is missing path: "${path}": missing value`);
    }
    return { parent, key: tokens[tokens.length - 1] as string };
  };
  const index = (array: unknown[], key: string, op: string, path: string, end: number) => {
    const at = key === '-' && op === 'add' ? array.length : /^(0|[1-9]\d*)$/.test(key) ? Number(key) : -1;
    if (at < 0 || at > end) throw patchFailed(`${op} operation does not apply: index out of range: "${path}"`);
    return at;
  };
  const get = (path: string): unknown => {
    let node: unknown = doc;
    for (const token of pointer(path)) {
      node = Array.isArray(node) ? node[Number(token)] : isObject(node) ? node[token] : undefined;
    }
    return node;
  };
  const add = (path: string, value: unknown) => {
    const tokens = pointer(path);
    if (tokens.length === 0) return void (doc = value);
    const { parent, key } = locate(tokens, 'add', path);
    if (Array.isArray(parent)) parent.splice(index(parent, key, 'add', path, parent.length), 0, value);
    else if (key !== '__proto__') parent[key] = value;
  };
  const remove = (path: string, op = 'remove'): unknown => {
    const tokens = pointer(path);
    const { parent, key } = locate(tokens, op, path);
    if (Array.isArray(parent)) return parent.splice(index(parent, key, op, path, parent.length - 1), 1)[0];
    if (!Object.hasOwn(parent, key)) {
      throw patchFailed(`${op} operation does not apply: doc is missing key: ${path}: missing value`);
    }
    const value = parent[key];
    delete parent[key];
    return value;
  };
  for (const operation of operations) {
    if (!isObject(operation) || typeof operation.op !== 'string') throw badRequest('a JSON patch operation needs op');
    const path = operation.path as string;
    pointer(path);
    switch (operation.op) {
      case 'add':
        add(path, clone(operation.value));
        break;
      case 'remove':
        remove(path);
        break;
      case 'replace':
        if (path === '') doc = clone(operation.value);
        else {
          remove(path, 'replace');
          add(path, clone(operation.value));
        }
        break;
      case 'move':
        add(path, remove(operation.from as string, 'move'));
        break;
      case 'copy':
        add(path, clone(get(operation.from as string)));
        break;
      case 'test':
        if (!deepEqual(get(path), operation.value)) throw patchFailed(`testing value ${path} failed: test failed`);
        break;
      default:
        throw badRequest(`Unexpected kind: ${operation.op}`);
    }
  }
  return doc;
}

// ---------------------------------------------------------------------------------------------------------------
// Server-side apply: field paths and their owners

/** A field path; a set list's element is its last token, `v:<JSON of the value>` as in fieldsV1. */
type FieldPath = string[];

/** The lists merged as sets by server-side apply; every other list is atomic. */
const setLists = new Set([JSON.stringify(['metadata', 'finalizers'])]);
const isSetList = (path: FieldPath) => setLists.has(JSON.stringify(path));
const overlaps = (a: FieldPath, b: FieldPath) =>
  a.length <= b.length ? a.every((token, i) => token === b[i]) : b.every((token, i) => token === a[i]);
const describe = (path: FieldPath) =>
  path.map((token) => (token.startsWith('v:') ? `[${token}]` : `.${token}`)).join('');

/** The leaf fields of an applied configuration (nulls are not applied, so not owned). */
function leafPaths(value: unknown, path: FieldPath = [], out: FieldPath[] = []): FieldPath[] {
  if (isSetList(path) && Array.isArray(value)) {
    for (const item of value) out.push([...path, `v:${JSON.stringify(item)}`]);
  } else if (isObject(value) && Object.keys(value).length > 0) {
    for (const [key, child] of Object.entries(value)) if (child !== null) leafPaths(child, [...path, key], out);
  } else if (path.length > 0) {
    out.push(path);
  }
  return out;
}

function valueAt(object: unknown, path: FieldPath): unknown {
  let node = object;
  for (const [i, token] of path.entries()) {
    if (Array.isArray(node) && isSetList(path.slice(0, i))) {
      const wanted = JSON.parse(token.slice(2)) as unknown;
      node = node.some((item) => deepEqual(item, wanted)) ? wanted : undefined;
    } else {
      node = isObject(node) ? node[token] : undefined;
    }
  }
  return node;
}

/** Removes a field (or a set's element), then parents it leaves empty, though never a top-level field. */
function removeAt(object: Json, path: FieldPath): void {
  const parents: unknown[] = [object];
  for (const token of path.slice(0, -1))
    parents.push(isObject(parents.at(-1)) ? (parents.at(-1) as Json)[token] : undefined);
  const parent = parents.at(-1);
  const last = path.at(-1) as string;
  if (Array.isArray(parent) && isSetList(path.slice(0, -1))) {
    const wanted = JSON.parse(last.slice(2)) as unknown;
    const kept = parent.filter((item) => !deepEqual(item, wanted));
    parent.splice(0, parent.length, ...kept);
  } else if (isObject(parent)) {
    delete parent[last];
  }
  for (let depth = path.length - 1; depth >= 2; depth--) {
    const node = parents[depth];
    const empty = Array.isArray(node) ? node.length === 0 : isObject(node) && Object.keys(node).length === 0;
    if (!empty) break;
    delete (parents[depth - 1] as Json)[path[depth - 1] as string];
  }
}

/** An applied configuration merged into an object: maps merge, set lists unite, everything else is replaced. */
function mergeApplied(target: unknown, applied: unknown, path: FieldPath = []): unknown {
  if (isSetList(path) && Array.isArray(applied)) {
    const existing = Array.isArray(target) ? target : [];
    return [...existing, ...applied.filter((item) => !existing.some((old) => deepEqual(old, item)))];
  }
  if (!isObject(applied)) return clone(applied);
  const result: Json = isObject(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(applied)) {
    if (key === '__proto__') continue;
    if (value === null) delete result[key];
    else result[key] = mergeApplied(result[key], value, [...path, key]);
  }
  return result;
}

function toFieldsV1(paths: FieldPath[]): Json {
  const root: Json = {};
  for (const path of paths) {
    let node = root;
    for (const [i, token] of path.entries()) {
      const key = isSetList(path.slice(0, i)) ? token : `f:${token}`;
      node = (node[key] ??= {}) as Json;
    }
  }
  return root;
}

function fromFieldsV1(tree: Json, path: FieldPath = [], out: FieldPath[] = []): FieldPath[] {
  const entries = Object.entries(tree).filter(([key]) => key !== '.');
  if (entries.length === 0 && path.length > 0) out.push(path);
  for (const [key, child] of entries) {
    fromFieldsV1(isObject(child) ? child : {}, [...path, key.startsWith('f:') ? key.slice(2) : key], out);
  }
  return out;
}

/** What an apply request configures: metadata's labels, annotations, finalizers and owners, and the body's fields. */
function appliedConfiguration(type: ResourceType, body: Json, subresource: string): Json {
  const { apiVersion: _apiVersion, kind: _kind, metadata, status, ...rest } = body;
  if (subresource === 'status') return status === undefined ? {} : { status };
  const meta: Json = {};
  for (const key of ['labels', 'annotations', 'finalizers', 'ownerReferences']) {
    if (isObject(metadata) && metadata[key] !== undefined) meta[key] = metadata[key];
  }
  return {
    ...(Object.keys(meta).length > 0 ? { metadata: meta } : {}),
    ...rest,
    ...(type.statusSubresource || status === undefined ? {} : { status }),
  };
}

interface ApplyConflict {
  manager: string;
  path: FieldPath;
}

/**
 * Server-side apply of `body` by `manager` to `current` (a bare object when creating): the merged object and the new
 * managed fields. A field another manager owns with another value is a conflict (409) unless forced, when it changes hands;
 * fields the manager applied before, now leaves out and nobody else owns are removed.
 */
function serverSideApply(
  type: ResourceType,
  current: Json,
  managedFields: ManagedFieldsEntry[],
  body: Json,
  manager: string,
  force: boolean,
  subresource: string,
): { object: Json; managedFields: ManagedFieldsEntry[] } {
  const configuration = appliedConfiguration(type, body, subresource);
  const applied = leafPaths(configuration);
  const mine = (entry: ManagedFieldsEntry) =>
    entry.manager === manager && entry.operation === 'Apply' && (entry.subresource ?? '') === subresource;
  const previous = managedFields.find(mine);
  const others = managedFields
    .filter((entry) => !mine(entry))
    .map((entry) => ({ entry, paths: fromFieldsV1(entry.fieldsV1) }));

  const conflicts: ApplyConflict[] = [];
  for (const other of others) {
    for (const owned of other.paths) {
      const clash = applied.find((path) => {
        if (!overlaps(path, owned)) return false;
        const shorter = path.length <= owned.length ? path : owned;
        return !deepEqual(valueAt(current, shorter), valueAt(configuration, shorter));
      });
      if (clash !== undefined) conflicts.push({ manager: other.entry.manager, path: owned });
    }
  }
  if (conflicts.length > 0 && !force) throw applyConflict(conflicts);
  if (force) {
    for (const other of others) {
      other.paths = other.paths.filter(
        (owned) => !conflicts.some((c) => c.manager === other.entry.manager && deepEqual(c.path, owned)),
      );
    }
  }

  const object = clone(current);
  for (const path of previous === undefined ? [] : fromFieldsV1(previous.fieldsV1)) {
    if (applied.some((kept) => overlaps(kept, path))) continue;
    if (others.some((other) => other.paths.some((owned) => overlaps(owned, path)))) continue;
    removeAt(object, path);
  }
  const merged = mergeApplied(object, configuration) as Json;

  const entry: ManagedFieldsEntry = {
    manager,
    operation: 'Apply',
    apiVersion: type.groupVersion,
    time: timestamp(),
    fieldsType: 'FieldsV1',
    fieldsV1: toFieldsV1(applied),
    ...(subresource === '' ? {} : { subresource }),
  };
  // Every entry keeps its place (the manager's own is replaced); a manager left owning nothing is dropped.
  const entries = managedFields.flatMap((existing): ManagedFieldsEntry[] => {
    if (existing === previous) return applied.length === 0 ? [] : [entry];
    const other = others.find((candidate) => candidate.entry === existing);
    return other === undefined || other.paths.length === 0 ? [] : [{ ...existing, fieldsV1: toFieldsV1(other.paths) }];
  });
  if (previous === undefined && applied.length > 0) entries.push(entry);
  return { object: merged, managedFields: entries };
}

/** The real server's message for apply conflicts (k8s.io/apiserver's fieldmanager). */
function applyConflict(conflicts: ApplyConflict[]): StatusError {
  const causes = conflicts.map(({ manager, path }) => ({
    reason: 'FieldManagerConflict',
    message: `conflict with "${manager}"`,
    field: describe(path),
  }));
  let message: string;
  if (conflicts.length === 1) {
    const [only] = conflicts as [ApplyConflict];
    message = `Apply failed with 1 conflict: conflict with "${only.manager}": ${describe(only.path)}`;
  } else {
    const managers = [...new Set(conflicts.map((c) => c.manager))].sort();
    const lines = managers.flatMap((manager) => [
      `conflicts with "${manager}":`,
      ...conflicts.filter((c) => c.manager === manager).map((c) => `- ${describe(c.path)}`),
    ]);
    message = `Apply failed with ${conflicts.length} conflicts: ${lines.join('\n')}`;
  }
  return new StatusError(409, 'Conflict', message, { causes });
}

// ---------------------------------------------------------------------------------------------------------------
// Selectors

interface LabelRequirement {
  key: string;
  operator: 'in' | 'notin' | 'exists' | '!exists';
  values: string[];
}

function parseLabelSelector(text: string): LabelRequirement[] {
  const terms = text
    .split(/,(?![^(]*\))/)
    .map((term) => term.trim())
    .filter(Boolean);
  return terms.map((term) => {
    const set = /^([^\s!=]+)\s+(in|notin)\s+\(([^)]*)\)$/.exec(term);
    if (set) {
      const values = (set[3] as string)
        .split(',')
        .map((value) => value.trim())
        .filter(Boolean);
      return { key: set[1] as string, operator: set[2] as 'in' | 'notin', values };
    }
    const equality = /^([^\s!=]+)\s*(==|=|!=)\s*([^\s=!]*)$/.exec(term);
    if (equality) {
      return {
        key: equality[1] as string,
        operator: equality[2] === '!=' ? 'notin' : 'in',
        values: [equality[3] as string],
      };
    }
    if (/^![^\s!=]+$/.test(term)) return { key: term.slice(1), operator: '!exists', values: [] };
    if (/^[^\s!=()]+$/.test(term)) return { key: term, operator: 'exists', values: [] };
    throw badRequest(`unable to parse requirement: ${JSON.stringify(term)}`);
  });
}

function labelsMatch(labels: Record<string, string> | undefined, requirements: LabelRequirement[]): boolean {
  return requirements.every(({ key, operator, values }) => {
    const value = labels?.[key];
    switch (operator) {
      case 'in':
        return value !== undefined && values.includes(value);
      case 'notin':
        return value === undefined || !values.includes(value);
      case 'exists':
        return value !== undefined;
      case '!exists':
        return value === undefined;
    }
  });
}

interface FieldRequirement {
  path: string[];
  equal: boolean;
  value: string;
}

function parseFieldSelector(text: string): FieldRequirement[] {
  return text
    .split(',')
    .map((term) => term.trim())
    .filter(Boolean)
    .map((term) => {
      const match = /^([^=!]+)(==|=|!=)(.*)$/.exec(term);
      if (!match) throw badRequest(`invalid selector: '${text}'; can't understand '${term}'`);
      return { path: (match[1] as string).split('.'), equal: match[2] !== '!=', value: match[3] as string };
    });
}

function fieldsMatch(object: KubeObject, requirements: FieldRequirement[]): boolean {
  return requirements.every(({ path, equal, value }) => {
    const actual = valueAt(object, path);
    return (String(actual ?? '') === value) === equal;
  });
}

interface Selection {
  namespace: string | undefined;
  labels: LabelRequirement[];
  fields: FieldRequirement[];
}

const selects = (selection: Selection, object: KubeObject) =>
  (selection.namespace === undefined || object.metadata.namespace === selection.namespace) &&
  labelsMatch(object.metadata.labels, selection.labels) &&
  fieldsMatch(object, selection.fields);

// ---------------------------------------------------------------------------------------------------------------
// Storage, history and watches

type EventType = 'ADDED' | 'MODIFIED' | 'DELETED';

interface Change {
  resourceVersion: number;
  type: ResourceType;
  event: EventType;
  object: KubeObject;
  previous: KubeObject | undefined;
}

interface OpenWatch extends WatchInfo {
  type: ResourceType;
  selection: Selection;
  response: ServerResponse;
  timers: NodeJS.Timeout[];
}

const typeKey = (type: ResourceType) => `${type.groupVersion}/${type.plural}`;
const objectKey = (namespace: string, name: string) => `${namespace}/${name}`;
const namePattern = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

interface DeleteOptions {
  propagationPolicy?: string;
  preconditions?: { uid?: string; resourceVersion?: string };
}

/** The state of the API server: stored objects, the change history, the open watches and the pending faults. */
class ApiState {
  readonly types: ResourceType[];
  private readonly store = new Map<string, Map<string, KubeObject>>();
  private history: Change[] = [];
  private counter = 100;
  /** Changes up to this resourceVersion are forgotten: a watch from before it gets 410. */
  private compactedThrough = 100;
  readonly watches = new Set<OpenWatch>();
  /** Injected faults: 410s owed to the next watches of a plural, 409s to the next updates of `plural/name`. */
  readonly gone = new Map<string, number>();
  readonly conflicts = new Map<string, number>();

  constructor(
    crds: Iterable<Json>,
    private readonly historyLimit: number,
  ) {
    const ajv = new Ajv({ strict: false, allErrors: true, removeAdditional: true });
    addFormats.default(ajv);
    this.types = [...builtInKinds.map(builtInType), ...[...crds].flatMap((crd) => customTypes(crd, ajv))];
    for (const type of this.types) this.store.set(typeKey(type), new Map());
  }

  get resourceVersion(): number {
    return this.counter;
  }

  find(group: string, version: string, plural: string): ResourceType | undefined {
    return this.types.find((type) => type.group === group && type.version === version && type.plural === plural);
  }

  /** A type by `plural` or `plural.group` (the core group first when a plural is in several). */
  byPlural(name: string): ResourceType | undefined {
    return this.types.find((type) => type.plural === name || `${type.plural}.${type.group}` === name);
  }

  objectsOf(type: ResourceType): Map<string, KubeObject> {
    return this.store.get(typeKey(type)) as Map<string, KubeObject>;
  }

  get(type: ResourceType, namespace: string, name: string): KubeObject | undefined {
    return this.objectsOf(type).get(objectKey(namespace, name));
  }

  list(type: ResourceType, selection: Selection): KubeObject[] {
    return [...this.objectsOf(type).entries()]
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([, object]) => object)
      .filter((object) => selects(selection, object));
  }

  // -- writing --------------------------------------------------------------------------------------------------

  /** Stores a change under the next resourceVersion, keeps it in the history and tells the watches. */
  private commit(type: ResourceType, event: EventType, object: KubeObject, previous?: KubeObject): KubeObject {
    object.metadata.resourceVersion = String(++this.counter);
    const objects = this.objectsOf(type);
    const key = objectKey(object.metadata.namespace, object.metadata.name);
    if (event === 'DELETED') objects.delete(key);
    else objects.set(key, object);
    const change: Change = { resourceVersion: this.counter, type, event, object, previous };
    this.history.push(change);
    while (this.history.length > this.historyLimit) {
      this.compactedThrough = (this.history.shift() as Change).resourceVersion;
    }
    for (const watch of this.watches) if (watch.type === type) sendChange(watch, change);
    return object;
  }

  /** Forgets every change so far: every resourceVersion handed out is now too old to watch from. */
  expireHistory(): void {
    this.history = [];
    this.compactedThrough = ++this.counter;
  }

  /** The changes after a resourceVersion, or undefined when some of them are forgotten. */
  changesSince(type: ResourceType, resourceVersion: number): Change[] | undefined {
    if (resourceVersion < this.compactedThrough) return undefined;
    return this.history.filter((change) => change.type === type && change.resourceVersion > resourceVersion);
  }

  get oldestKept(): number {
    return this.compactedThrough;
  }

  create(type: ResourceType, namespace: string, body: Json, managedFields?: ManagedFieldsEntry[]): KubeObject {
    const object = this.identify(type, namespace, body);
    const metadata = (isObject(body.metadata) ? body.metadata : {}) as Partial<ObjectMeta>;
    if (metadata.resourceVersion !== undefined && metadata.resourceVersion !== '') {
      throw new StatusError(500, 'InternalError', 'resourceVersion should not be set on objects to be created');
    }
    let name = metadata.name ?? '';
    if (name === '' && typeof metadata.generateName === 'string' && metadata.generateName !== '') {
      const alphabet = 'bcdfghjklmnpqrstvwxz2456789';
      do {
        name =
          metadata.generateName + Array.from({ length: 5 }, () => alphabet[Math.floor(Math.random() * 27)]).join('');
      } while (this.get(type, namespace, name) !== undefined);
    }
    if (name === '') {
      throw invalid(type, '', [
        {
          reason: 'FieldValueRequired',
          field: 'metadata.name',
          message: 'Required value: name or generateName is required',
        },
      ]);
    }
    this.checkName(type, name);
    if (this.get(type, namespace, name) !== undefined) {
      throw new StatusError(409, 'AlreadyExists', `${qualifiedResource(type)} "${name}" already exists`, {
        name,
        group: type.group,
        kind: type.plural,
      });
    }
    const { deletionTimestamp: _d, deletionGracePeriodSeconds: _g, managedFields: _m, ...kept } = metadata;
    object.metadata = {
      ...kept,
      name,
      namespace,
      uid: randomUUID(),
      resourceVersion: '',
      generation: 1,
      creationTimestamp: timestamp(),
      ...(managedFields === undefined ? {} : { managedFields }),
    } as ObjectMeta;
    if (type.statusSubresource) delete object.status;
    const validated = this.validate(type, object, undefined);
    return this.commit(type, 'ADDED', validated);
  }

  /**
   * Replaces `current` with `candidate` (a PUT body, or the result of a patch) as the main endpoint or the status
   * subresource would: the resourceVersion it carries is a precondition, server-owned metadata is kept, generation
   * moves with the spec, and an object being deleted goes once its last finalizer does.
   */
  update(
    type: ResourceType,
    current: KubeObject,
    candidate: Json,
    options: { subresource: string; managedFields?: ManagedFieldsEntry[]; put?: boolean; faults?: boolean },
  ): KubeObject {
    const { name, namespace } = current.metadata;
    const conflictKey = `${type.plural}/${name}`;
    const pending = this.conflicts.get(conflictKey) ?? 0;
    if (pending > 0 && options.faults !== false) {
      this.conflicts.set(conflictKey, pending - 1);
      throw conflict(type, name);
    }
    const identified = this.identify(type, namespace, candidate, name);
    const wanted = (isObject(candidate.metadata) ? candidate.metadata : {}) as Partial<ObjectMeta>;
    if (wanted.resourceVersion !== undefined && wanted.resourceVersion !== '') {
      if (wanted.resourceVersion !== current.metadata.resourceVersion) throw conflict(type, name);
    } else if (options.put && type.custom) {
      throw invalid(type, name, [
        {
          reason: 'FieldValueInvalid',
          field: 'metadata.resourceVersion',
          message: 'Invalid value: 0x0: must be specified for an update',
        },
      ]);
    }

    let next: KubeObject;
    if (options.subresource === 'status') {
      next = clone(current);
      if (identified.status === undefined) delete next.status;
      else next.status = identified.status;
    } else {
      next = identified;
      next.metadata = {
        ...wanted,
        name,
        namespace,
        uid: current.metadata.uid,
        resourceVersion: current.metadata.resourceVersion,
        generation: current.metadata.generation,
        creationTimestamp: current.metadata.creationTimestamp,
      } as ObjectMeta;
      delete next.metadata.managedFields;
      for (const key of ['deletionTimestamp', 'deletionGracePeriodSeconds'] as const) {
        if (current.metadata[key] === undefined) delete next.metadata[key];
        else next.metadata[key] = current.metadata[key] as never;
      }
      if (type.statusSubresource) {
        if (current.status === undefined) delete next.status;
        else next.status = current.status;
      }
    }
    const managedFields = options.managedFields ?? current.metadata.managedFields;
    if (managedFields === undefined || managedFields.length === 0) delete next.metadata.managedFields;
    else next.metadata.managedFields = managedFields;

    if (current.metadata.deletionTimestamp !== undefined) {
      const added = (next.metadata.finalizers ?? []).filter((f) => !(current.metadata.finalizers ?? []).includes(f));
      if (added.length > 0) {
        throw invalid(type, name, [
          {
            reason: 'FieldValueForbidden',
            field: 'metadata.finalizers',
            message: `Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers ${JSON.stringify(added)}`,
          },
        ]);
      }
    }
    if (next.metadata.finalizers?.length === 0) delete next.metadata.finalizers;
    next = this.validate(type, next, current);
    if (!deepEqual(specOf(type, next), specOf(type, current))) next.metadata.generation += 1;

    if (deepEqual(withoutTimes(next), withoutTimes(current))) return current;
    if (next.metadata.deletionTimestamp !== undefined && (next.metadata.finalizers ?? []).length === 0) {
      return this.purge(type, next);
    }
    return this.commit(type, 'MODIFIED', next, current);
  }

  /**
   * A delete: marked (deletionTimestamp) while finalizers hold it, else removed with its dependents collected.
   * `deleted` tells which.
   */
  delete(type: ResourceType, current: KubeObject, options: DeleteOptions): { object: KubeObject; deleted: boolean } {
    const { name } = current.metadata;
    const { uid, resourceVersion } = options.preconditions ?? {};
    if (uid !== undefined && uid !== current.metadata.uid) {
      throw conflict(
        type,
        name,
        `Precondition failed: UID in precondition: ${uid}, UID in object meta: ${current.metadata.uid}`,
      );
    }
    if (resourceVersion !== undefined && resourceVersion !== current.metadata.resourceVersion) {
      throw conflict(
        type,
        name,
        `Precondition failed: ResourceVersion in precondition: ${resourceVersion}, ResourceVersion in object meta: ${current.metadata.resourceVersion}`,
      );
    }
    if (current.metadata.deletionTimestamp !== undefined) return { object: current, deleted: false };
    const policy = options.propagationPolicy ?? 'Background';
    if (policy === 'Orphan') this.orphan(current.metadata.uid);
    const finalizers = [...(current.metadata.finalizers ?? [])];
    const foreground = policy === 'Foreground' && this.dependents(current.metadata.uid).length > 0;
    if (foreground) finalizers.push('foregroundDeletion');
    if (finalizers.length === 0) return { object: this.purge(type, current), deleted: true };

    const marked = clone(current);
    marked.metadata.finalizers = finalizers;
    marked.metadata.deletionTimestamp = timestamp();
    marked.metadata.deletionGracePeriodSeconds = 0;
    marked.metadata.generation += 1;
    const stored = this.commit(type, 'MODIFIED', marked, current);
    if (foreground) {
      this.collect(current.metadata.uid, 'Foreground');
      this.releaseForeground();
    }
    return { object: this.get(type, stored.metadata.namespace, stored.metadata.name) ?? stored, deleted: false };
  }

  /** Removes an object for good (DELETED carries its last state), then collects what it owned. */
  private purge(type: ResourceType, object: KubeObject): KubeObject {
    const previous = this.get(type, object.metadata.namespace, object.metadata.name);
    const removed = this.commit(type, 'DELETED', clone(object), previous);
    this.collect(object.metadata.uid, 'Background');
    this.releaseForeground();
    return removed;
  }

  /** The garbage collector's part: deletes what an owner owned, each as it now is (a cascade may have got it). */
  private collect(uid: string, propagationPolicy: string): void {
    for (const { type, object } of this.dependents(uid)) {
      const live = this.get(type, object.metadata.namespace, object.metadata.name);
      if (live?.metadata.uid === object.metadata.uid) this.delete(type, live, { propagationPolicy });
    }
  }

  private dependents(uid: string): Array<{ type: ResourceType; object: KubeObject }> {
    return this.types.flatMap((type) =>
      [...this.objectsOf(type).values()]
        .filter((object) => (object.metadata.ownerReferences ?? []).some((owner) => owner.uid === uid))
        .map((object) => ({ type, object })),
    );
  }

  /** Orphan propagation: the dependents lose their reference to the owner. */
  private orphan(uid: string): void {
    for (const { type, object } of this.dependents(uid)) {
      const next = clone(object);
      next.metadata.ownerReferences = (next.metadata.ownerReferences ?? []).filter((owner) => owner.uid !== uid);
      if (next.metadata.ownerReferences.length === 0) delete next.metadata.ownerReferences;
      this.commit(type, 'MODIFIED', next, object);
    }
  }

  /** Owners deleted in the foreground whose dependents are all gone lose the foregroundDeletion finalizer. */
  private releaseForeground(): void {
    for (const type of this.types) {
      for (const object of [...this.objectsOf(type).values()]) {
        if (!object.metadata.finalizers?.includes('foregroundDeletion')) continue;
        if (this.objectsOf(type).get(objectKey(object.metadata.namespace, object.metadata.name)) !== object) continue;
        if (this.dependents(object.metadata.uid).length > 0) continue;
        const next = clone(object);
        next.metadata.finalizers = (next.metadata.finalizers ?? []).filter((f) => f !== 'foregroundDeletion');
        if (next.metadata.finalizers.length === 0) this.purge(type, next);
        else this.commit(type, 'MODIFIED', next, object);
      }
    }
  }

  /** A body as an object of the type: apiVersion and kind checked (or filled in), namespace and name matched. */
  private identify(type: ResourceType, namespace: string, body: Json, name?: string): KubeObject {
    if (body.apiVersion !== undefined && body.apiVersion !== type.groupVersion) {
      throw badRequest(
        `the API version in the data (${String(body.apiVersion)}) does not match the expected API version (${type.groupVersion})`,
      );
    }
    if (body.kind !== undefined && body.kind !== type.kind) {
      throw badRequest(`the kind in the data (${String(body.kind)}) does not match the expected kind (${type.kind})`);
    }
    const metadata = isObject(body.metadata) ? body.metadata : {};
    if (metadata.namespace !== undefined && metadata.namespace !== '' && metadata.namespace !== namespace) {
      throw badRequest('the namespace of the provided object does not match the namespace sent on the request');
    }
    if (name !== undefined && metadata.name !== undefined && metadata.name !== '' && metadata.name !== name) {
      throw badRequest(
        `the name of the object (${String(metadata.name)}) does not match the name on the URL (${name})`,
      );
    }
    const object: Json = { ...clone(body), apiVersion: type.groupVersion, kind: type.kind, metadata: clone(metadata) };
    if (type.group === '' && type.plural === 'secrets' && isObject(object.stringData)) {
      // stringData is write-only: the server folds it into data, base64-encoded.
      const encoded = Object.entries(object.stringData).map(([key, value]) => [
        key,
        Buffer.from(String(value)).toString('base64'),
      ]);
      object.data = { ...(isObject(object.data) ? object.data : {}), ...Object.fromEntries(encoded) };
      delete object.stringData;
    }
    return object as KubeObject;
  }

  private checkName(type: ResourceType, name: string): void {
    if (name.length > 253 || !namePattern.test(name)) {
      throw invalid(type, name, [
        {
          reason: 'FieldValueInvalid',
          field: 'metadata.name',
          message:
            `Invalid value: ${JSON.stringify(name)}: a lowercase RFC 1123 subdomain must consist of lower case ` +
            "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
        },
      ]);
    }
  }

  /** A custom resource held to its CRD: unknown fields pruned, the structural schema, then the CEL rules. */
  private validate(type: ResourceType, object: KubeObject, old: KubeObject | undefined): KubeObject {
    if (!type.custom) return object;
    const { name } = object.metadata;
    if (type.validate !== undefined) {
      const pruned = clone(object);
      if (!type.validate(pruned)) throw invalid(type, name, schemaCauses(type.validate.errors ?? [], pruned));
      pruned.metadata = object.metadata;
      object = pruned;
    }
    const causes: Cause[] = [];
    for (const rule of type.rules) {
      const self = valueAt(object, rule.path);
      const oldSelf = old === undefined ? undefined : valueAt(old, rule.path);
      if (self === undefined || (rule.transition && oldSelf === undefined)) continue;
      // With ratcheting, as the real server does: a value the write leaves unchanged is not checked again.
      if (oldSelf !== undefined && deepEqual(self, oldSelf) && !rule.transition) continue;
      let holds: unknown;
      try {
        holds = rule.check({ self, ...(oldSelf === undefined ? {} : { oldSelf }) });
      } catch {
        holds = false;
      }
      if (holds !== true) {
        causes.push({
          reason: 'FieldValueInvalid',
          field: rule.path.join('.'),
          message: `Invalid value: "object": ${rule.message}`,
        });
      }
    }
    if (causes.length > 0) throw invalid(type, name, causes);
    return object;
  }
}

/** What generation follows: everything but metadata, and but status when the status is a subresource. */
function specOf(type: ResourceType, object: KubeObject): Json {
  const { metadata: _metadata, status, ...rest } = object;
  return type.statusSubresource ? rest : { ...rest, status };
}

/** An object without the managed fields' times: a write that changes nothing else is no change at all. */
function withoutTimes(object: KubeObject): KubeObject {
  const copy = clone(object);
  for (const entry of copy.metadata.managedFields ?? []) entry.time = '';
  return copy;
}

/** The causes of an ajv refusal, worded as the API server words them. */
function schemaCauses(errors: ErrorObject[], object: unknown): Cause[] {
  const fieldOf = (instancePath: string) =>
    pointer(instancePath)
      .map((token) => (/^\d+$/.test(token) ? `[${token}]` : `.${token}`))
      .join('')
      .replace(/^\./, '');
  const causes = errors.map((error): Cause => {
    const field = fieldOf(error.instancePath);
    const value = valueAt(object, pointer(error.instancePath));
    const shown = JSON.stringify(value);
    switch (error.keyword) {
      case 'required': {
        const missing = (error.params as { missingProperty: string }).missingProperty;
        return {
          reason: 'FieldValueRequired',
          field: field === '' ? missing : `${field}.${missing}`,
          message: 'Required value',
        };
      }
      case 'enum': {
        const allowed = (error.params as { allowedValues: unknown[] }).allowedValues;
        return {
          reason: 'FieldValueNotSupported',
          field,
          message: `Unsupported value: ${shown}: supported values: ${allowed.map((v) => JSON.stringify(v)).join(', ')}`,
        };
      }
      case 'type':
        return {
          reason: 'FieldValueTypeInvalid',
          field,
          message: `Invalid value: ${JSON.stringify(typeof value)}: ${field} in body must be of type ${String((error.params as { type: unknown }).type)}: ${shown}`,
        };
      default:
        return {
          reason: 'FieldValueInvalid',
          field,
          message: `Invalid value: ${shown}: ${field} in body ${error.message ?? 'is invalid'}`,
        };
    }
  });
  return causes.filter(
    (cause, i) => causes.findIndex((c) => c.field === cause.field && c.message === cause.message) === i,
  );
}

// ---------------------------------------------------------------------------------------------------------------
// Watch streams

function writeEvent(watch: OpenWatch, type: string, object: unknown): void {
  if (!watch.response.writableEnded && !watch.response.destroyed) {
    watch.response.write(`${JSON.stringify({ type, object })}\n`);
  }
}

/** A change as the watch sees it: an object entering or leaving its selection is ADDED or DELETED. */
function sendChange(watch: OpenWatch, change: Change): void {
  const now = selects(watch.selection, change.object);
  const before = change.previous !== undefined && selects(watch.selection, change.previous);
  if (change.event === 'MODIFIED') {
    if (now) writeEvent(watch, before ? 'MODIFIED' : 'ADDED', change.object);
    else if (before) writeEvent(watch, 'DELETED', change.object);
  } else if (now || (change.event === 'DELETED' && before)) {
    writeEvent(watch, change.event, change.object);
  }
}

const expired = (message: string) => ({
  type: 'ERROR',
  object: { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason: 'Expired', code: 410 },
});

const isTrue = (value: string | null) => value === 'true' || value === '1';

// ---------------------------------------------------------------------------------------------------------------
// HTTP

const json = (response: ServerResponse, code: number, body: unknown) => {
  const text = JSON.stringify(body);
  response.writeHead(code, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
  response.end(text);
};

async function readBody(request: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

function parseBody(text: string, contentType: string): unknown {
  if (text.trim() === '') throw badRequest('the request body is empty');
  try {
    return contentType.includes('yaml') ? (parseYaml(text) as unknown) : (JSON.parse(text) as unknown);
  } catch (error) {
    throw badRequest(`couldn't get version/kind; json parse error: ${(error as Error).message}`);
  }
}

function objectBody(text: string, contentType: string): Json {
  const body = parseBody(text, contentType);
  if (!isObject(body)) throw badRequest('the request body must be an object');
  return body;
}

/** Starts the Kubernetes API test server on 127.0.0.1 (a port the OS picks). */
export async function startKubeApiServer(options: KubeApiServerOptions = {}): Promise<KubeApiServer> {
  const bookmarkIntervalMs = options.bookmarkIntervalMs ?? 1000;
  const state = new ApiState(options.crds ?? customResourceDefinitions().values(), options.historyLimit ?? 10_000);
  const requests: RecordedRequest[] = [];
  let failure: { remaining: number; status: number; pathIncludes?: string; method?: string } | undefined;

  const faults: KubeApiFaults = {
    delayMs: 0,
    cutWatches(filter) {
      const chosen = [...state.watches].filter((watch) =>
        filter === undefined ? true : typeof filter === 'string' ? watch.plural === filter : filter(watch),
      );
      for (const watch of chosen) {
        closeWatch(watch);
        watch.response.socket?.destroy();
      }
      return chosen.length;
    },
    expireHistory: () => state.expireHistory(),
    goneOnNextWatch(plural, count = 1) {
      state.gone.set(plural, (state.gone.get(plural) ?? 0) + count);
    },
    conflictOnNextWrite(plural, name, count = 1) {
      const key = `${plural}/${name}`;
      state.conflicts.set(key, (state.conflicts.get(key) ?? 0) + count);
    },
    failNext(count, { status = 500, pathIncludes, method } = {}) {
      failure = count > 0 ? { remaining: count, status, pathIncludes, method: method?.toUpperCase() } : undefined;
    },
  };

  /** The type and stored object an API path names (`/api/v1/namespaces/{ns}/{plural}/{name}` or `/apis/...`). */
  function locate(apiPath: string): { type?: ResourceType; object?: KubeObject } {
    const path = apiPath.split('?')[0]?.split('/').filter(Boolean) ?? [];
    const isCore = path[0] === 'api';
    const [group, version] = isCore ? ['', path[1]] : [path[1], path[2]];
    const [, namespace, plural, name] = path.slice(isCore ? 2 : 3);
    const type = state.find(group ?? '', version ?? '', plural ?? '');
    return { type, object: type && state.get(type, namespace ?? '', name ?? '') };
  }

  function closeWatch(watch: OpenWatch): void {
    for (const timer of watch.timers) clearTimeout(timer);
    state.watches.delete(watch);
  }

  function discovery(path: string[]): unknown {
    if (path.length === 1 && path[0] === 'api') {
      return { kind: 'APIVersions', versions: ['v1'], serverAddressByClientCIDRs: [] };
    }
    const groups = new Map<string, ResourceType[]>();
    for (const type of state.types) {
      if (type.group !== '') groups.set(type.group, [...(groups.get(type.group) ?? []), type]);
    }
    const group = (name: string, types: ResourceType[]) => {
      const versions = [...new Set(types.map((type) => type.version))].map((version) => ({
        groupVersion: `${name}/${version}`,
        version,
      }));
      return { name, versions, preferredVersion: versions[0] };
    };
    if (path.length === 1 && path[0] === 'apis') {
      return { kind: 'APIGroupList', apiVersion: 'v1', groups: [...groups].map(([name, types]) => group(name, types)) };
    }
    if (path.length === 2 && path[0] === 'apis' && groups.has(path[1] as string)) {
      return { kind: 'APIGroup', apiVersion: 'v1', ...group(path[1] as string, groups.get(path[1] as string) ?? []) };
    }
    const [groupName, version] = path[0] === 'api' ? ['', path[1]] : [path[1], path[2]];
    const served = state.types.filter((type) => type.group === groupName && type.version === version);
    if (served.length === 0) return undefined;
    const verbs = ['create', 'delete', 'get', 'list', 'patch', 'update', 'watch'];
    return {
      kind: 'APIResourceList',
      apiVersion: 'v1',
      groupVersion: served[0]?.groupVersion,
      resources: served.flatMap((type) => [
        {
          name: type.plural,
          singularName: type.singular,
          namespaced: true,
          kind: type.kind,
          verbs,
          shortNames: type.shortNames,
        },
        ...(type.statusSubresource
          ? [
              {
                name: `${type.plural}/status`,
                singularName: '',
                namespaced: true,
                kind: type.kind,
                verbs: ['get', 'patch', 'update'],
              },
            ]
          : []),
      ]),
    };
  }

  function serveWatch(response: ServerResponse, url: URL, type: ResourceType, selection: Selection): void {
    const query = url.searchParams;
    const from = query.get('resourceVersion') ?? '';
    const bookmarks = isTrue(query.get('allowWatchBookmarks'));
    const initialEvents = isTrue(query.get('sendInitialEvents'));
    if (from !== '' && !/^\d+$/.test(from)) throw badRequest(`invalid resource version: ${JSON.stringify(from)}`);
    response.writeHead(200, { 'Content-Type': 'application/json', 'Cache-Control': 'no-cache, private' });
    response.flushHeaders();

    // Without a resourceVersion (or "0", or asking for initial events) the watch starts with the current objects;
    // from one, it replays the changes after it, unless they are forgotten: then, as the real server does, an answer
    // of 200 whose only event is the 410 Expired Status.
    const fromList = from === '' || from === '0' || initialEvents;
    const replay = fromList ? [] : state.changesSince(type, Number(from));
    const owedGone = state.gone.get(type.plural) ?? 0;
    if (owedGone > 0) state.gone.set(type.plural, owedGone - 1);
    if (replay === undefined || owedGone > 0) {
      const message = `too old resource version: ${from || '0'} (${state.oldestKept})`;
      response.end(`${JSON.stringify(expired(message))}\n`);
      return;
    }

    const watch: OpenWatch = {
      group: type.group,
      plural: type.plural,
      namespace: selection.namespace,
      path: url.pathname + url.search,
      type,
      selection,
      response,
      timers: [],
    };
    if (fromList) {
      for (const object of state.list(type, selection)) writeEvent(watch, 'ADDED', object);
      if (initialEvents && bookmarks) {
        writeEvent(watch, 'BOOKMARK', {
          kind: type.kind,
          apiVersion: type.groupVersion,
          metadata: {
            resourceVersion: String(state.resourceVersion),
            annotations: { 'k8s.io/initial-events-end': 'true' },
          },
        });
      }
    } else {
      for (const change of replay) sendChange(watch, change);
    }
    state.watches.add(watch);
    if (bookmarks) {
      const bookmark = () => {
        writeEvent(watch, 'BOOKMARK', {
          kind: type.kind,
          apiVersion: type.groupVersion,
          metadata: { resourceVersion: String(state.resourceVersion) },
        });
        watch.timers[0] = setTimeout(bookmark, bookmarkIntervalMs);
      };
      watch.timers[0] = setTimeout(bookmark, bookmarkIntervalMs);
    }
    const timeoutSeconds = Number(query.get('timeoutSeconds') ?? 0);
    if (timeoutSeconds > 0) {
      watch.timers.push(
        setTimeout(() => {
          closeWatch(watch);
          response.end();
        }, timeoutSeconds * 1000),
      );
    }
    response.on('close', () => closeWatch(watch));
  }

  /** The answer to a request on a resource path, or a thrown StatusError. */
  function serveResource(
    request: IncomingMessage,
    response: ServerResponse,
    url: URL,
    type: ResourceType,
    namespace: string | undefined,
    rest: string[],
    text: string,
  ): void {
    const method = request.method ?? 'GET';
    const query = url.searchParams;
    const contentType =
      (request.headers['content-type'] ?? 'application/json').split(';')[0]?.trim().toLowerCase() ?? '';
    const [name, subresource = '', ...extra] = rest;
    const notAllowed = () =>
      new StatusError(405, 'MethodNotAllowed', 'the server does not allow this method on the requested resource');
    if (extra.length > 0 || (subresource !== '' && (subresource !== 'status' || !type.statusSubresource))) {
      throw noSuchResource();
    }

    if (name === undefined) {
      const selection: Selection = {
        namespace,
        labels: parseLabelSelector(query.get('labelSelector') ?? ''),
        fields: parseFieldSelector(query.get('fieldSelector') ?? ''),
      };
      if (method === 'GET' && isTrue(query.get('watch'))) return serveWatch(response, url, type, selection);
      if (method === 'GET') return json(response, 200, listOf(type, selection, query));
      if (method === 'POST' && namespace !== undefined) {
        return json(response, 201, state.create(type, namespace, objectBody(text, contentType)));
      }
      throw notAllowed();
    }
    if (namespace === undefined) throw notAllowed();

    const current = state.get(type, namespace, name);
    switch (method) {
      case 'GET':
        if (current === undefined) throw notFound(type, name);
        return json(response, 200, current);
      case 'PUT': {
        const body = objectBody(text, contentType);
        if (current === undefined) throw notFound(type, name);
        return json(response, 200, state.update(type, current, body, { subresource, put: true }));
      }
      case 'PATCH': {
        const manager = query.get('fieldManager') ?? '';
        const force = query.get('force');
        if (contentType === 'application/apply-patch+yaml') {
          if (manager === '') {
            throw patchOptionsInvalid(
              'FieldValueRequired',
              'fieldManager',
              'Required value: is required for apply patch',
            );
          }
          const body = objectBody(text, contentType);
          if (body.apiVersion === undefined || body.kind === undefined) {
            throw badRequest(`Object 'Kind' is missing in '${text.slice(0, 200)}'`);
          }
          const base: Json = current ?? {
            apiVersion: type.groupVersion,
            kind: type.kind,
            metadata: { name, namespace },
          };
          const applied = serverSideApply(
            type,
            base,
            current?.metadata.managedFields ?? [],
            body,
            manager,
            isTrue(force),
            subresource,
          );
          const bodyMeta = (isObject(body.metadata) ? body.metadata : {}) as Partial<ObjectMeta>;
          if (current === undefined) {
            if (subresource === 'status') throw notFound(type, name);
            const created = {
              ...applied.object,
              metadata: {
                ...(applied.object.metadata as Json),
                name,
                ...(bodyMeta.resourceVersion ? { resourceVersion: bodyMeta.resourceVersion } : {}),
              },
            };
            return json(response, 201, state.create(type, namespace, created, applied.managedFields));
          }
          const candidate = {
            ...applied.object,
            metadata: {
              ...(applied.object.metadata as Json),
              resourceVersion: bodyMeta.resourceVersion ?? current.metadata.resourceVersion,
            },
          };
          return json(
            response,
            200,
            state.update(type, current, candidate, { subresource, managedFields: applied.managedFields }),
          );
        }
        if (force !== null) {
          throw patchOptionsInvalid(
            'FieldValueForbidden',
            'force',
            'Forbidden: may not be specified for non-apply patch',
          );
        }
        let patched: unknown;
        if (
          contentType === 'application/merge-patch+json' ||
          (contentType === 'application/strategic-merge-patch+json' && !type.custom)
        ) {
          const patch = parseBody(text, contentType);
          if (!isObject(patch)) throw badRequest('a merge patch must be a JSON object');
          if (current === undefined) throw notFound(type, name);
          patched = mergePatch(current, patch);
        } else if (contentType === 'application/json-patch+json') {
          const patch = parseBody(text, contentType);
          if (current === undefined) throw notFound(type, name);
          patched = jsonPatch(current, patch);
        } else {
          throw unsupportedPatch();
        }
        if (!isObject(patched)) throw patchFailed('the patched object is not an object');
        return json(response, 200, state.update(type, current, patched, { subresource }));
      }
      case 'DELETE': {
        if (subresource !== '') throw notAllowed();
        const body = text.trim() === '' ? {} : objectBody(text, contentType);
        if (current === undefined) throw notFound(type, name);
        const orphan = (query.get('orphanDependents') ?? String(body.orphanDependents ?? '')) === 'true';
        const policy =
          query.get('propagationPolicy') ??
          (body.propagationPolicy as string | undefined) ??
          (orphan ? 'Orphan' : undefined);
        if (policy !== undefined && !['Background', 'Foreground', 'Orphan'].includes(policy)) {
          throw badRequest(`propagationPolicy: Unsupported value: "${policy}"`);
        }
        const result = state.delete(type, current, {
          propagationPolicy: policy,
          preconditions: isObject(body.preconditions)
            ? (body.preconditions as DeleteOptions['preconditions'])
            : undefined,
        });
        if (!result.deleted || type.custom) return json(response, 200, result.object);
        return json(response, 200, {
          kind: 'Status',
          apiVersion: 'v1',
          metadata: {},
          status: 'Success',
          details: { name, group: type.group, kind: type.plural, uid: result.object.metadata.uid },
        });
      }
      default:
        throw notAllowed();
    }
  }

  function listOf(type: ResourceType, selection: Selection, query: URLSearchParams): Json {
    let items = state.list(type, selection);
    const metadata: Json = { resourceVersion: String(state.resourceVersion) };
    const token = query.get('continue');
    if (token) {
      let after: string;
      try {
        after = (JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as { after: string }).after;
      } catch {
        throw badRequest('continue key is not valid');
      }
      items = items.filter((object) => objectKey(object.metadata.namespace, object.metadata.name) > after);
    }
    const limit = Number(query.get('limit') ?? 0);
    if (limit > 0 && items.length > limit) {
      const last = items[limit - 1] as KubeObject;
      metadata.continue = Buffer.from(
        JSON.stringify({ after: objectKey(last.metadata.namespace, last.metadata.name) }),
      ).toString('base64url');
      metadata.remainingItemCount = items.length - limit;
      items = items.slice(0, limit);
    }
    // Lists of built-in kinds leave out each item's apiVersion and kind; lists of custom resources keep them.
    const shown = type.custom ? items : items.map(({ apiVersion: _a, kind: _k, ...item }) => item);
    return { kind: `${type.kind}List`, apiVersion: type.groupVersion, metadata, items: shown };
  }

  async function handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const url = new URL(request.url ?? '/', 'http://localhost');
    const text = await readBody(request);
    if (faults.delayMs > 0) await new Promise((resolve) => setTimeout(resolve, faults.delayMs));
    const fails =
      failure !== undefined &&
      (failure.method === undefined || failure.method === request.method) &&
      (failure.pathIncludes === undefined || (url.pathname + url.search).includes(failure.pathIncludes));
    if (fails && failure !== undefined) {
      const { status } = failure;
      if (--failure.remaining === 0) failure = undefined;
      throw new StatusError(status, reasons[status] ?? 'InternalError', `Internal error occurred: injected failure`);
    }

    const path = url.pathname.split('/').filter(Boolean).map(decodeURIComponent);
    if (path.length === 1 && path[0] === 'version') {
      return json(response, 200, {
        major: '1',
        minor: '33',
        gitVersion: 'v1.33.0-switchboard-test',
        platform: 'linux/amd64',
      });
    }
    const isCore = path[0] === 'api';
    const prefix = isCore ? 2 : 3;
    if ((isCore || path[0] === 'apis') && path.length <= prefix) {
      const answer = request.method === 'GET' ? discovery(path) : undefined;
      if (answer === undefined) throw noSuchResource();
      return json(response, 200, answer);
    }
    if (!isCore && path[0] !== 'apis') throw noSuchResource();
    const group = isCore ? '' : (path[1] as string);
    const version = path[prefix - 1] as string;
    const rest = path.slice(prefix);
    let namespace: string | undefined;
    if (rest[0] === 'namespaces' && rest.length >= 3) {
      namespace = rest[1];
      rest.splice(0, 2);
    }
    const type = state.find(group, version, rest[0] as string);
    if (type === undefined) throw noSuchResource();
    serveResource(request, response, url, type, namespace, rest.slice(1), text);
  }

  const server = createServer((request, response) => {
    const recorded: RecordedRequest = {
      method: request.method ?? 'GET',
      path: request.url ?? '/',
      contentType: request.headers['content-type'],
      time: Date.now(),
    };
    requests.push(recorded);
    handle(request, response)
      .catch((error: unknown) => {
        const status =
          error instanceof StatusError
            ? error
            : new StatusError(500, 'InternalError', `Internal error occurred: ${String(error)}`);
        if (response.headersSent) response.destroy();
        else json(response, status.code, status.status);
      })
      .finally(() => {
        if (response.headersSent) recorded.status = response.statusCode;
      });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  return {
    url,
    requests,
    faults,
    kubeConfig(namespace = 'default') {
      const config = new KubeConfig();
      config.loadFromOptions({
        clusters: [{ name: 'test', server: url, skipTLSVerify: true }],
        users: [{ name: 'test', token: 'test-token' }],
        contexts: [{ name: 'test', cluster: 'test', user: 'test', namespace }],
        currentContext: 'test',
      });
      return config;
    },
    object<T>(apiPath: string) {
      const found = locate(apiPath);
      return (found.object === undefined ? undefined : clone(found.object)) as T | undefined;
    },
    objects<T>(plural: string, namespace?: string) {
      const type = state.byPlural(plural);
      if (type === undefined) throw new Error(`no kind ${plural} is served`);
      return clone(state.list(type, { namespace, labels: [], fields: [] })) as T[];
    },
    setStatus<T>(apiPath: string, status: Json) {
      const { type, object } = locate(apiPath);
      if (type === undefined || object === undefined) throw new Error(`no object at ${apiPath}`);
      const written = state.update(
        type,
        object,
        { ...object, status: clone(status) },
        {
          subresource: type.statusSubresource ? 'status' : '',
          faults: false,
        },
      );
      return clone(written) as T;
    },
    resourceVersion: () => String(state.resourceVersion),
    openWatches: () => state.watches.size,
    async close() {
      for (const watch of [...state.watches]) {
        closeWatch(watch);
        watch.response.end();
      }
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}
