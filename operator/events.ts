/**
 * What the operator tells cluster admins as Kubernetes Events (`kubectl describe`, `kubectl get events`): every
 * change of a condition's status or reason on a resource, seen by its controller's watch, whoever wrote it. A
 * `Ready=False` or `Valid=False` is a Warning; anything else is Normal. The same event repeated on one object is one
 * Event whose `count` grows, as kubelet and client-go's recorder do. Without a cluster the events go to the log.
 */
import { type Clock, systemClock } from '../core/clock.ts';
import { CoreV1Api, type KubeConfig, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import type { Resource } from '../core/resources/store.ts';
import { statusOf } from '../core/resources/kubernetes-store.ts';
import type { Log } from '../core/log.ts';
import { assertNotHoldingConnection } from '../core/held-connections.ts';

export interface OperatorEvent {
  type: 'Normal' | 'Warning';
  reason: string;
  message: string;
}

export interface EventRecorder {
  record(resource: Resource, event: OperatorEvent): Promise<void>;
}

interface ConditionSeen {
  type: string;
  status: string;
  reason: string;
  message: string;
}

const conditionsOf = (resource: Resource | undefined): ConditionSeen[] =>
  Array.isArray(resource?.status.conditions) ? (resource.status.conditions as ConditionSeen[]) : [];

/** The events a status change makes: one per condition whose status or reason changed (or appeared). */
export function conditionEvents(before: Resource | undefined, after: Resource): OperatorEvent[] {
  const previous = new Map(conditionsOf(before).map((condition) => [condition.type, condition]));
  const events: OperatorEvent[] = [];
  for (const condition of conditionsOf(after)) {
    const old = previous.get(condition.type);
    if (old !== undefined && old.status === condition.status && old.reason === condition.reason) continue;
    events.push({
      type: condition.status === 'False' ? 'Warning' : 'Normal',
      reason: condition.reason,
      message: `${condition.type}=${condition.status}: ${condition.message}`.slice(0, 1024),
    });
  }
  return events;
}

/** Events in the log (standalone: there is no Events API). */
export class LoggedEvents implements EventRecorder {
  constructor(private readonly log: Pick<Log, 'info' | 'warn'>) {}

  async record(resource: Resource, event: OperatorEvent): Promise<void> {
    const where = { kind: resource.kind, name: resource.metadata.name, reason: event.reason };
    if (event.type === 'Warning') this.log.warn(where, event.message);
    else this.log.info(where, event.message);
  }
}

/** core/v1 Events in the resource's namespace, a repeat counted on the Event already written. */
export class KubernetesEvents implements EventRecorder {
  private readonly api: CoreV1Api;
  /** The Event written for (object uid, type, reason, message), and its count. Bounded: oldest forgotten first. */
  private readonly written = new Map<string, { name: string; count: number }>();

  constructor(
    config: KubeConfig,
    private readonly component = 'switchboard-operator',
    private readonly clock: Clock = systemClock,
  ) {
    this.api = config.makeApiClient(CoreV1Api);
  }

  async record(resource: Resource, event: OperatorEvent): Promise<void> {
    const { namespace } = resource.metadata;
    assertNotHoldingConnection(`an Event on ${resource.kind} ${resource.metadata.name}`);
    const key = [resource.metadata.uid, event.type, event.reason, event.message].join('\u0000');
    const now = this.clock.now();
    const seen = this.written.get(key);
    if (seen !== undefined) {
      try {
        await this.api.patchNamespacedEvent(
          { name: seen.name, namespace, body: { count: seen.count + 1, lastTimestamp: now } },
          setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
        );
        seen.count += 1;
        return;
      } catch (error) {
        if (statusOf(error) !== 404) throw error;
        this.written.delete(key); // the Event expired (events live an hour): write a new one
      }
    }
    const written = await this.api.createNamespacedEvent({
      namespace,
      body: {
        metadata: { generateName: `${resource.metadata.name}.`, namespace },
        involvedObject: {
          apiVersion: resource.apiVersion,
          kind: resource.kind,
          name: resource.metadata.name,
          namespace,
          uid: resource.metadata.uid,
          resourceVersion: resource.metadata.resourceVersion,
        },
        type: event.type,
        reason: event.reason,
        message: event.message,
        source: { component: this.component },
        reportingComponent: this.component,
        firstTimestamp: now,
        lastTimestamp: now,
        count: 1,
      },
    });
    if (this.written.size >= 1000) this.written.delete(this.written.keys().next().value as string);
    this.written.set(key, { name: written.metadata?.name ?? '', count: 1 });
  }
}
