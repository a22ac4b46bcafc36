/**
 * Call commands from the API (core/calls/commands.ts) dispatched to the calls this engine holds. A command for a
 * call held elsewhere, or already ended, is no business of this engine.
 */
import type { CallCommand } from '../../core/calls/commands.ts';
import type { ActiveCalls } from './active-calls.ts';

/** Acts on `command` if this engine holds its call; false when it does not. */
export async function dispatchCallCommand(calls: ActiveCalls, command: CallCommand): Promise<boolean> {
  const call = calls.get(command.callId);
  if (call === undefined) return false;
  switch (command.action) {
    case 'hangup':
      await call.hangup('hangup_requested');
      return true;
    case 'hold':
      // Before the bridge is up (or between parties) there is nothing to hold; the 2 s re-read of the recorded
      // request applies it once the call is bridged.
      call.hold(command.hold);
      return true;
    case 'transfer':
    case 'finish_transfer':
      await call.transfer(command);
      return true;
    case 'supervise':
      await call.supervise(command);
      return true;
    default: {
      // A member of CallCommand without its case here fails the compiler.
      const unhandled: never = command;
      throw new Error(`call command ${JSON.stringify(unhandled)} has no dispatch`);
    }
  }
}
