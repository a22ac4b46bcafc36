/**
 * What the service logs through: pino's logger (app/roles.ts makes it, each role a child of it) fits, and a test
 * passes an object with the methods the code it runs calls (`Pick<Log, 'info' | 'warn'>` where no more is needed).
 */
export interface Log {
  info(object: object, message: string): void;
  warn(object: object, message: string): void;
  debug(object: object, message: string): void;
}
