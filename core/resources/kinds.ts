/**
 * The custom resources' specs and statuses (docs/kubernetes.md), as TypeBox schemas: the same field schemas the API
 * validates its bodies with, so a resource applied with kubectl or a GitOps tool takes exactly what the API takes.
 * `npm run crds` turns them into the CustomResourceDefinitions in `crds/` (core/resources/crds.ts).
 *
 * Workspace-scoped kinds name their application and workspace; `id` may be given in the spec, so a whole workspace
 * can be written as YAML whose references resolve from the YAML alone (a plan's `queueId` is a queue's `id`).
 */
import { type Static, Type } from 'typebox';
import { eventTypes } from '../events/types.ts';
import { AudioPrompt, RoutingPlanDefinition } from '../routing/definition.ts';
import { maxWebhookUrlLength } from '../webhooks/url.ts';

const Uuid = (description: string) => Type.String({ format: 'uuid', description });
const ApplicationId = Type.String({
  minLength: 1,
  maxLength: 100,
  description: 'The application the resource belongs to',
});
const WorkspaceId = Uuid('The workspace the resource belongs to');
const ResourceId = Uuid('The record id (a UUID); the API sets it, a GitOps author may choose it');

// Queues (operations 34-38).
export const queueStrategies = ['longest_idle', 'round_robin', 'ring_all', 'fewest_calls'] as const;
export const QueueStrategy = Type.Enum([...queueStrategies], {
  description:
    'Which agent is offered the next caller: the one idle longest, in turn, all at once, or the one with fewest calls',
});
export const QueueName = Type.String({ minLength: 1, maxLength: 200, description: 'The queue’s name' });
export const WrapUpSecs = Type.Integer({
  minimum: 0,
  maximum: 3600,
  description: 'Time after a call before the next offer',
});
export const QueueMembers = Type.Array(Type.String({ format: 'uuid' }), {
  maxItems: 500,
  uniqueItems: true,
  description: 'Member ids of the workspace',
});
export const QueueHoldPrompt = Type.Union(AudioPrompt.anyOf, {
  description: 'Played looped to waiting callers instead of the default hold music: text to speech or an audio file',
});
export const AnnouncePosition = Type.Boolean({
  description: 'Whether waiting callers hear their position in line at every announcement (default false)',
});
export const AnnounceExpectedWait = Type.Boolean({
  description: 'Whether waiting callers hear their expected wait at every announcement (default false)',
});
export const AnnounceIntervalSecs = Type.Integer({
  minimum: 15,
  maximum: 600,
  description: 'Seconds between announcements to a waiting caller, 15 to 600 (default 60)',
});

// Webhook endpoints (operations 73-79).
export const WebhookUrl = Type.String({
  minLength: 1,
  maxLength: maxWebhookUrlLength,
  description: 'An https URL on a public host, without user name, password or fragment',
});
export const WebhookEventTypes = Type.Union(
  [
    Type.Array(Type.Enum([...eventTypes]), { minItems: 1, maxItems: eventTypes.length, uniqueItems: true }),
    Type.Null(),
  ],
  { description: 'The event types the endpoint takes; null (or left out on create) takes every type' },
);
export const WebhookDescription = Type.Union([Type.String({ maxLength: 500 }), Type.Null()], {
  description: 'What the endpoint is for',
});

export const RoutingPlanSpec = Type.Object(
  {
    id: Type.Optional(ResourceId),
    applicationId: ApplicationId,
    workspaceId: WorkspaceId,
    name: Type.String({ minLength: 1, maxLength: 200, description: 'The plan’s name' }),
    definition: RoutingPlanDefinition,
    publishedVersion: Type.Optional(
      Type.Union([Type.Integer({ minimum: 1 }), Type.Null()], {
        description: 'The version calls run; null: none published (what the API writes)',
      }),
    ),
    publish: Type.Optional(
      Type.Boolean({
        description: 'true: each valid definition written here is published as it becomes a version (for GitOps)',
      }),
    ),
  },
  { additionalProperties: false },
);
export type RoutingPlanSpec = Static<typeof RoutingPlanSpec>;

export const QueueSpec = Type.Object(
  {
    id: Type.Optional(ResourceId),
    applicationId: ApplicationId,
    workspaceId: WorkspaceId,
    name: QueueName,
    strategy: QueueStrategy,
    wrapUpSecs: WrapUpSecs,
    members: QueueMembers,
    holdPrompt: Type.Optional(QueueHoldPrompt),
    announcePosition: Type.Optional(AnnouncePosition),
    announceExpectedWait: Type.Optional(AnnounceExpectedWait),
    announceIntervalSecs: Type.Optional(AnnounceIntervalSecs),
  },
  { additionalProperties: false },
);
export type QueueSpec = Static<typeof QueueSpec>;

export const SecretKeyRef = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 253, description: 'A Secret in the resource’s namespace' }),
    key: Type.String({ minLength: 1, maxLength: 253, description: 'The key of the Secret holding the value' }),
  },
  { additionalProperties: false },
);

export const WebhookEndpointSpec = Type.Object(
  {
    id: Type.Optional(ResourceId),
    applicationId: ApplicationId,
    url: WebhookUrl,
    eventTypes: Type.Optional(WebhookEventTypes),
    enabled: Type.Optional(Type.Boolean({ description: 'false: nothing is delivered (default true)' })),
    description: Type.Optional(WebhookDescription),
    secretRef: Type.Optional(
      Type.Object(
        {
          name: SecretKeyRef.properties.name,
          key: SecretKeyRef.properties.key,
        },
        {
          additionalProperties: false,
          description: 'The signing secret (whsec_…), kept in a Kubernetes Secret, never in the spec',
        },
      ),
    ),
  },
  { additionalProperties: false },
);
export type WebhookEndpointSpec = Static<typeof WebhookEndpointSpec>;

const Quantity = Type.String({
  pattern: '^[0-9]+(\\.[0-9]+)?(m|k|M|G|T|Ki|Mi|Gi|Ti)?$',
  description: 'A Kubernetes quantity, such as 500m or 1Gi',
});
const ResourceList = Type.Object(
  { cpu: Type.Optional(Quantity), memory: Type.Optional(Quantity) },
  { additionalProperties: false },
);

export const EnginePoolCarrier = Type.Object(
  {
    name: Type.String({ pattern: '^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$', description: 'The carrier’s name' }),
    address: Type.String({ minLength: 1, maxLength: 253, description: 'A host, an IP address or a CIDR range' }),
    port: Type.Optional(Type.Integer({ minimum: 1, maximum: 65535, description: 'Default 5060' })),
    transport: Type.Optional(Type.Enum(['udp', 'tcp'], { description: 'Default udp' })),
    mediaNetworks: Type.Optional(
      Type.Array(Type.String({ minLength: 1, maxLength: 64 }), {
        maxItems: 32,
        description: 'CIDR ranges or addresses of its media servers, when they are not at its address',
      }),
    ),
    credentialsSecretRef: Type.Optional(
      Type.Object(
        { name: Type.String({ minLength: 1, maxLength: 253, description: 'A Secret with username and password' }) },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false },
);

export const EnginePoolSpec = Type.Object(
  {
    replicas: Type.Integer({ minimum: 0, maximum: 100, description: 'Engine pods' }),
    image: Type.String({ minLength: 1, maxLength: 500, description: 'The switchboard container image' }),
    sipPort: Type.Optional(Type.Integer({ minimum: 1, maximum: 65535, description: 'SIP over UDP and TCP (5060)' })),
    rtpPortMin: Type.Optional(Type.Integer({ minimum: 1024, maximum: 65535, description: 'Default 20000' })),
    rtpPortMax: Type.Optional(Type.Integer({ minimum: 1024, maximum: 65535, description: 'Default 20999' })),
    hostNetwork: Type.Optional(
      Type.Boolean({ description: 'Pods on the node’s network (SIP and RTP reach them directly); default true' }),
    ),
    resources: Type.Optional(
      Type.Object(
        { requests: Type.Optional(ResourceList), limits: Type.Optional(ResourceList) },
        { additionalProperties: false },
      ),
    ),
    carriers: Type.Optional(
      Type.Array(EnginePoolCarrier, { maxItems: 100, description: 'The SIP peers of this pool' }),
    ),
  },
  { additionalProperties: false },
);
export type EnginePoolSpec = Static<typeof EnginePoolSpec>;

/** A status condition (Kubernetes' metav1.Condition). */
export const Condition = Type.Object(
  {
    type: Type.String({ minLength: 1, maxLength: 316 }),
    status: Type.Enum(['True', 'False', 'Unknown']),
    reason: Type.String({ minLength: 1, maxLength: 1024 }),
    message: Type.String({ maxLength: 32768 }),
    observedGeneration: Type.Integer({ minimum: 0 }),
    lastTransitionTime: Type.String({ format: 'date-time' }),
  },
  { additionalProperties: false },
);

const Conditions = Type.Array(Condition, { maxItems: 16 });
const ObservedGeneration = Type.Integer({ minimum: 0, description: 'The generation this status describes' });

export const PlanIssue = Type.Object(
  {
    severity: Type.Enum(['error', 'warning']),
    code: Type.String(),
    stepId: Type.Union([Type.String(), Type.Null()]),
    message: Type.String(),
  },
  { additionalProperties: false },
);

export const RoutingPlanStatus = Type.Object(
  {
    observedGeneration: Type.Optional(ObservedGeneration),
    newestVersion: Type.Optional(Type.Union([Type.Integer({ minimum: 1 }), Type.Null()])),
    publishedVersion: Type.Optional(Type.Union([Type.Integer({ minimum: 1 }), Type.Null()])),
    issues: Type.Optional(Type.Array(PlanIssue, { maxItems: 500 })),
    conditions: Type.Optional(Conditions),
  },
  { additionalProperties: false },
);

export const ReconciledStatus = Type.Object(
  { observedGeneration: Type.Optional(ObservedGeneration), conditions: Type.Optional(Conditions) },
  { additionalProperties: false },
);

export const EnginePoolStatus = Type.Object(
  {
    observedGeneration: Type.Optional(ObservedGeneration),
    readyReplicas: Type.Optional(Type.Integer({ minimum: 0 })),
    conditions: Type.Optional(Conditions),
  },
  { additionalProperties: false },
);
