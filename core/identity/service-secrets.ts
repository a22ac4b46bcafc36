/** The `service_secrets` table: the service's own master secret, generated once and shared by every process. */
import type { Queryable } from '../database.ts';

/** The stored secret `name`, stored as `generated` first if there is none yet (the first process to ask wins). */
export async function storedSecret(db: Queryable, name: string, generated: string): Promise<string> {
  await db.query('INSERT INTO service_secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING', [
    name,
    generated,
  ]);
  const result = await db.query<{ value: string }>('SELECT value FROM service_secrets WHERE name = $1', [name]);
  return (result.rows[0] as { value: string }).value;
}
