/**
 * Operations 67-69: texting (docs/messaging.md, "Sending"). A send checks, in the design's order, that the number can
 * text (422 `sender_unavailable`), that its texting registration is approved (403 `sender_not_eligible`), that the
 * peer has not opted out (409 `recipient_opted_out`), that the same message was not sent within the last minute under
 * another idempotency key (409 `message_conflict`) and its media (422 `invalid_media`: the number's carrier takes no
 * MMS, or a URL fails core/messages/media.ts's fetch and checks); then the message and its parts (an MMS: its one
 * part for the carrier's media interface) are written `queued` in the request's transaction. The answer waits,
 * with that transaction committed and no connection held, up to 2 s for the carrier's first word: a refusal of the
 * submit is 422 `message_rejected`, anything else (sent, or still queued with no link up) the message as it is, 202.
 */
import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { messageSettledChannel } from '../../core/change-notices.ts';
import { ApiError } from '../../core/errors.ts';
import { MessageObject } from '../../core/events/types.ts';
import { e164Pattern } from '../../core/ids.ts';
import {
  type Media,
  createOutboundMessage,
  getMessage,
  listMessages,
  type MessageFilters,
  messageJson,
  type MessageRow,
  messageStatus,
  statusHistoryJson,
} from '../../core/messages/messages.ts';
import { parseSettledNotice, type SettledMessage } from '../../core/messages/statuses.ts';
import { claimDedupeHash, dedupeHash, duplicateWindowMs, takeOverDedupeHash } from '../../core/messages/dedupe.ts';
import { checkMedia, MediaError, mediaDefaults } from '../../core/messages/media.ts';
import { carrierTakesMms } from '../../core/carriers/messaging.ts';
import { validE164 } from '../../core/numbers/e164.ts';
import { senderOf } from '../../core/numbers/numbers.ts';
import { actorOf } from '../auth.ts';
import type { Answer } from '../idempotency.ts';
import { type NoticeWatch, NoticeWaiters } from '../notice-waiters.ts';
import { ListQuery, listPage, pageOf } from '../pagination.ts';
import { defineOperation, type PreparingContext, requireWorkspace, type Services } from '../route.ts';
import { DateTime, IdParams, Uuid } from '../schemas.ts';

/** How long a send's answer waits for the carrier to take or refuse the message (the link's `submit_sm_resp`). */
const carrierWaitMs = 2_000;

const e164 = (description: string) => Type.String({ pattern: e164Pattern, description });

export const Message = Type.Object({
  ...MessageObject.properties,
  direction: Type.String({ description: '`outbound` or `inbound`' }),
  status: Type.String({
    description: 'outbound: `queued`, `sending`, `sent`, `delivered` or `failed`; inbound: `received`',
  }),
  updatedAt: DateTime,
});

const StatusChange = Type.Object({
  status: Type.String(),
  error: Type.Union([Type.Object({ code: Type.String(), message: Type.String() }), Type.Null()]),
  at: DateTime,
});

const MessageWithHistory = Type.Object({
  ...Message.properties,
  statusHistory: Type.Array(StatusChange, { description: 'Every status the message went through, oldest first' }),
});

const SendBody = Type.Object(
  {
    from: Type.Union(
      [
        e164("The E.164 of one of the workspace's numbers"),
        Type.Object(
          { phoneNumberId: Uuid },
          { additionalProperties: false, description: "One of the workspace's numbers by id" },
        ),
      ],
      { description: "The workspace's number it is sent from: its E.164, or `{ phoneNumberId }`" },
    ),
    to: Type.String({ minLength: 1, maxLength: 32, description: 'The recipient, E.164 (checked with libphonenumber)' }),
    text: Type.Optional(Type.String({ maxLength: 1600, description: 'Up to 1,600 characters' })),
    mediaUrls: Type.Optional(
      Type.Array(Type.String({ minLength: 1, maxLength: 2048 }), {
        maxItems: 10,
        description:
          'MMS media (https, at most 5 MB each; image/jpeg, image/png, image/gif, video/mp4, audio/mpeg, text/vcard, ' +
          'application/pdf): each is fetched and checked before the message is accepted (else 422 invalid_media)',
      }),
    ),
  },
  { additionalProperties: false },
);

const MessageListQuery = Type.Object(
  {
    ...ListQuery.properties,
    phoneNumberId: Type.Optional(Uuid),
    number: Type.Optional(e164("The workspace's end of the message (its number), E.164")),
    peer: Type.Optional(e164('The other end of the message, E.164')),
    direction: Type.Optional(Type.Enum(['inbound', 'outbound'])),
  },
  { additionalProperties: false },
);

/** `to` as E.164, or 400 naming the field: libphonenumber must take it as a valid number, written in E.164 already. */
function recipient(to: string): string {
  if (validE164(to) !== to) {
    throw new ApiError('invalid_request', `body.to must be a valid phone number in E.164 form (like +14155550100)`);
  }
  return to;
}

/** A refusal of the submit before any part was acknowledged: `failed` without passing `sent`. */
function refusedByCarrier(message: Awaited<ReturnType<typeof getMessage>>): boolean {
  return message.status === 'failed' && !message.statusHistory.some((change) => change.status === 'sent');
}

/**
 * The send's answer once written: the carrier's refusal (422 `message_rejected`) if it comes within the wait, else
 * the message as it is then. `watch` was taken before the message was committed, so no notice of it is missed:
 * it waits first; woken by the link's notice that the message was taken (`sent`, `delivered`), it answers from the
 * notice, else it reads, holding a connection only for each short read.
 */
async function carrierOutcome(
  services: Services,
  { watch, heard }: { watch: NoticeWatch; heard: Map<string, SettledMessage> },
  written: MessageRow,
  until: number,
): Promise<Answer> {
  try {
    for (;;) {
      await watch.next(Math.max(until - Date.now(), 0));
      const notice = heard.get(written.id);
      if (notice !== undefined && notice.status !== 'failed') {
        return {
          status: 202,
          body: messageJson({ ...written, status: notice.status, updated_at: new Date(notice.at) }),
        };
      }
      const message = await getMessage(services.pool, written.workspace_id, written.id);
      if (refusedByCarrier(message)) {
        const error = message.error ?? { code: 'unknown', message: 'no reason given' };
        return {
          status: 422,
          body: new ApiError('message_rejected', `the carrier refused the message: ${error.code} ${error.message}`, {
            extra: { messageId: message.id },
          }).body(),
        };
      }
      if ((message.status !== 'queued' && message.status !== 'sending') || until <= Date.now() || watch.ended) {
        return { status: 202, body: messageJson(message) };
      }
    }
  } finally {
    watch.stop();
    heard.delete(written.id);
  }
}

/** An MMS' media as fetched before the send's transaction: checked, or the refusal its check ended in. */
type FetchedMedia = { media: Media[] } | { refusal: ApiError };

/** Whether `number` can send MMS now: it takes `mms`, and its carrier has an MMS URL. */
async function sendsMms(
  db: Parameters<typeof carrierTakesMms>[0],
  number: { carrier: string; capabilities: readonly string[] },
): Promise<boolean> {
  return number.capabilities.includes('mms') && (await carrierTakesMms(db, number.carrier));
}

/**
 * An MMS' media fetched and checked with no database connection held (the send's `prepare`: a host that never
 * answers holds this request alone, up to the fetch's timeout). Nothing is fetched for a sender that cannot send MMS:
 * the send refuses it in its own order.
 */
async function fetchMedia(context: PreparingContext<{ body: typeof SendBody }>): Promise<FetchedMedia | undefined> {
  const { services } = context;
  const urls = context.body.mediaUrls ?? [];
  if (urls.length === 0) return undefined;
  const from = context.body.from;
  const sender = await senderOf(
    services.pool,
    requireWorkspace(context).id,
    typeof from === 'string' ? { e164: from } : from,
  );
  if (sender === undefined || !sender.canText || !(await sendsMms(services.pool, sender.number))) return undefined;
  try {
    return {
      media: await checkMedia(urls, {
        ...mediaDefaults,
        allowPrivateNetworks: services.config.webhookAllowPrivateNetworks,
      }),
    };
  } catch (error) {
    if (!(error instanceof MediaError)) throw error;
    return { refusal: new ApiError('invalid_media', error.message, { extra: { mediaIndex: error.index } }) };
  }
}

/**
 * The media of an MMS, fetched and checked before the transaction (`fetched`); 422 `invalid_media` when the number
 * cannot send MMS (its carrier has no MMS URL, or it does not take `mms`) or a URL was refused, naming which
 * (`mediaIndex`) and why.
 */
async function mmsMedia(
  db: Parameters<typeof carrierTakesMms>[0],
  number: { e164: string; carrier: string; capabilities: readonly string[] },
  fetched: FetchedMedia | undefined,
): Promise<Media[]> {
  if (!(await sendsMms(db, number))) {
    throw new ApiError('invalid_media', `${number.e164} cannot send MMS: this number's carrier takes no MMS`);
  }
  // Not fetched: the number could not send MMS a moment ago, and now can.
  if (fetched === undefined) throw new ApiError('unavailable', `${number.e164}'s MMS settings changed; retry`);
  if ('refusal' in fetched) throw fetched.refusal;
  return fetched.media;
}

export function messageRoutes(app: FastifyInstance, services: Services) {
  // Waiting sends hear that their message left `queued`/`sending` through one listening connection per process. The
  // notice names the status reached and when: a send that was taken answers from it with no read (the refusals,
  // rare, are read for their error and history).
  const heard = new Map<string, SettledMessage>();
  const settled: NoticeWaiters = new NoticeWaiters(
    services.databaseUrl,
    messageSettledChannel,
    (payload) => {
      for (const message of parseSettledNotice(payload)) {
        if (settled.watching(message.id)) heard.set(message.id, message);
      }
      // Every entry's id wakes its send (one that names no status, as an engine of the version before sends it,
      // makes the send read).
      return payload.split(',').map((entry) => entry.split(' ')[0] as string);
    },
    (message) => app.log.warn(message),
  );
  app.addHook('onReady', () => settled.start());
  app.addHook('preClose', async () => settled.stopWaiting());
  app.addHook('onClose', () => settled.close());

  defineOperation(app, services, 'sendMessage', {
    schemas: { body: SendBody, response: { 202: Message } },
    prepare: fetchMedia,
    handler: async (context) => {
      const workspace = requireWorkspace(context);
      const { body } = context;
      const mediaUrls = body.mediaUrls ?? [];
      const to = recipient(body.to);
      const text = body.text ?? '';
      if (text === '' && mediaUrls.length === 0) {
        throw new ApiError(
          'invalid_request',
          'body.text is required (1 to 1,600 characters) unless mediaUrls are given',
        );
      }
      const ref = typeof body.from === 'string' ? { e164: body.from } : body.from;
      const sender = await senderOf(context.db, workspace.id, ref);
      const named = typeof body.from === 'string' ? body.from : body.from.phoneNumberId;
      if (sender === undefined) {
        throw new ApiError('sender_unavailable', `the workspace has no number ${named} to send from`);
      }
      if (!sender.canText) {
        throw new ApiError('sender_unavailable', `${sender.number.e164} cannot send messages (no SMS on its carrier)`);
      }
      if (sender.registration !== 'approved') {
        throw new ApiError(
          'sender_not_eligible',
          `${sender.number.e164}'s texting registration is ${sender.registration}: only approved numbers send`,
        );
      }
      const hash = dedupeHash({ from: sender.number.e164, to, text, mediaUrls });
      const messageId = randomUUID();
      // One statement claims the hash and reads the opt-out; the refusals still come in the design's order.
      const { earlier, optedOut } = await claimDedupeHash(context.db, hash, {
        messageId,
        numberId: sender.number.id,
        to,
      });
      if (optedOut) {
        throw new ApiError(
          'recipient_opted_out',
          `${to} opted out of messages from ${sender.number.e164}; nothing sent`,
        );
      }
      if (earlier !== undefined) {
        // A failed message never reached the peer: sending it again is no duplicate.
        if (earlier.recent && (await messageStatus(context.db, earlier.messageId)) !== 'failed') {
          throw new ApiError(
            'message_conflict',
            `the same message was sent at ${earlier.at.toISOString()} under another idempotency-key ` +
              `(within ${duplicateWindowMs / 1000} s); retry with that key, or wait`,
            { extra: { messageId: earlier.messageId } },
          );
        }
        await takeOverDedupeHash(context.db, hash, messageId);
      }
      const media = mediaUrls.length === 0 ? [] : await mmsMedia(context.db, sender.number, context.prepared);
      const started = Date.now();
      const row = await createOutboundMessage(context.db, {
        workspace: sender.workspace,
        number: sender.number,
        to,
        text,
        media,
        actor: actorOf(context.principal),
        dedupeHash: hash,
        id: messageId,
      });
      // Watched from before the commit, so that the link's first word (which can come right after it) is heard; a
      // send whose transaction then fails leaves its watch to this timer.
      const watch = settled.watch(row.id);
      const forgotten = setTimeout(() => watch.stop(), carrierWaitMs + 10_000);
      forgotten.unref();
      return {
        status: 202,
        body: messageJson(row),
        finishLater: {
          withinMs: carrierWaitMs,
          finish: () => {
            clearTimeout(forgotten);
            return carrierOutcome(services, { watch, heard }, row, started + carrierWaitMs);
          },
        },
      };
    },
  });

  // A user token sees all of its workspace's messages, as keys and member tokens do: a message belongs to a number,
  // and every number of the workspace is every credential's to send from (docs/messaging.md).
  defineOperation(app, services, 'listMessages', {
    schemas: { querystring: MessageListQuery, response: { 200: pageOf(Message) } },
    handler: async (context) => {
      const workspace = requireWorkspace(context);
      const { query } = context;
      const filters: MessageFilters = {
        ...(query.phoneNumberId !== undefined ? { phoneNumberId: query.phoneNumberId } : {}),
        ...(query.number !== undefined ? { number: query.number } : {}),
        ...(query.peer !== undefined ? { peer: query.peer } : {}),
        ...(query.direction !== undefined ? { direction: query.direction } : {}),
      };
      const page = await listPage({
        key: services.keys.cursors,
        list: 'messages',
        owner: workspace.id,
        query,
        read: (window) => listMessages(context.db, workspace.id, filters, window),
      });
      return { status: 200, body: { data: page.rows.map(messageJson), nextCursor: page.nextCursor } };
    },
  });

  defineOperation(app, services, 'getMessage', {
    schemas: { params: IdParams, response: { 200: MessageWithHistory } },
    handler: async (context) => {
      const workspace = requireWorkspace(context);
      const message = await getMessage(context.db, workspace.id, context.params.id);
      return {
        status: 200,
        body: { ...messageJson(message), statusHistory: statusHistoryJson(message.statusHistory) },
      };
    },
  });
}
