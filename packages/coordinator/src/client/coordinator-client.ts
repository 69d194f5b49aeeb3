// The HTTP client of the coordinator service: the public API (one resource and several, each with its overloads and
// JSDoc), the request loop with its retries, and the keepers of auto-extended leases. Just over 400 lines for that
// reason; the response parsing (lease-responses.ts), error mapping (response-errors.ts), the keep-alive loop
// (keep-alive.ts) and the lease objects (client-lease.ts, client-multi-lease.ts) live beside it.
import type { LeaseLostError } from '@fenced/shared';
import {
  assertInteger,
  assertMatches,
  describeValue,
  ErrorCode,
  InternalError,
  InvalidRequestError,
  mergeOptions,
  ServiceUnreachableError,
  isFencedError,
  parseToken,
  validateResourceName,
  type LockStatusBody,
} from '@fenced/shared';
import { closeAllWatches, type AcquireOptions, type LeaseWatch } from '../lease/lease-watch.js';
import { lockOrder, MAX_LEASE_RESOURCES } from '../lease/multi-lease.js';
import { ClientLease, type LeaseCalls, type ReportedGrant } from './client-lease.js';
import { ClientMultiLease, type MultiLeaseCalls, type ReportedMultiGrant } from './client-multi-lease.js';
import { sleep } from './abortable-sleep.js';
import { readBody, toGrant, toMultiGrant } from './lease-responses.js';
import { errorFromResponse, networkFailure } from './response-errors.js';

/** Options of {@link CoordinatorClient}. */
export interface CoordinatorClientOptions {
  /** Base URL of the service, e.g. `http://coordinator:8080`. */
  baseUrl: string | URL;
  /** Sent as `Authorization: Bearer <apiKey>`. */
  apiKey?: string;
  /**
   * The fetch implementation.
   * @defaultValue `globalThis.fetch`
   */
  fetch?: typeof fetch;
  /**
   * Attempts per call when the service answers 503 (no quorum), and for extend, release and inspect also
   * when it cannot be reached. More attempts ride out longer outages but delay the caller's error.
   * @defaultValue 4
   */
  maxAttempts?: number;
  /**
   * Base of the exponential backoff between attempts; each delay is drawn at random below the bound.
   * @defaultValue 100
   */
  retryBaseDelayMs?: number;
  /**
   * Cap of one backoff delay.
   * @defaultValue 2000
   */
  retryMaxDelayMs?: number;
  /**
   * Bound of one HTTP request, on top of the `waitMs` of an acquire.
   * @defaultValue 10000
   */
  requestTimeoutMs?: number;
}

/** The options without a default: `baseUrl` is required, `apiKey` and `fetch` optional. */
const CLIENT_REQUIRED_OPTIONS = ['baseUrl', 'apiKey', 'fetch'];
/** Largest delay or timeout: what a Node.js timer can hold (about 24.8 days). */
const MAX_CLIENT_DELAY_MS = 2_147_483_647;

/** `baseUrl` as a URL, when it is an http:// or https:// URL (a string or a URL object). */
function baseUrlOf(value: unknown): URL {
  // Credentials in a URL given by mistake (redis://:password@host) are not echoed.
  const refuse = (): never => {
    throw new InvalidRequestError(
      `baseUrl must be the http:// or https:// URL of the coordinator service (e.g. 'http://coordinator:8080'), got ${describeValue(typeof value === 'string' ? value.replace(/\/\/[^/@]*@/, '//…@') : value)}`,
    );
  };
  let url: URL | undefined;
  if (value instanceof URL) url = new URL(value.href);
  else if (typeof value === 'string' && URL.canParse(value)) url = new URL(value);
  if (url === undefined || (url.protocol !== 'http:' && url.protocol !== 'https:') || url.hostname === '') {
    return refuse();
  }
  return url;
}

/** Defaults of the {@link CoordinatorClientOptions} that have one. */
export const DEFAULT_CLIENT_OPTIONS = Object.freeze({
  maxAttempts: 4,
  retryBaseDelayMs: 100,
  retryMaxDelayMs: 2_000,
  requestTimeoutMs: 10_000,
} satisfies Required<Omit<CoordinatorClientOptions, 'baseUrl' | 'apiKey' | 'fetch'>>);

/**
 * Options of {@link CoordinatorClient.using}: it keeps the lease itself, so no `autoExtend` or `onLost` (the
 * signal handed to `fn` reports the loss).
 */
export type UsingOptions = Omit<AcquireOptions, 'autoExtend' | 'onLost'>;

/** Who holds a resource, as a majority of nodes sees it. */
export interface LockStatus {
  held: boolean;
  token?: bigint;
}

type Retry = 'on-503' | 'on-503-and-network';

/**
 * Typed client of the coordinator service (DESIGN §5), on the global `fetch`. Errors are the classes of
 * `@fenced/shared`, chosen by the error body's code; tokens are `bigint`.
 *
 * @example
 * A lease over HTTP, kept extended while the work runs, its token sent with the write it protects:
 * ```ts
 * import { CoordinatorClient } from '@fenced/coordinator/client';
 *
 * const client = new CoordinatorClient({
 *   baseUrl: 'http://127.0.0.1:8080', // where fenced-coordinator listens
 *   apiKey: process.env.FENCED_API_KEY, // when the service has FENCED_API_KEYS
 * });
 * try {
 *   await client.using('invoice:42', { ttlMs: 10_000, waitMs: 5_000 }, async (lease, signal) => {
 *     await fetch('http://127.0.0.1:3000/invoices/42', {
 *       method: 'PUT',
 *       headers: { 'Fencing-Token': lease.token.toString(), 'Fencing-Lease-Id': lease.id },
 *       body: JSON.stringify({ total: 52 }),
 *       signal, // aborted when the lease is lost
 *     });
 *   });
 * } finally {
 *   client.close(); // stops keeping the leases it still keeps
 * }
 * ```
 */
export class CoordinatorClient {
  readonly #base: URL;
  readonly #headers: Record<string, string>;
  readonly #fetch: typeof fetch;
  readonly #settings: typeof DEFAULT_CLIENT_OPTIONS;
  readonly #calls: LeaseCalls;
  readonly #multiCalls: MultiLeaseCalls;
  /** Watches of this client's leases that hold a timer: `close()` stops them. */
  readonly #watches = new Set<LeaseWatch>();

  /**
   * Validates every option at once, as `Coordinator` does.
   * @throws InvalidRequestError naming the option, what was given (with its type) and what is allowed: a missing
   *   or non-http(s) `baseUrl`, an unknown option (e.g. `apikey`), a bad number.
   */
  constructor(options: CoordinatorClientOptions) {
    const merged = mergeOptions(
      'CoordinatorClient',
      DEFAULT_CLIENT_OPTIONS,
      options,
      CLIENT_REQUIRED_OPTIONS,
    );
    const base = baseUrlOf(merged.baseUrl);
    if (!base.pathname.endsWith('/')) base.pathname += '/';
    this.#base = base;
    const apiKey =
      merged.apiKey === undefined
        ? undefined
        : assertMatches(
            'apiKey',
            merged.apiKey,
            /^[\x21-\x7e]+$/,
            'a non-empty string of visible ASCII characters',
          );
    this.#headers = {
      accept: 'application/json',
      ...(apiKey !== undefined ? { authorization: `Bearer ${apiKey}` } : {}),
    };
    if (merged.fetch !== undefined && typeof merged.fetch !== 'function') {
      throw new InvalidRequestError(`fetch must be a fetch function, got ${describeValue(merged.fetch)}`);
    }
    this.#fetch = (merged.fetch as typeof fetch | undefined) ?? globalThis.fetch.bind(globalThis);
    const delay = { min: 0, max: MAX_CLIENT_DELAY_MS };
    this.#settings = Object.freeze({
      maxAttempts: assertInteger('maxAttempts', merged.maxAttempts, { min: 1, max: 1_000 }),
      retryBaseDelayMs: assertInteger('retryBaseDelayMs', merged.retryBaseDelayMs, delay),
      retryMaxDelayMs: assertInteger('retryMaxDelayMs', merged.retryMaxDelayMs, delay),
      requestTimeoutMs: assertInteger('requestTimeoutMs', merged.requestTimeoutMs, {
        min: 1,
        max: MAX_CLIENT_DELAY_MS,
      }),
    });
    this.#calls = {
      extendById: (resource, id, ttlMs, signal) => this.#extend(resource, id, ttlMs, signal),
      releaseById: (resource, id) => this.#release(resource, id),
    };
    this.#multiCalls = {
      extendManyById: (resources, id, ttlMs, signal) => this.#extendMany(resources, id, ttlMs, signal),
      releaseManyById: (resources, id) => this.#releaseMany(resources, id),
    };
  }

  /**
   * Acquires a lease, letting the server wait up to `waitMs` for it.
   * @throws LockedError when it was not granted within `waitMs`; QuorumUnavailableError when the service
   *   is up but no majority of its nodes could decide (after the retries); ServiceUnreachableError when the
   *   service itself could not be reached (connection refused, timed out); InvalidRequestError,
   *   UnauthorizedError.
   */
  async acquire(resource: string, options: AcquireOptions): Promise<ClientLease>;
  /**
   * Acquires one lease over several resources, all or nothing (`POST /v1/leases`): each resource with its own
   * token under one lease id. Repeated names are dropped; the lease lists them sorted.
   * @throws LockedError (naming the first resource; the message names the one that blocked) when not granted
   *   within `waitMs`; nothing is held then.
   */
  async acquire(resources: readonly string[], options: AcquireOptions): Promise<ClientMultiLease>;
  async acquire(
    resource: string | readonly string[],
    options: AcquireOptions,
  ): Promise<ClientLease | ClientMultiLease> {
    if (Array.isArray(resource)) return this.#acquireMany(resource, options);
    return this.#acquireOne(resource as string, options);
  }

  async #acquireOne(resource: string, options: AcquireOptions): Promise<ClientLease> {
    validateResourceName(resource);
    const waitMs = options.waitMs ?? 0;
    const { status, body, sentAt, receivedAt } = await this.#request({
      method: 'POST',
      path: leasesPath(resource),
      body: { ttlMs: options.ttlMs, waitMs },
      resource,
      // A lost reply to an acquire may have granted a lease we cannot name: never resend it blindly (the
      // server releases it when it notices the disconnect; otherwise it ends at its TTL).
      retry: 'on-503',
      timeoutMs: waitMs + this.#settings.requestTimeoutMs,
      signal: options.signal,
      expect: 201,
    });
    // Validity is counted from the grant. Without a wait the grant came after the request was sent; after a
    // wait it came shortly before the reply, and counting from the send would throw the wait away.
    return new ClientLease(this.#calls, toGrant(body, waitMs === 0 ? sentAt : receivedAt, status), {
      context: { retryDelayMs: this.#settings.retryBaseDelayMs, live: this.#watches },
      options: { autoExtend: options.autoExtend === true, ...watchCallback(options.onLost) },
    });
  }

  async #acquireMany(resources: readonly string[], options: AcquireOptions): Promise<ClientMultiLease> {
    if (!Array.isArray(resources) || resources.length === 0) {
      throw new InvalidRequestError('resources must be a non-empty array of resource names');
    }
    const names = lockOrder(resources.map((r: unknown) => validateResourceName(r)));
    if (names.length > MAX_LEASE_RESOURCES) {
      throw new InvalidRequestError(
        `a lease covers at most ${MAX_LEASE_RESOURCES} resources, got ${names.length}`,
      );
    }
    const waitMs = options.waitMs ?? 0;
    const { status, body, sentAt, receivedAt } = await this.#request({
      method: 'POST',
      path: 'v1/leases',
      body: { resources: names, ttlMs: options.ttlMs, waitMs },
      resource: names[0]!,
      retry: 'on-503',
      timeoutMs: waitMs + this.#settings.requestTimeoutMs,
      signal: options.signal,
      expect: 201,
    });
    return new ClientMultiLease(
      this.#multiCalls,
      toMultiGrant(body, waitMs === 0 ? sentAt : receivedAt, status),
      {
        context: { retryDelayMs: this.#settings.retryBaseDelayMs, live: this.#watches },
        options: { autoExtend: options.autoExtend === true, ...watchCallback(options.onLost) },
      },
    );
  }

  /** One attempt without waiting: `null` when somebody else holds the resource. */
  async tryAcquire(resource: string, options: Omit<AcquireOptions, 'waitMs'>): Promise<ClientLease | null>;
  /** One attempt over several resources without waiting: `null` when any of them is held (nothing is held then). */
  async tryAcquire(
    resources: readonly string[],
    options: Omit<AcquireOptions, 'waitMs'>,
  ): Promise<ClientMultiLease | null>;
  async tryAcquire(
    resource: string | readonly string[],
    options: Omit<AcquireOptions, 'waitMs'>,
  ): Promise<ClientLease | ClientMultiLease | null> {
    try {
      return Array.isArray(resource)
        ? await this.#acquireMany(resource, { ...options, waitMs: 0 })
        : await this.#acquireOne(resource as string, { ...options, waitMs: 0 });
    } catch (error) {
      if (isFencedError(error) && error.code === ErrorCode.LOCKED) return null;
      throw error;
    }
  }

  /**
   * Extends a lease (same token).
   * @throws LeaseLostError when it expired or another holder took the resource.
   */
  async extend(lease: ClientLease, ttlMs?: number): Promise<void> {
    await lease.extend(ttlMs);
  }

  /** Releases a lease; an expired one is released already, and that is a success. */
  async release(lease: ClientLease): Promise<void> {
    await lease.release();
  }

  /**
   * Stops extending the leases this client keeps (`autoExtend`) or watches: their signals abort with a
   * LeaseLostError and `onLost` runs. The leases are not released; they run out at their ttl. The client
   * itself holds nothing else and stays usable.
   */
  close(): void {
    closeAllWatches(this.#watches, new Error('the coordinator client was closed'));
  }

  /** Whether the resource is held, and by which token. */
  async inspect(resource: string, options: { signal?: AbortSignal } = {}): Promise<LockStatus> {
    validateResourceName(resource);
    const { body } = await this.#request({
      method: 'GET',
      path: `v1/locks/${encodeURIComponent(resource)}`,
      resource,
      retry: 'on-503-and-network',
      timeoutMs: this.#settings.requestTimeoutMs,
      signal: options.signal,
      expect: 200,
    });
    const status = body as Partial<LockStatusBody> | null;
    if (typeof status?.held !== 'boolean')
      throw new InternalError('malformed lock status from the coordinator');
    return status.token === undefined
      ? { held: status.held }
      : { held: status.held, token: parseToken(status.token) };
  }

  /**
   * Runs `fn` while holding the lease, extending it in the background before it runs out. When an extension
   * fails for good (the lease was lost, or it ran out while the service was unreachable) the signal handed
   * to `fn` is aborted with a `LeaseLostError`: stop work then, and keep every write behind the guard. The
   * lease is always released afterwards; `fn`'s error is what `using` throws, never a release error.
   */
  async using<T>(
    resource: string,
    options: UsingOptions,
    fn: (lease: ClientLease, signal: AbortSignal) => Promise<T>,
  ): Promise<T> {
    const lease = await this.#acquireOne(resource, { ...options, autoExtend: true });
    const signal =
      options.signal === undefined ? lease.signal : AbortSignal.any([lease.signal, options.signal]);
    try {
      return await fn(lease, signal);
    } finally {
      // Releasing stops the keeper before anything is sent. A failed release is not reported: the lease ends at
      // its TTL, and hiding fn's outcome behind it would be worse.
      await lease.release().catch(() => undefined);
    }
  }

  async #extend(
    resource: string,
    leaseId: string,
    ttlMs: number,
    signal?: AbortSignal,
  ): Promise<ReportedGrant> {
    const { body, sentAt, status } = await this.#request({
      method: 'POST',
      path: `${leasePath(resource, leaseId)}/extend`,
      body: { ttlMs },
      resource,
      retry: 'on-503-and-network',
      timeoutMs: this.#settings.requestTimeoutMs,
      signal,
      expect: 200,
    });
    return toGrant(body, sentAt, status);
  }

  async #extendMany(
    resources: readonly string[],
    leaseId: string,
    ttlMs: number,
    signal?: AbortSignal,
  ): Promise<ReportedMultiGrant> {
    const { body, sentAt, status } = await this.#request({
      method: 'POST',
      path: `v1/leases/${encodeURIComponent(leaseId)}/extend`,
      body: { resources, ttlMs },
      resource: resources[0]!,
      retry: 'on-503-and-network',
      timeoutMs: this.#settings.requestTimeoutMs,
      signal,
      expect: 200,
    });
    return toMultiGrant(body, sentAt, status);
  }

  async #releaseMany(resources: readonly string[], leaseId: string): Promise<void> {
    await this.#request({
      method: 'DELETE',
      path: `v1/leases/${encodeURIComponent(leaseId)}`,
      body: { resources },
      resource: resources[0]!,
      retry: 'on-503-and-network',
      timeoutMs: this.#settings.requestTimeoutMs,
      expect: 204,
    });
  }

  async #release(resource: string, leaseId: string): Promise<void> {
    await this.#request({
      method: 'DELETE',
      path: leasePath(resource, leaseId),
      resource,
      retry: 'on-503-and-network',
      timeoutMs: this.#settings.requestTimeoutMs,
      expect: 204,
    });
  }

  async #request(call: {
    method: 'GET' | 'POST' | 'DELETE';
    path: string;
    body?: unknown;
    resource: string;
    retry: Retry;
    timeoutMs: number;
    signal?: AbortSignal | undefined;
    expect: number;
  }): Promise<{ status: number; body: unknown; sentAt: number; receivedAt: number }> {
    const url = new URL(call.path, this.#base);
    for (let attempt = 1; ; attempt++) {
      call.signal?.throwIfAborted();
      const timeout = AbortSignal.timeout(call.timeoutMs);
      const signal = call.signal ? AbortSignal.any([call.signal, timeout]) : timeout;
      const sentAt = performance.now();
      let response: Response;
      try {
        response = await this.#fetch(url, {
          method: call.method,
          headers:
            call.body === undefined
              ? this.#headers
              : { ...this.#headers, 'content-type': 'application/json' },
          ...(call.body === undefined ? {} : { body: JSON.stringify(call.body) }),
          signal,
        });
      } catch (error) {
        if (call.signal?.aborted) throw call.signal.reason;
        if (call.retry === 'on-503-and-network' && attempt < this.#settings.maxAttempts) {
          await this.#backoff(attempt, call.signal);
          continue;
        }
        const reason = timeout.aborted ? `timed out after ${call.timeoutMs} ms` : networkFailure(error);
        throw new ServiceUnreachableError(
          `could not reach the coordinator service at ${this.#base.origin}: ${reason}` +
            ` (${attempt === 1 ? '1 attempt' : `${attempt} attempts`}); is it running, and is baseUrl right?`,
          this.#base.origin,
          attempt,
          { cause: error },
        );
      }
      const receivedAt = performance.now();
      const body = await readBody(response);
      if (response.status === call.expect) return { status: response.status, body, sentAt, receivedAt };
      const error = errorFromResponse(response.status, body, call.resource);
      if (error.code === ErrorCode.QUORUM_UNAVAILABLE && attempt < this.#settings.maxAttempts) {
        await this.#backoff(attempt, call.signal);
        continue;
      }
      throw error;
    }
  }

  /** Full jitter: a random delay below an exponentially growing, capped bound. */
  async #backoff(attempt: number, signal: AbortSignal | undefined): Promise<void> {
    const bound = Math.min(
      this.#settings.retryMaxDelayMs,
      this.#settings.retryBaseDelayMs * 2 ** (attempt - 1),
    );
    await sleep(Math.random() * bound, signal);
  }
}

function leasesPath(resource: string): string {
  return `v1/locks/${encodeURIComponent(resource)}/leases`;
}

function leasePath(resource: string, leaseId: string): string {
  return `${leasesPath(resource)}/${encodeURIComponent(leaseId)}`;
}

function watchCallback(onLost: unknown): { onLost?: (error: LeaseLostError) => void } {
  if (onLost === undefined) return {};
  if (typeof onLost !== 'function') throw new InvalidRequestError('onLost must be a function');
  return { onLost: onLost as (error: LeaseLostError) => void };
}
