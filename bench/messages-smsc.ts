/**
 * The messages bench's SMPP side (bench/messages.ts): the SMSC in a process of its own (bench/smsc-process.ts) and
 * the baseline, that SMSC fed directly by the `smpp` package's client with the window our link keeps, so the
 * figures of the service are read against what the SMSC and the SMPP codec take on this host in the same run.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import smpp from 'smpp';
import { percentile } from './engine-process.ts';

export interface SmscReport {
  submits: number;
  distinct: number;
  /** When each destination's first `submit_sm` was answered (ms since the epoch). */
  answeredAt: Record<string, number>;
}

export interface SmscProcess {
  child: ChildProcess;
  pid: number;
  port: number;
  report(): Promise<SmscReport>;
  stop(): Promise<void>;
}

export async function startSmsc(): Promise<SmscProcess> {
  const child = fork(fileURLToPath(new URL('./smsc-process.ts', import.meta.url)), {
    execArgv: ['--import=tsx'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const next = <T>(type: string) =>
    new Promise<T>((resolve, reject) => {
      const listener = (message: { type: string }) => {
        if (message.type !== type) return;
        child.off('message', listener);
        child.off('exit', exited);
        resolve(message as T);
      };
      const exited = (code: number | null) => reject(new Error(`the SMSC process exited (${code})`));
      child.on('message', listener);
      child.once('exit', exited);
    });
  const { port } = await next<{ port: number }>('ready');
  return {
    child,
    pid: child.pid as number,
    port,
    report() {
      const answer = next<SmscReport>('report');
      child.send({ type: 'report' });
      return answer;
    },
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exit = once(child, 'exit');
      child.send({ type: 'stop' });
      const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exit;
      clearTimeout(timer);
    },
  };
}

/** The destination of the bench's message `index` (NANP, exchange 2xx: valid for libphonenumber), digits only. */
export function destination(index: number): string {
  return `14152${String(index).padStart(6, '0')}`;
}

export interface BaselineFigures {
  messages: number;
  seconds: number;
  perSecond: number;
  /** From `submit_sm` written to its answer read, ms. */
  p50: number;
  p99: number;
}

/**
 * `total` one-part texts from one bound transceiver of the `smpp` package's client to the SMSC on `port`, at most
 * `window` unanswered, with the fields our link sends (TON 1 NPI 1, registered_delivery 1, GSM data coding), to the
 * destinations `destination(first)` onwards.
 */
export async function feedDirectly(port: number, total: number, window: number, first = 0): Promise<BaselineFigures> {
  let connected: () => void = () => {};
  const connecting = new Promise<void>((resolve) => (connected = resolve));
  const session = smpp.connect({ url: `smpp://127.0.0.1:${port}` }, () => connected());
  session.on('error', () => {});
  await connecting;
  const bound = await new Promise<number>((resolve) =>
    session.bind_transceiver({ system_id: 'switchboard', password: 'secret', system_type: 'sb' }, (pdu) =>
      resolve(pdu.command_status),
    ),
  );
  if (bound !== 0) throw new Error(`the baseline client was refused its bind (${bound})`);
  const latencies: number[] = [];
  const started = performance.now();
  let sent = 0;
  let failed = 0;
  await new Promise<void>((resolve) => {
    let answered = 0;
    const submit = () => {
      const index = first + sent;
      sent += 1;
      const at = performance.now();
      session.submit_sm(
        {
          source_addr_ton: 1,
          source_addr_npi: 1,
          source_addr: '33900000001',
          dest_addr_ton: 1,
          dest_addr_npi: 1,
          destination_addr: destination(index),
          registered_delivery: 1,
          data_coding: 0,
          short_message: Buffer.from(`Bench message ${index}`),
        },
        (pdu) => {
          latencies.push(performance.now() - at);
          if (pdu.command_status !== 0) failed += 1;
          answered += 1;
          if (answered === total) resolve();
          else if (sent < total) submit();
        },
      );
    };
    for (let i = 0; i < Math.min(window, total); i += 1) submit();
  });
  const seconds = (performance.now() - started) / 1000;
  await new Promise<void>((resolve) => {
    session.unbind({}, () => resolve());
    setTimeout(resolve, 1_000).unref();
  });
  session.destroy();
  if (failed > 0) throw new Error(`the SMSC refused ${failed} of the baseline's submits`);
  return {
    messages: total,
    seconds,
    perSecond: total / seconds,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
  };
}
