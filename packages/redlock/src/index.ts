export { Redlock, Redlock as default, DEFAULT_REDLOCK_SETTINGS, REDLOCK_MAX_TTL_MS } from './redlock.js';
export type { Settings, FencedSettings, RedlockAbortSignal } from './redlock.js';
export { Lock } from './lock.js';
export { ExecutionError, ResourceLockedError } from './errors.js';
export type { Client, ExecutionStats, ExecutionResult } from './errors.js';
