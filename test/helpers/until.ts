/** Waiting in tests: one `sleep` and one `until` for every test that polls the database, a page or a socket. */

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Resolves with `check`'s first defined answer, asked every 50 ms; rejects after `ms`. */
export async function until<T>(what: string, check: () => Promise<T | undefined> | T | undefined, ms = 30_000) {
  for (const deadline = Date.now() + ms; Date.now() < deadline;) {
    const found = await check();
    if (found !== undefined) return found;
    await sleep(50);
  }
  throw new Error(`timed out waiting for ${what}`);
}

/**
 * Resolves once `check` holds, asked every `everyMs` (default 50; 1 for a check that counts a stream of packets
 * exactly); rejects after `timeoutMs` (default 30 s), naming what never came.
 */
export async function untilTrue(
  what: string,
  check: () => boolean | Promise<boolean>,
  options: { timeoutMs?: number; everyMs?: number } = {},
): Promise<void> {
  const { timeoutMs = 30_000, everyMs = 50 } = options;
  for (const deadline = Date.now() + timeoutMs; !(await check());) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await sleep(everyMs);
  }
}
