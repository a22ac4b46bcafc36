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
