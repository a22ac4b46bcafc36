/**
 * Whether this process runs against a Kubernetes cluster, and which (RESOURCE_STORE; docs/kubernetes.md): inside a
 * pod (`auto` or `kubernetes`) the pod's service account; otherwise, with `kubernetes`, the current context of
 * `KUBECONFIG` (or `~/.kube/config`). Without a cluster the custom resources live in PostgreSQL.
 */
import { existsSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { type Config, ConfigError } from '../config.ts';

const serviceAccountNamespaceFile = '/var/run/secrets/kubernetes.io/serviceaccount/namespace';

export interface Cluster {
  config: KubeConfig;
  /** The namespace of the operator's Lease. */
  leaseNamespace: string;
}

export function clusterOf(config: Config, env: Record<string, string | undefined> = process.env): Cluster | undefined {
  const inPod = (env.KUBERNETES_SERVICE_HOST ?? '') !== '';
  const mode = config.kubernetes.store;
  if (mode === 'postgres' || (mode === 'auto' && !inPod)) return undefined;
  const kubeConfig = new KubeConfig();
  if (inPod) {
    kubeConfig.loadFromCluster();
  } else {
    // KUBECONFIG's first file (kubectl merges a list; the first names the current context), else ~/.kube/config.
    const file = config.kubernetes.kubeconfig ?? path.join(os.homedir(), '.kube', 'config');
    if (!existsSync(file)) {
      throw new ConfigError(
        `RESOURCE_STORE is kubernetes, but this is not a pod and there is no kubeconfig at ${file} (set KUBECONFIG)`,
      );
    }
    kubeConfig.loadFromFile(file);
  }
  if (kubeConfig.getCurrentCluster() === null) {
    throw new ConfigError('RESOURCE_STORE is kubernetes, but the kubeconfig names no current cluster');
  }
  let podNamespace: string | undefined;
  if (inPod) {
    try {
      podNamespace = readFileSync(serviceAccountNamespaceFile, 'utf8').trim();
    } catch {
      podNamespace = undefined;
    }
  }
  return {
    config: kubeConfig,
    leaseNamespace: config.kubernetes.leaseNamespace ?? podNamespace ?? config.resourceNamespace,
  };
}
