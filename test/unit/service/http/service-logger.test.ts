import { UnsafeNodeError } from '@fenced/coordinator';
import { describe, expect, it } from 'vitest';
import { safeError } from '../../../../packages/service/src/http/request-log.js';
import { createServiceLogger } from '../../../../packages/service/src/http/service-logger.js';

describe('the service log', () => {
  it('stamps every line with its time in ISO 8601 (UTC), not epoch milliseconds', () => {
    const lines: string[] = [];
    const logger = createServiceLogger({ destination: { write: (line) => void lines.push(line) } });
    const before = Date.now();
    logger.info('started');
    const { time } = JSON.parse(lines[0]!) as { time: unknown };
    expect(time).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(Date.parse(time as string)).toBeGreaterThanOrEqual(before - 1);
  });

  it("prints an error's real type on the fatal start-up line, as server.ts logs it", () => {
    const lines: string[] = [];
    const logger = createServiceLogger({
      level: 'info',
      destination: { write: (line) => void lines.push(line) },
    });
    const error = new UnsafeNodeError([
      { node: 1, address: '127.0.0.1:7001', problems: ["appendfsync is 'no'"] },
    ]);
    logger.fatal({ err: safeError(error) }, 'could not start');
    logger.error({ err: new RangeError('out of range') }, 'an Error logged as it is');
    const [fatal, plain] = lines.map(
      (line) => JSON.parse(line) as { err: { type: string; code?: string; message: string } },
    );
    expect(fatal!.err).toMatchObject({ type: 'UnsafeNodeError', code: 'UNSAFE_NODE' });
    expect(fatal!.err.message).toContain("appendfsync is 'no'");
    expect(plain!.err).toMatchObject({ type: 'RangeError', message: 'out of range' });
  });
});
