/**
 * Operations 17-18: one-time codes (docs/messaging.md, "One-time codes"), with a workspace key (`verify:send`). A
 * code goes by SMS from the workspace's first number that can text, or by a call the engine places
 * (engine/verifications/voice.ts); a check answers only `approved`, `pending`, `expired` or `spent`. An SMS code to a
 * peer opted out of that number is 409 `recipient_opted_out`, with nothing written or counted.
 */
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { dialOutRefusal } from '../../core/calls/dial-policy.ts';
import { ApiError, notFound } from '../../core/errors.ts';
import { createOutboundMessage } from '../../core/messages/messages.ts';
import { isOptedOut } from '../../core/messages/opt-outs.ts';
import { validE164 } from '../../core/numbers/e164.ts';
import { senderOf } from '../../core/numbers/numbers.ts';
import {
  checkVerification,
  createVerification,
  firstTextingNumberId,
  hasVoiceCaller,
  newCode,
  noteVerificationMessage,
  verificationJson,
} from '../../core/verifications/verifications.ts';
import { actorOf } from '../auth.ts';
import { defineOperation, requireWorkspace, type Services } from '../route.ts';
import { DateTime, IdParams, Uuid } from '../schemas.ts';

const Status = Type.Union([
  Type.Literal('pending'),
  Type.Literal('approved'),
  Type.Literal('expired'),
  Type.Literal('spent'),
]);

const Verification = Type.Object({
  id: Uuid,
  to: Type.String({ description: 'E.164' }),
  channel: Type.Union([Type.Literal('sms'), Type.Literal('call')]),
  status: Status,
  expiresAt: DateTime,
});

const NewVerification = Type.Object(
  {
    to: Type.String({ minLength: 1, maxLength: 32, description: 'The phone number the code goes to, E.164' }),
    channel: Type.Union([Type.Literal('sms'), Type.Literal('call')]),
  },
  { additionalProperties: false },
);

const Check = Type.Object(
  { code: Type.String({ minLength: 1, maxLength: 32, description: 'The code the person received' }) },
  { additionalProperties: false },
);

/** The SMS that carries a code, and what records and events show of it (the digits masked). */
export const codeText = (code: string) => `Your code is ${code}.`;
const shownCodeText = (code: string) => codeText('*'.repeat(code.length));

/** `to` in E.164 when libphonenumber takes it for a valid number; otherwise 400 `invalid_request`. */
function recipient(to: string): string {
  const e164 = validE164(to);
  if (e164 === undefined) {
    throw new ApiError('invalid_request', 'to must be a valid phone number in E.164 form (+ and digits)');
  }
  return e164;
}

export function verificationRoutes(app: FastifyInstance, services: Services) {
  defineOperation(app, services, 'createVerification', {
    schemas: { body: NewVerification, response: { 201: Verification } },
    handler: async (context) => {
      const { db, body, principal } = context;
      const workspace = requireWorkspace(context);
      const to = recipient(body.to);
      const channel = body.channel;
      // The sender is checked before anything is written or counted: a refused send is no send.
      let sender;
      if (channel === 'sms') {
        const numberId = await firstTextingNumberId(db, workspace.id);
        sender = numberId === undefined ? undefined : await senderOf(db, workspace.id, { phoneNumberId: numberId });
        if (sender === undefined || !sender.canText) {
          throw new ApiError('sender_unavailable', 'the workspace has no number that can text');
        }
        // A peer who sent STOP to the number gets no code from it either (docs/messaging.md, "Receiving").
        if (await isOptedOut(db, sender.number.id, to)) {
          throw new ApiError(
            'recipient_opted_out',
            `${to} opted out of messages from ${sender.number.e164}; no code sent (a START to it opts back in)`,
          );
        }
      } else {
        // A code spoken by a call is a call the service places: the dial-out policy decides (the engine asks again).
        const refusal = await dialOutRefusal(db, { workspaceId: workspace.id, kind: 'verification', to });
        if (refusal !== undefined) throw new ApiError(refusal.code, refusal.message);
        if (!(await hasVoiceCaller(db, workspace.id))) {
          throw new ApiError('sender_unavailable', 'the workspace has no voice number to call from');
        }
      }
      const code = newCode();
      const row = await createVerification(db, { workspace, to, channel, code, keys: services.keys });
      if (row === 'limit_exceeded') {
        throw new ApiError('limit_exceeded', 'too many codes sent to this number lately; try again later');
      }
      if (sender !== undefined) {
        const message = await createOutboundMessage(db, {
          workspace: sender.workspace,
          number: sender.number,
          to,
          text: codeText(code),
          shownText: shownCodeText(code),
          actor: actorOf(principal),
        });
        await noteVerificationMessage(db, row.id, message.id);
      }
      return { status: 201, body: verificationJson(row) };
    },
  });

  defineOperation(app, services, 'checkVerification', {
    schemas: { params: IdParams, body: Check, response: { 200: Type.Object({ status: Status }) } },
    handler: async (context) => {
      const workspace = requireWorkspace(context);
      const status = await checkVerification(context.db, {
        workspaceId: workspace.id,
        id: context.params.id,
        code: context.body.code,
        hashKey: services.keys.verificationHashes,
      });
      if (status === undefined) throw notFound('verification');
      return { status: 200, body: { status } };
    },
  });
}
