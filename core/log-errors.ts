/**
 * How errors appear in log lines: type, message, code and stack only. pino's default serializer copies every
 * enumerable property, and some errors carry objects that hold connection settings (a pg pool's error has its
 * `client`), which must never reach a log line.
 */
export function errorForLog(error: unknown): { type: string; message: string; stack: string; [key: string]: unknown } {
  if (!(error instanceof Error)) return { type: typeof error, message: String(error), stack: '' };
  const code = (error as { code?: unknown }).code;
  return {
    type: error.name,
    message: error.message,
    ...(typeof code === 'string' || typeof code === 'number' ? { code } : {}),
    stack: error.stack ?? '',
  };
}
