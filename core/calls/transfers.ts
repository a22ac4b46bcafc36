/**
 * Transfers of a call (operation 53, docs/contact-center.md "Transfer"): the target shapes and `call.transferred`'s
 * `transfer`. The request is a call command (commands.ts: recorded by the API, taken up once by the engine, with the
 * consultation of a warm transfer and `call.transferred`).
 */
import { type Static, Type } from 'typebox';
import { e164Pattern } from '../ids.ts';

const Uuid = Type.String({ format: 'uuid' });

/** Where a transfer sends the caller (spec section 6, `transfer.target`): exactly one of the three. */
export const TransferTarget = Type.Union([
  Type.Object(
    { e164: Type.String({ pattern: e164Pattern, description: 'A phone number, dialled out' }) },
    { additionalProperties: false },
  ),
  Type.Object({ queueId: Uuid }, { additionalProperties: false }),
  Type.Object({ memberId: Uuid }, { additionalProperties: false }),
]);
export type TransferTarget = Static<typeof TransferTarget>;

/** `call.transferred`'s `transfer`: the target, warm or blind, and who asked. */
export interface Transfer {
  target: TransferTarget;
  warm: boolean;
  actor: string | null;
}
