/**
 * Kubernetes Secrets as the operator reads them: a webhook endpoint's `secretRef` and a carrier's
 * `credentialsSecretRef` name a Secret in the resource's own namespace (the operator's Role lets it read Secrets
 * there, nowhere else). A Secret or key that is missing reads as undefined; the reconciler says so in the status.
 */
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { statusOf } from '../core/resources/kubernetes-store.ts';
import type { SecretSource } from './webhook-endpoints.ts';
import { assertNotHoldingConnection } from '../core/held-connections.ts';

export class KubernetesSecrets implements SecretSource {
  private readonly api: CoreV1Api;

  constructor(config: KubeConfig) {
    this.api = config.makeApiClient(CoreV1Api);
  }

  async read(namespace: string, name: string, key: string): Promise<string | undefined> {
    assertNotHoldingConnection(`a read of Secret ${name}`);
    try {
      const secret = await this.api.readNamespacedSecret({ name, namespace });
      const encoded = secret.data?.[key];
      if (encoded !== undefined) return Buffer.from(encoded, 'base64').toString('utf8');
      return secret.stringData?.[key];
    } catch (error) {
      if (statusOf(error) === 404) return undefined;
      throw error;
    }
  }
}
