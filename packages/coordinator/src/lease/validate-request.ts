/**
 * The checks of every request a `Coordinator` takes (acquire, tryAcquire, using, extend and release by id), made
 * before anything is sent to a node: the resource names, the options and the numbers. Each failure is an
 * InvalidRequestError naming the field, what was given and what is allowed. The ttl bounds and the key layout are
 * read from the settings the coordinator runs with at the time of the call (they can change once, at `ready()` with
 * `clusterSettings: 'adopt'`), so every function takes them as its first argument.
 */
import { InvalidRequestError, rejectMisnamedOptions, validateResourceName } from '@fenced/shared';
import type { AttemptReport, AttemptReportOptions } from './attempt-report.js';
import type { AcquireOptions, LeaseWatchOptions } from './lease-watch.js';
import { validateResourceList } from './multi-lease.js';
import { integer, MAX_TIMER_MS, smallestUsableTtlMs, type CoordinatorSettings } from '../options.js';
import { redlockKeySlotSplit, resourceNameClash } from '../keys/key-layout.js';

/**
 * The settings a request is checked against: the coordinator's, and whether one of its nodes is a Redis Cluster
 * member (DESIGN §3c), where one script's keys must share a slot.
 */
export type RequestSettings = Readonly<CoordinatorSettings> & { readonly clusterMember?: boolean };

type Settings = RequestSettings;

/** An acquire or tryAcquire request that passed every check. */
export interface AcquireRequest {
  /** One resource, or a set of them in lock order (sorted, without repeats). */
  readonly resources: string | readonly string[];
  readonly ttlMs: number;
  /** 0 for a tryAcquire. */
  readonly waitMs: number;
  /** A tryAcquire: not granted is `null`, not a LockedError. */
  readonly tryOnly: boolean;
  readonly signal: AbortSignal | undefined;
  readonly watch: LeaseWatchOptions;
  readonly onAttempt: ((report: AttemptReport) => void) | undefined;
}

/** The acquire options: a key that only looks like one of them (`ttl`, `waitms`) is refused with the name meant. */
const ACQUIRE_OPTION_NAMES = ['ttlMs', 'waitMs', 'signal', 'autoExtend', 'onLost', 'onAttempt'] as const;

const LEASE_ID = /^[A-Za-z0-9_-]{16,128}$/;

/**
 * Checks an acquire (`allowWait`) or a tryAcquire: the resource (or the set, returned in lock order), then the
 * options.
 */
export function validateAcquire(
  settings: Settings,
  resources: string | readonly string[],
  options: AcquireOptions & AttemptReportOptions,
  allowWait: boolean,
): AcquireRequest {
  const checked = validateResources(settings, resources);
  if (typeof options !== 'object' || options === null) {
    throw new InvalidRequestError('acquire options must be an object with ttlMs');
  }
  rejectMisnamedOptions('acquire', options, ACQUIRE_OPTION_NAMES);
  validateTtl(settings, options.ttlMs);
  const rawWait: unknown = options.waitMs;
  if (!allowWait && rawWait !== undefined)
    throw new InvalidRequestError('tryAcquire does not wait: drop waitMs');
  const waitMs = rawWait === undefined ? 0 : integer('waitMs', rawWait, { min: 0, max: MAX_TIMER_MS });
  const signal: unknown = options.signal;
  if (signal !== undefined && !(signal instanceof AbortSignal)) {
    throw new InvalidRequestError('signal must be an AbortSignal');
  }
  const { autoExtend, onLost } = options as { autoExtend?: unknown; onLost?: unknown };
  if (autoExtend !== undefined && typeof autoExtend !== 'boolean') {
    throw new InvalidRequestError('autoExtend must be true or false');
  }
  if (onLost !== undefined && typeof onLost !== 'function') {
    throw new InvalidRequestError('onLost must be a function');
  }
  const onAttempt: unknown = options.onAttempt;
  if (onAttempt !== undefined && typeof onAttempt !== 'function') {
    throw new InvalidRequestError(
      `onAttempt must be a function (or left out), got ${onAttempt === null ? 'null' : typeof onAttempt}`,
    );
  }
  return {
    resources: checked,
    ttlMs: options.ttlMs,
    waitMs,
    tryOnly: !allowWait,
    signal,
    watch: { autoExtend: autoExtend === true, ...(onLost ? { onLost: options.onLost! } : {}) },
    onAttempt: options.onAttempt,
  };
}

/** One resource name, or a set of them (returned in lock order, see `validateResourceList`). */
export function validateResources(
  settings: Settings,
  resources: string | readonly string[],
): string | string[] {
  if (Array.isArray(resources))
    return validateResourceList(resources, (name) => validateResource(settings, name));
  return validateResource(settings, resources);
}

/**
 * A valid resource name that is not inside this coordinator's own namespace when the lease key is the resource name
 * (keyLayout `'redlock'`, or `holdRedlockKey`), and, with `holdRedlockKey` on a Redis Cluster member, whose name
 * key shares the slot of its `'fenced'` record (keys/key-layout.ts, redlockKeySlotSplit).
 */
export function validateResource(settings: Settings, resource: unknown): string {
  const name = validateResourceName(resource);
  const { keyPrefix, keyLayout, holdRedlockKey } = settings;
  if (resourceNameClash(keyPrefix, name, keyLayout, holdRedlockKey)) {
    throw new InvalidRequestError(
      `resource must not start with "${keyPrefix}:" under keyLayout '${keyLayout}'` +
        `${keyLayout === 'redlock' ? '' : ' with holdRedlockKey'} (the lease key is the ` +
        `resource name itself, and that namespace holds the coordinator's own keys), got "${name.slice(0, 80)}" (string)`,
    );
  }
  if (settings.clusterMember === true && redlockKeySlotSplit(keyPrefix, name, keyLayout, holdRedlockKey)) {
    throw new InvalidRequestError(
      `resource "${name.slice(0, 80)}" cannot be locked with holdRedlockKey on a Redis Cluster member under ` +
        `keyLayout 'fenced': its own hash tag or a '{', '}' or '%' in it puts node-redlock's key (the resource name) ` +
        `in another cluster slot than the lease's record "${keyPrefix}:{…}:lease", and one script touches one slot. ` +
        `Use a name without them, or a cluster initialized with keyLayout 'redlock'`,
    );
  }
  return name;
}

/** An integer ttl from the smallest one that can leave any validity up to the cluster's maxTtlMs. */
export function validateTtl(settings: Settings, ttlMs: unknown): asserts ttlMs is number {
  integer('ttlMs', ttlMs, { min: smallestUsableTtlMs(settings), max: settings.maxTtlMs });
}

/** A lease id as `newLeaseId` makes them (lease-ids.ts), within the lengths a caller may bring. */
export function validateLeaseId(leaseId: unknown): asserts leaseId is string {
  if (typeof leaseId !== 'string' || !LEASE_ID.test(leaseId)) {
    throw new InvalidRequestError('leaseId must be 16 to 128 characters of base64url (A-Z a-z 0-9 _ -)');
  }
}
