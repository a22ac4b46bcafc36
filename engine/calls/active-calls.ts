/**
 * The calls in progress on this engine, by id: what a call command from the API is dispatched to
 * (commands.ts), what shutdown hangs up, and the `switchboard_calls_active` gauge.
 */
import type { Call } from './call.ts';
import { dispatchCallCommand } from './commands.ts';
import type { CallMetrics } from './metrics.ts';

export class ActiveCalls {
  private readonly calls = new Map<string, Call>();

  constructor(private readonly metrics: CallMetrics) {}

  get active(): number {
    return this.calls.size;
  }

  get(callId: string): Call | undefined {
    return this.calls.get(callId);
  }

  add(call: Call): void {
    this.calls.set(call.row.id, call);
    this.metrics.active.set(this.calls.size);
  }

  forget(call: Call): void {
    this.calls.delete(call.row.id);
    this.metrics.active.set(this.calls.size);
  }

  /** Every call this engine holds. */
  all(): Call[] {
    return [...this.calls.values()];
  }

  /** The API asked to end a call this engine holds (a `hangup` command). False when it holds no such call. */
  hangup(callId: string): Promise<boolean> {
    return dispatchCallCommand(this, { action: 'hangup', callId });
  }

  /** Shutdown: every call ends with a BYE. */
  async closeAll(reason: string): Promise<void> {
    await Promise.all([...this.calls.values()].map((call) => call.hangup(reason)));
  }
}
