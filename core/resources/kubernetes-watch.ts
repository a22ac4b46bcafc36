/**
 * One Kubernetes watch as the operator needs it, on `@kubernetes/client-node` 1.4's `Watch`: from a list's
 * resourceVersion, with bookmarks (they move the position on while nothing changes). Changes are delivered one at a
 * time, in order. A stream the server ends cleanly (its timeout) is opened again from the last resourceVersion seen.
 * A 410 (client-node hands it over as an `ERROR` event, then a clean close), any other `ERROR` event or a broken
 * connection ends the watch: `onError` hears it once the changes already received are delivered, and the caller
 * lists again.
 */
import { type KubeConfig, type KubernetesObject, Watch as ClientWatch } from '@kubernetes/client-node';
import type { Watch, WatchEventType } from './store.ts';
import { assertNotHoldingConnection } from '../held-connections.ts';

/** A watch that cannot continue from its resourceVersion (the API server's 410 Gone): list again. */
export class WatchExpired extends Error {
  constructor(message: string) {
    super(`the watch expired (${message}); list again`);
    this.name = 'WatchExpired';
  }
}

export interface WatchTarget {
  /** The collection's path, such as `/apis/apps/v1/namespaces/<namespace>/deployments`. */
  path: string;
  resourceVersion: string;
  labelSelector?: string;
}

export async function watchKubernetes(
  config: KubeConfig,
  target: WatchTarget,
  onChange: (type: WatchEventType, object: KubernetesObject) => void | Promise<void>,
  onError: (error: unknown) => void,
): Promise<Watch> {
  assertNotHoldingConnection('a watch of the Kubernetes API');
  const watcher = new ClientWatch(config);
  let position = target.resourceVersion;
  let stopped = false;
  let failed = false;
  let delivering: Promise<void> = Promise.resolve();
  let connection: AbortController | undefined;

  const fail = (error: unknown) => {
    if (stopped || failed) return;
    failed = true;
    connection?.abort();
    void delivering.then(() => {
      if (!stopped) onError(error);
    });
  };
  const open = async () => {
    connection = await watcher.watch(
      target.path,
      {
        resourceVersion: position,
        allowWatchBookmarks: true,
        ...(target.labelSelector === undefined ? {} : { labelSelector: target.labelSelector }),
      },
      (type: string, object: KubernetesObject & { code?: number; message?: string }) => {
        if (stopped || failed) return;
        if (type === 'ERROR') {
          const code = object?.code;
          fail(
            code === 410
              ? new WatchExpired(object.message ?? 'Gone')
              : new Error(`watch error ${code ?? ''}: ${object?.message ?? 'unknown'}`),
          );
          return;
        }
        const version = object?.metadata?.resourceVersion;
        if (version !== undefined) position = version;
        if (type !== 'ADDED' && type !== 'MODIFIED' && type !== 'DELETED') return; // a BOOKMARK, or unknown
        delivering = delivering.then(() => (stopped ? undefined : onChange(type, object))).catch(fail);
      },
      (error: unknown) => {
        if (stopped || failed) return;
        if (error !== null && error !== undefined) fail(error);
        else open().catch(fail); // the server's timeout: go on from where this stream got to
      },
    );
  };
  await open();
  return {
    async stop() {
      stopped = true;
      connection?.abort();
      await delivering.catch(() => {});
    },
  };
}
