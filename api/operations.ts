/**
 * The 81 operations of `/api/v1` (spec/operations.md): method, path, the credentials each accepts, the scope it
 * needs, and where its workspace comes from. Routes attach handlers by operation id; the server registers every
 * operation, answering 501 `not_implemented` (after authentication) for those without a handler yet.
 */
import type { Scope } from '../core/scopes.ts';

/** K application key (or legacy secret), U user token, M member token, W workspace key, S member login. */
export type Credential = 'K' | 'U' | 'M' | 'W' | 'S';

/**
 * Where the workspace of a request comes from:
 * - `header`: `x-service-workspace-id` (or, with a key, `x-service-external-workspace-id`); a token's own by default;
 * - `optional`: the same headers narrow the operation when given;
 * - `path`: the `{id}` of the path is the workspace;
 * - `none`: the operation is about the application, not a workspace.
 */
export type WorkspaceSource = 'header' | 'optional' | 'path' | 'none';

export interface Operation {
  number: number;
  id: string;
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  path: string;
  credentials: readonly Credential[];
  scope: Scope | null;
  workspace: WorkspaceSource;
  summary: string;
}

type Row = [number, string, Operation['method'], string, string, Scope | null, WorkspaceSource, string];

const rows: Row[] = [
  [1, 'createSession', 'POST', '/sessions', 'K', null, 'none', 'Mint an end-user token for an application user'],
  [
    2,
    'createMemberSession',
    'POST',
    '/member-sessions',
    'S',
    null,
    'header',
    'A signed-in member mints a member token',
  ],
  [3, 'createApplicationKey', 'POST', '/application/keys', 'K', null, 'none', 'Issue a new application key'],
  [4, 'listApplicationKeys', 'GET', '/application/keys', 'K', null, 'none', "List the application's keys"],
  [5, 'revokeApplicationKey', 'DELETE', '/application/keys/:id', 'K', null, 'none', 'Revoke a key, now or later'],
  [6, 'createWorkspace', 'POST', '/workspaces', 'K', null, 'none', 'Create a workspace'],
  [7, 'listWorkspaces', 'GET', '/workspaces', 'K', null, 'none', "List the application's workspaces"],
  [8, 'getWorkspace', 'GET', '/workspaces/:id', 'K', null, 'path', 'One workspace'],
  [9, 'updateWorkspace', 'PATCH', '/workspaces/:id', 'K', null, 'path', 'Rename, timezone, destination policy, limits'],
  [10, 'createWorkspaceKey', 'POST', '/workspaces/:id/keys', 'K', null, 'path', 'Issue a workspace key'],
  [11, 'createUser', 'POST', '/users', 'K', null, 'header', 'Create an application user'],
  [12, 'listUsers', 'GET', '/users', 'K', null, 'header', 'List application users'],
  [13, 'getUser', 'GET', '/users/:id', 'K', null, 'header', 'One application user'],
  [14, 'deleteUser', 'DELETE', '/users/:id', 'K', null, 'header', 'Remove an application user'],
  [15, 'listMembers', 'GET', '/members', 'KM', null, 'header', "List the workspace's members"],
  [16, 'getMember', 'GET', '/members/:id', 'KM', null, 'header', 'One member'],
  [17, 'createVerification', 'POST', '/verifications', 'W', 'verify:send', 'header', 'Send a one-time code'],
  [18, 'checkVerification', 'POST', '/verifications/:id/check', 'W', 'verify:send', 'header', 'Check a code'],
  [19, 'searchAvailableNumbers', 'GET', '/numbers/available', 'KM', 'numbers:*', 'optional', 'Search the inventory'],
  [20, 'claimNumber', 'POST', '/numbers', 'K', 'numbers:*', 'header', 'Claim a number into the workspace'],
  [21, 'listNumbers', 'GET', '/numbers', 'KUM', 'numbers:*', 'header', "List the workspace's numbers"],
  [22, 'getNumber', 'GET', '/numbers/:id', 'KUM', 'numbers:*', 'header', 'One number'],
  [23, 'updateNumber', 'PATCH', '/numbers/:id', 'K', 'numbers:*', 'header', 'Change a number'],
  [24, 'releaseNumber', 'DELETE', '/numbers/:id', 'K', 'numbers:*', 'header', 'Release a number to the inventory'],
  [25, 'validateRoutingPlan', 'POST', '/routing-plans/validate', 'KM', 'routing:*', 'header', 'Validate a definition'],
  [26, 'createRoutingPlan', 'POST', '/routing-plans', 'KM', 'routing:*', 'header', 'Create a routing plan'],
  [27, 'listRoutingPlans', 'GET', '/routing-plans', 'KM', 'routing:*', 'header', 'List routing plans'],
  [28, 'getRoutingPlan', 'GET', '/routing-plans/:id', 'KM', 'routing:*', 'header', 'One routing plan'],
  [29, 'updateRoutingPlan', 'PATCH', '/routing-plans/:id', 'KM', 'routing:*', 'header', 'Rename or save a version'],
  [30, 'publishRoutingPlan', 'POST', '/routing-plans/:id/publish', 'KM', 'routing:*', 'header', 'Publish a version'],
  [31, 'assignRoutingPlan', 'POST', '/routing-plans/:id/assign', 'KM', 'routing:*', 'header', 'Assign to a number'],
  [32, 'listRoutingPlanVersions', 'GET', '/routing-plans/:id/versions', 'KM', 'routing:*', 'header', 'Plan versions'],
  [33, 'archiveRoutingPlan', 'DELETE', '/routing-plans/:id', 'KM', 'routing:*', 'header', 'Archive a routing plan'],
  [34, 'createQueue', 'POST', '/queues', 'KM', 'routing:*', 'header', 'Create a queue'],
  [35, 'listQueues', 'GET', '/queues', 'KM', 'routing:*', 'header', 'List queues'],
  [36, 'getQueue', 'GET', '/queues/:id', 'KM', 'routing:*', 'header', 'One queue'],
  [37, 'updateQueue', 'PATCH', '/queues/:id', 'KM', 'routing:*', 'header', 'Change a queue'],
  [38, 'deleteQueue', 'DELETE', '/queues/:id', 'KM', 'routing:*', 'header', 'Delete a queue'],
  [39, 'createSchedule', 'POST', '/schedules', 'KM', 'routing:*', 'header', 'Create a schedule'],
  [40, 'listSchedules', 'GET', '/schedules', 'KM', 'routing:*', 'header', 'List schedules'],
  [41, 'getSchedule', 'GET', '/schedules/:id', 'KM', 'routing:*', 'header', 'One schedule, open now or not'],
  [42, 'updateSchedule', 'PATCH', '/schedules/:id', 'KM', 'routing:*', 'header', 'Change a schedule'],
  [43, 'deleteSchedule', 'DELETE', '/schedules/:id', 'KM', 'routing:*', 'header', 'Delete a schedule'],
  [44, 'createAiAgent', 'POST', '/ai-agents', 'KM', 'routing:*', 'header', 'Create an AI agent'],
  [45, 'listAiAgents', 'GET', '/ai-agents', 'KM', 'routing:*', 'header', 'List AI agents'],
  [46, 'getAiAgent', 'GET', '/ai-agents/:id', 'KM', 'routing:*', 'header', 'One AI agent'],
  [47, 'updateAiAgent', 'PATCH', '/ai-agents/:id', 'KM', 'routing:*', 'header', 'Change an AI agent'],
  [48, 'deleteAiAgent', 'DELETE', '/ai-agents/:id', 'KM', 'routing:*', 'header', 'Delete an AI agent'],
  [49, 'placeCall', 'POST', '/calls', 'KUM', 'calls:*', 'header', 'Place an outbound call'],
  [50, 'listCalls', 'GET', '/calls', 'KUM', 'calls:*', 'header', 'List calls'],
  [51, 'getCall', 'GET', '/calls/:id', 'KUM', 'calls:*', 'header', 'One call with its legs'],
  [52, 'hangupCall', 'POST', '/calls/:id/hangup', 'KUM', 'calls:*', 'header', 'End a call'],
  [53, 'transferCall', 'POST', '/calls/:id/transfer', 'KUM', 'calls:*', 'header', 'Transfer a call'],
  [54, 'holdCall', 'POST', '/calls/:id/hold', 'KUM', 'calls:*', 'header', 'Hold or resume a call'],
  [55, 'controlRecording', 'POST', '/calls/:id/recording', 'KUM', 'calls:*', 'header', 'Start, stop, pause, resume'],
  [56, 'superviseCall', 'POST', '/calls/:id/supervise', 'KM', 'calls:supervise', 'header', 'Listen, whisper, barge'],
  [57, 'listAgents', 'GET', '/agents', 'KM', 'calls:*', 'header', 'Agents with their state'],
  [58, 'setAgentState', 'PUT', '/agents/:memberId/state', 'KM', 'calls:*', 'header', "Set an agent's state"],
  [59, 'registerDevice', 'POST', '/devices', 'UM', 'devices:*', 'header', "Register the user's device"],
  [60, 'listDevices', 'GET', '/devices', 'KUM', 'devices:*', 'header', 'List devices'],
  [61, 'unregisterDevice', 'DELETE', '/devices/:id', 'KUM', 'devices:*', 'header', 'Unregister a device'],
  [62, 'renewPresence', 'POST', '/devices/:id/presence', 'UM', 'devices:*', 'header', 'Renew the presence lease'],
  [63, 'pollOffers', 'GET', '/devices/:id/offers', 'UM', 'devices:*', 'header', 'Poll incoming call offers'],
  [64, 'acceptOffer', 'POST', '/offers/:id/accept', 'UM', 'devices:*', 'header', 'Answer an offer'],
  [65, 'declineOffer', 'POST', '/offers/:id/decline', 'UM', 'devices:*', 'header', 'Decline an offer'],
  [66, 'issueSipCredentials', 'POST', '/devices/:id/sip-credentials', 'UM', 'devices:*', 'header', 'SIP credentials'],
  [67, 'sendMessage', 'POST', '/messages', 'KUM', 'messages:*', 'header', 'Send SMS or MMS'],
  [68, 'listMessages', 'GET', '/messages', 'KUM', 'messages:*', 'header', 'List messages'],
  [69, 'getMessage', 'GET', '/messages/:id', 'KUM', 'messages:*', 'header', 'One message with its status history'],
  [70, 'listRecordings', 'GET', '/recordings', 'KUM', 'media:read', 'header', 'List recordings and voicemails'],
  [71, 'getRecording', 'GET', '/recordings/:id', 'KUM', 'media:read', 'header', 'One recording with a signed link'],
  [72, 'getTranscript', 'GET', '/transcripts/:id', 'KUM', 'media:read', 'header', 'One transcript'],
  [73, 'createWebhook', 'POST', '/webhooks', 'K', 'webhooks:*', 'none', 'Create a webhook endpoint'],
  [74, 'listWebhooks', 'GET', '/webhooks', 'K', 'webhooks:*', 'none', 'List webhook endpoints'],
  [75, 'getWebhook', 'GET', '/webhooks/:id', 'K', 'webhooks:*', 'none', 'One endpoint with its delivery state'],
  [76, 'updateWebhook', 'PATCH', '/webhooks/:id', 'K', 'webhooks:*', 'none', 'Change an endpoint'],
  [77, 'deleteWebhook', 'DELETE', '/webhooks/:id', 'K', 'webhooks:*', 'none', 'Delete an endpoint'],
  [78, 'replayWebhook', 'POST', '/webhooks/:id/replay', 'K', 'webhooks:*', 'none', 'Redeliver events'],
  [79, 'rotateWebhookSecret', 'POST', '/webhooks/:id/rotate-secret', 'K', 'webhooks:*', 'none', 'Rotate the secret'],
  [80, 'listEvents', 'GET', '/events', 'K', 'webhooks:*', 'optional', 'Page the event log'],
  [81, 'getRealtimeMetrics', 'GET', '/metrics/realtime', 'KM', 'metrics:read', 'header', 'Live figures'],
];

export const apiPrefix = '/api/v1';

export const operations: readonly Operation[] = rows.map(
  ([number, id, method, path, credentials, scope, workspace, summary]) => ({
    number,
    id,
    method,
    path: apiPrefix + path,
    credentials: [...credentials] as Credential[],
    scope,
    workspace,
    summary,
  }),
);

export const operationById: ReadonlyMap<string, Operation> = new Map(operations.map((op) => [op.id, op]));

export function isMutation(method: string): boolean {
  return method === 'POST' || method === 'PUT' || method === 'PATCH' || method === 'DELETE';
}
