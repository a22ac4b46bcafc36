/**
 * The 15 event types of section 6 as TypeBox schemas. The nine whose shapes the specification gives follow it
 * exactly (required fields, nulls, lengths, bounds, formats); the six it leaves out are of our design and are
 * documented in docs/events.md. Streams: `call:<callId>`, `number:<numberId>`, `agent:<memberId>`.
 */
import { type Static, type TSchema, Type } from 'typebox';

const maxInteger = 9007199254740991;
const Uuid = Type.String({ format: 'uuid' });
const DateTime = Type.String({ format: 'date-time' });
const Text = (max: number) => Type.String({ minLength: 1, maxLength: max });
const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);
const EventInteger = (minimum: number) => Type.Integer({ minimum, maximum: maxInteger });
/** An enumeration that may grow: known values, or any other string of 1 to 100 characters. */
const OpenState = Text(100);
const ExternalId = Text(200);

export const CallObject = Type.Object(
  {
    id: Uuid,
    direction: OpenState,
    from: Text(64),
    to: Text(64),
    phoneNumberId: Nullable(Uuid),
    state: OpenState,
    startedAt: DateTime,
    answeredAt: Nullable(DateTime),
    endedAt: Nullable(DateTime),
    endReason: Nullable(Type.String()),
    agent: Type.Optional(
      Type.Object({ memberId: Nullable(Uuid), externalUserId: Nullable(ExternalId) }, { additionalProperties: false }),
    ),
  },
  { additionalProperties: false },
);
export type CallObject = Static<typeof CallObject>;

export const QueueEntryObject = Type.Object(
  {
    queueId: Uuid,
    entryId: Uuid,
    state: OpenState,
    priority: Type.Integer({ minimum: -maxInteger, maximum: maxInteger }),
    enqueuedAt: DateTime,
  },
  { additionalProperties: false },
);

export const AgentObject = Type.Object(
  {
    memberId: Nullable(Uuid),
    state: OpenState,
    previousState: Nullable(OpenState),
    reason: Nullable(Type.String()),
    actor: Nullable(Type.String()),
    changedAt: DateTime,
  },
  { additionalProperties: false },
);

const Ring = Type.Object(
  {
    ringSeq: EventInteger(1),
    memberIds: Type.Array(Uuid),
    externalUserIds: Type.Optional(Type.Array(ExternalId)),
    offerId: Nullable(Uuid),
    expiresAt: DateTime,
  },
  { additionalProperties: false },
);

const Leg = Type.Object(
  { id: Uuid, role: Text(100), memberId: Nullable(Uuid), externalUserId: Nullable(ExternalId) },
  { additionalProperties: false },
);

const Transfer = Type.Object(
  {
    target: Type.Union([
      Type.Object({ e164: Text(32) }, { additionalProperties: false }),
      Type.Object({ queueId: Uuid }, { additionalProperties: false }),
      Type.Object({ memberId: Uuid }, { additionalProperties: false }),
    ]),
    warm: Type.Boolean(),
    actor: Nullable(Type.String()),
  },
  { additionalProperties: false },
);

// Shapes of our design (docs/events.md).
const Recording = Type.Object(
  {
    id: Uuid,
    kind: OpenState,
    durationSeconds: Nullable(EventInteger(0)),
    contentType: Text(100),
  },
  { additionalProperties: false },
);
const Transcript = Type.Object(
  {
    id: Uuid,
    recordingId: Uuid,
    language: Nullable(Text(35)),
    text: Type.String({ maxLength: 100000 }),
    segments: Type.Array(
      Type.Object(
        {
          party: Text(100),
          startSeconds: Type.Number({ minimum: 0 }),
          endSeconds: Type.Number({ minimum: 0 }),
          text: Type.String({ maxLength: 10000 }),
        },
        { additionalProperties: false },
      ),
      { maxItems: 2000 },
    ),
    channels: Type.Integer({ minimum: 1, maximum: 16 }),
  },
  { additionalProperties: false },
);
const Voicemail = Type.Object(
  { id: Uuid, recordingId: Uuid, from: Text(64), to: Text(64), durationSeconds: Nullable(EventInteger(0)) },
  { additionalProperties: false },
);
/**
 * A message as `message.received` and `message.status` carry it (docs/messaging.md, "Events"): the record's own
 * shape, its status and error the new ones for a status event. Texts reassembled from up to 255 parts stay under
 * 40,000 characters.
 */
export const MessageObject = Type.Object(
  {
    id: Uuid,
    phoneNumberId: Uuid,
    direction: OpenState,
    from: Text(64),
    to: Text(64),
    text: Type.String({ maxLength: 40000 }),
    media: Type.Array(
      Type.Object(
        { url: Type.String({ maxLength: 2048 }), contentType: Text(100), size: EventInteger(0) },
        { additionalProperties: false },
      ),
      { maxItems: 10 },
    ),
    status: OpenState,
    error: Nullable(
      Type.Object({ code: Text(100), message: Type.String({ maxLength: 1000 }) }, { additionalProperties: false }),
    ),
    segments: Type.Integer({ minimum: 0, maximum: 255 }),
    /** Only on an inbound text some of whose parts never came (docs/messaging.md, "Receiving"): always true. */
    incomplete: Type.Optional(Type.Literal(true)),
    createdAt: DateTime,
  },
  { additionalProperties: false },
);
export type MessageObject = Static<typeof MessageObject>;
const NumberState = Type.Object(
  {
    id: Uuid,
    e164: Text(32),
    status: OpenState,
    voiceLane: OpenState,
    textingRegistration: OpenState,
    workspaceId: Nullable(Uuid),
    routingPlanId: Nullable(Uuid),
    changes: Type.Array(Text(100), { maxItems: 50 }),
  },
  { additionalProperties: false },
);

/** Fields every event carries (section 6). */
function envelope<K extends string, P extends Record<string, TSchema>>(
  type: K,
  fields: P,
  externalWorkspaceIdNullable = false,
) {
  return Type.Object(
    {
      id: Uuid,
      type: Type.Literal(type),
      occurredAt: DateTime,
      applicationId: Type.String({ pattern: '^[a-z][a-z0-9_-]{1,63}$' }),
      workspaceId: Uuid,
      externalWorkspaceId: externalWorkspaceIdNullable ? Nullable(ExternalId) : ExternalId,
      sequence: EventInteger(1),
      externalUserId: Type.Optional(ExternalId),
      ...fields,
    },
    { additionalProperties: false },
  );
}

const callEvent = <K extends string, P extends Record<string, TSchema>>(type: K, fields: P) =>
  envelope(type, { callId: Uuid, ...fields });
const numberEvent = <K extends string, P extends Record<string, TSchema>>(type: K, fields: P) =>
  envelope(type, fields, true);

export const eventSchemas = {
  'call.started': callEvent('call.started', { call: CallObject }),
  'call.ringing': callEvent('call.ringing', { call: CallObject, ring: Ring }),
  'call.answered': callEvent('call.answered', { call: CallObject }),
  'call.connected': callEvent('call.connected', { call: CallObject, leg: Leg }),
  'call.transferred': callEvent('call.transferred', { call: CallObject, transfer: Transfer }),
  'call.ended': callEvent('call.ended', {
    call: CallObject,
    previousState: OpenState,
    connected: Type.Boolean(),
    durationSeconds: Nullable(EventInteger(0)),
  }),
  'queue.entered': callEvent('queue.entered', { queue: QueueEntryObject }),
  'queue.left': callEvent('queue.left', { queue: QueueEntryObject }),
  'agent.state_changed': envelope('agent.state_changed', { externalUserId: ExternalId, agent: AgentObject }),
  'recording.ready': callEvent('recording.ready', { recording: Recording }),
  'transcript.ready': callEvent('transcript.ready', { transcript: Transcript }),
  'voicemail.ready': callEvent('voicemail.ready', { voicemail: Voicemail }),
  'message.received': numberEvent('message.received', { message: MessageObject }),
  'message.status': numberEvent('message.status', { message: MessageObject }),
  'number.updated': numberEvent('number.updated', { number: NumberState }),
} as const;

export type EventType = keyof typeof eventSchemas;
export const eventTypes = Object.keys(eventSchemas) as EventType[];

export function isEventType(value: string): value is EventType {
  return Object.hasOwn(eventSchemas, value);
}

/** The stream kind each type is carried in. */
export const streamOf: Record<EventType, 'call' | 'number' | 'agent'> = {
  'call.started': 'call',
  'call.ringing': 'call',
  'call.answered': 'call',
  'call.connected': 'call',
  'call.transferred': 'call',
  'call.ended': 'call',
  'queue.entered': 'call',
  'queue.left': 'call',
  'agent.state_changed': 'agent',
  'recording.ready': 'call',
  'transcript.ready': 'call',
  'voicemail.ready': 'call',
  'message.received': 'number',
  'message.status': 'number',
  'number.updated': 'number',
};

export type Event<T extends EventType = EventType> = Static<(typeof eventSchemas)[T]>;
