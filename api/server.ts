/**
 * The API role: the operations of `/api/v1` on top of the HTTP shell. Every operation of the registry is routed;
 * authentication and authorization run first (onRequest), then the idempotency-key check for mutations; operations
 * without a handler yet answer 501 `not_implemented` after that.
 */
import type { FastifyInstance } from 'fastify';
import { ChangeListener, credentialChannel } from '../core/change-notices.ts';
import { ApiError } from '../core/errors.ts';
import { AnswerTally } from './answer-tally.ts';
import { Authenticator, authorize } from './auth.ts';
import { checkIdempotencyKey } from './idempotency.ts';
import { IdempotencyUpkeep } from './idempotency-upkeep.ts';
import { openApiDocument } from './openapi.ts';
import { isMutation, operations } from './operations.ts';
import type { Services } from './route.ts';
import { registerQueueGauges } from './queue-gauges.ts';
import { agentRoutes } from './routes/agents.ts';
import { aiAgentRoutes } from './routes/ai-agents.ts';
import { applicationKeyRoutes } from './routes/application-keys.ts';
import { callRoutes } from './routes/calls.ts';
import { carrierMmsRoutes } from './routes/carrier-mms.ts';
import { callSupervisionRoutes } from './routes/call-supervision.ts';
import { callTransferRoutes } from './routes/call-transfers.ts';
import { deviceRoutes } from './routes/devices.ts';
import { eventRoutes } from './routes/events.ts';
import { memberRoutes } from './routes/members.ts';
import { messageRoutes } from './routes/messages.ts';
import { numberRoutes } from './routes/numbers.ts';
import { offerRoutes } from './routes/offers.ts';
import { phoneRoutes } from './routes/phone.ts';
import { queueRoutes } from './routes/queues.ts';
import { realtimeRoutes } from './routes/realtime.ts';
import { routingPlanRoutes } from './routes/routing-plans.ts';
import { scheduleRoutes } from './routes/schedules.ts';
import { sessionRoutes } from './routes/sessions.ts';
import { userRoutes } from './routes/users.ts';
import { verificationRoutes } from './routes/verifications.ts';
import { webhookRoutes } from './routes/webhooks.ts';
import { workspaceRoutes } from './routes/workspaces.ts';

export function registerApi(app: FastifyInstance, shared: Services): void {
  // Application keys are cached per process while change notices flow; a revocation's notice drops the key.
  const authenticator = new Authenticator(
    shared.pool,
    shared.keys.tokens,
    shared.logins,
    (error) => app.log.warn({ err: error }, 'could not record key use'),
    () => notices.listening,
  );
  const notices = new ChangeListener(
    shared.databaseUrl,
    credentialChannel,
    (keyId) => authenticator.keysChanged(keyId),
    () => authenticator.keysChanged('*'),
    (message) => app.log.warn(message),
  );
  // The idempotent answers this process stores, added to their scopes' counts once a second.
  const answerTally = new AnswerTally(shared.pool, (error) =>
    app.log.warn({ err: error }, 'could not count the idempotent answers stored'),
  );
  app.addHook('onReady', async () => answerTally.start());
  app.addHook('onClose', () => answerTally.close());
  const services: Services = { ...shared, answerTally, keyRevoked: (keyId) => authenticator.keysChanged(keyId) };
  app.addHook('onReady', () => notices.start());
  app.addHook('onClose', () => notices.close());
  // Stored answers: sealing what an older version left in clear text, and the purge (api/idempotency.ts).
  const upkeep = new IdempotencyUpkeep({ pool: shared.pool, key: shared.keys.idempotentAnswers }, (error) =>
    app.log.warn({ err: error }, 'idempotency records upkeep failed'),
  );
  app.addHook('onReady', async () => upkeep.start());
  app.addHook('onClose', () => upkeep.close());

  app.addHook('onRequest', async (request) => {
    const operation = request.routeOptions.config.operation;
    if (operation === undefined) return;
    const principal = await authenticator.authenticate(request.headers);
    authorize(operation, principal);
    request.principal = principal;
    if (!services.implemented.has(operation.id)) {
      throw new ApiError('not_implemented', `${operation.id} (operation ${operation.number}) is not available yet`);
    }
    if (isMutation(operation.method)) request.idempotencyKey = checkIdempotencyKey(request.headers['idempotency-key']);
  });

  sessionRoutes(app, services);
  applicationKeyRoutes(app, services);
  workspaceRoutes(app, services);
  userRoutes(app, services);
  memberRoutes(app, services);
  eventRoutes(app, services);
  webhookRoutes(app, services);
  numberRoutes(app, services);
  routingPlanRoutes(app, services);
  queueRoutes(app, services);
  scheduleRoutes(app, services);
  aiAgentRoutes(app, services);
  callRoutes(app, services);
  callTransferRoutes(app, services);
  callSupervisionRoutes(app, services);
  deviceRoutes(app, services);
  offerRoutes(app, services);
  agentRoutes(app, services);
  realtimeRoutes(app, services);
  messageRoutes(app, services);
  verificationRoutes(app, services);
  if (services.registry !== undefined) {
    registerQueueGauges(services.registry, services.pool, (error) =>
      app.log.warn({ err: error }, 'could not read the queue gauges'),
    );
  }
  // The softphone page and the browser library: static, outside /api/v1.
  phoneRoutes(app, services.config.phoneFrameAncestors);
  // What carriers call (inbound MMS, MMS status callbacks), outside /api/v1 with their own credentials.
  carrierMmsRoutes(app, services);

  for (const operation of operations) {
    if (services.implemented.has(operation.id)) continue;
    app.route({
      method: operation.method,
      url: operation.path,
      config: { operation },
      handler: async () => {
        throw new ApiError('not_implemented', `${operation.id} is not available yet`);
      },
    });
  }

  const document = openApiDocument(services.implemented);
  app.get('/openapi.json', async () => document);
}
