/**
 * Call commands from the API (core/calls/commands.ts) dispatched to the calls this engine holds. A command for a
 * call held elsewhere, or already ended, is no business of this engine. `CallCommandWatch` hears them: recorded on
 * the call row and announced on `switchboard_call_control`, a notice wakes the engine at once; a read when the
 * listener (re)connects and a short poll find a command whose notice was missed.
 */
import type pg from 'pg';
import { callControlChannel, ChangeListener } from '../../core/change-notices.ts';
import { type CallCommand, parseCallCommand, pendingCallCommands } from '../../core/calls/commands.ts';
import type { Log } from '../../core/log.ts';
import type { ActiveCalls } from './active-calls.ts';

/** How often the engine looks for call commands whose notice it may have missed. */
const commandPollMs = 2_000;

/** Hears the API's commands for the calls of one engine (`owner`) and dispatches them. */
export class CallCommandWatch {
  private readonly listener: ChangeListener;
  private poll: NodeJS.Timeout | undefined;
  private checking: Promise<void> | undefined;

  constructor(
    private readonly options: {
      pool: pg.Pool;
      databaseUrl: string;
      owner: string;
      calls: ActiveCalls;
      log: Pick<Log, 'warn'>;
    },
  ) {
    const { log } = options;
    this.listener = new ChangeListener(
      options.databaseUrl,
      callControlChannel,
      (payload) => {
        const command = parseCallCommand(payload);
        if (command === undefined) log.warn({ payload: payload.slice(0, 200) }, 'not a call command; dropped');
        else void this.dispatch(command);
      },
      () => this.readPending(),
      (message) => log.warn({}, message),
    );
  }

  async start(): Promise<void> {
    await this.listener.start();
    this.poll = setInterval(() => this.readPending(), commandPollMs);
    this.poll.unref();
  }

  async close(): Promise<void> {
    clearInterval(this.poll);
    await this.listener.close();
    await this.checking;
  }

  private dispatch(command: CallCommand): Promise<void> {
    return dispatchCallCommand(this.options.calls, command).then(
      () => {},
      (error: unknown) =>
        this.options.log.warn({ err: error, callId: command.callId, action: command.action }, 'call command failed'),
    );
  }

  /** Dispatches the commands recorded for this engine's calls and not yet carried out; one read at a time. */
  private readPending(): void {
    this.checking ??= pendingCallCommands(this.options.pool, this.options.owner)
      .then(async (commands) => {
        for (const command of commands) await this.dispatch(command);
      })
      .catch((error: unknown) => this.options.log.warn({ err: error }, 'call commands could not be read'))
      .finally(() => {
        this.checking = undefined;
      });
  }
}

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
