/**
 * What the operator's tests ask of custom resources, whichever store holds them (test/operator/operator.test.ts on
 * PostgreSQL, test/operator/kubernetes-operator.test.ts on the Kubernetes API test server): waiting for a status, reading a
 * condition of the current generation, a REST view two workspaces share, and the documents of examples/.
 */
import { randomUUID } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import { createMember } from '../../core/identity/members.ts';
import type { Resource, ResourceKind, ResourceStore } from '../../core/resources/store.ts';
import type { TestService, workspaceWithUser } from './service.ts';

export type Setup = Awaited<ReturnType<typeof workspaceWithUser>>;

/** Polls the resource until `check` holds; the error shows the status last seen. */
export async function untilResource(
  store: ResourceStore,
  namespace: string,
  kind: ResourceKind,
  name: string,
  check: (resource: Resource) => boolean,
  what: string,
): Promise<Resource> {
  let last: Resource | undefined;
  for (const deadline = Date.now() + 20_000; Date.now() < deadline;) {
    last = await store.get(kind, namespace, name);
    if (last !== undefined && check(last)) return last;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`${kind} ${name}: ${what}; last seen ${JSON.stringify(last?.status)}`);
}

/** A condition of the resource's current generation. */
export const condition = (resource: Resource, type: string) =>
  (
    resource.status.conditions as Array<{ type: string; status: string; reason: string; observedGeneration: number }>
  )?.find((entry) => entry.type === type && entry.observedGeneration === resource.metadata.generation);

export const reconciled = (resource: Resource) => resource.status.observedGeneration === resource.metadata.generation;

/** A member of the workspace, to put in queues. */
export async function newMember(service: TestService, setup: Setup): Promise<string> {
  const row = await createMember(service.pool, {
    workspaceId: setup.workspace.id,
    email: `agent-${randomUUID()}@example.com`,
    scopes: [],
  });
  return row.id;
}

/** The REST view without what differs between two workspaces by nature (ids, times). */
export function comparable(body: Record<string, unknown>) {
  const { id: _id, workspaceId: _ws, createdAt: _c, updatedAt: _u, publishedAt: _p, members: _m, ...rest } = body;
  return rest;
}

export interface ExampleDocument {
  apiVersion: string;
  kind: string;
  metadata: { name: string; labels?: Record<string, string> };
  spec?: Record<string, unknown>;
}

/** Every document of examples/, in file order. */
export async function exampleDocuments(): Promise<ExampleDocument[]> {
  const folder = fileURLToPath(new URL('../../examples/', import.meta.url));
  const files = (await readdir(folder)).filter((name) => name.endsWith('.yaml')).sort();
  const documents = await Promise.all(
    files.map(async (name) =>
      parseAllDocuments(await readFile(path.join(folder, name), 'utf8')).map((doc) => doc.toJS() as ExampleDocument),
    ),
  );
  return documents.flat();
}
