import test from 'ava';
import { errorForLog } from '../../core/log-errors.ts';

test('an error is logged with its type, message, code and stack only, never the objects it carries', (t) => {
  const error = Object.assign(new Error('terminating connection'), {
    code: '57P01',
    client: { connectionParameters: { password: 'hunter2-secret' } },
  });
  const logged = errorForLog(error);
  t.like(logged, { type: 'Error', message: 'terminating connection', code: '57P01' });
  t.false(JSON.stringify(logged).includes('hunter2-secret'));
  t.deepEqual(Object.keys(logged).sort(), ['code', 'message', 'stack', 'type']);
  t.like(errorForLog('plain text'), { message: 'plain text' });
});
