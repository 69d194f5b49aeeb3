export { ErrorCode, ERROR_CODES, isErrorCode } from './error-codes.js';
export {
  FencedError,
  InvalidRequestError,
  UnauthorizedError,
  LockedError,
  QuorumUnavailableError,
  LeaseLostError,
  StaleTokenError,
  MissingTokenError,
  InvalidProofError,
  ServiceUnreachableError,
  InternalError,
  isFencedError,
} from './errors.js';
export type { StaleTokenDetails } from './errors.js';
export {
  MIN_TOKEN,
  MAX_TOKEN,
  FENCING_TOKEN_HEADER,
  FENCING_LEASE_ID_HEADER,
  FENCING_PROOF_HEADER,
  IDEMPOTENCY_KEY_HEADER,
  parseToken,
  assertToken,
  formatToken,
} from './token.js';
export { MAX_RESOURCE_BYTES, validateResourceName } from './resource.js';
export type { InvalidProofReason } from './errors.js';
export {
  PROOF_VERSION,
  PROOF_PATTERN,
  KEY_ID_PATTERN,
  MAX_PROOF_LENGTH,
  leaseIdDigest,
  proofMessage,
  signProof,
  decodeProof,
  verifyProof,
  validateKeyId,
  ed25519PrivateKey,
  ed25519PublicKey,
} from './proof.js';
export type { ProofClaims, DecodedProof } from './proof.js';
export type {
  FencedLease,
  FencedMultiLease,
  MultiAcquireRequestBody,
  MultiLeaseResponseBody,
  AcquireRequestBody,
  ExtendRequestBody,
  LeaseResponseBody,
  LockStatusBody,
  ErrorBody,
} from './lease.js';
export { fencesOf } from './lease.js';
export { HTTP_STATUS_BY_CODE } from './http-status.js';
export { toHttpError, RETRY_AFTER_SECONDS } from './http-errors.js';
export type { HttpError, HttpErrorOptions } from './http-errors.js';
export {
  describeValue,
  invalidValue,
  assertInteger,
  assertNumber,
  assertBoolean,
  assertOneOf,
  assertMatches,
  mergeOptions,
  rejectMisnamedOptions,
  suggestOption,
} from './validation.js';
export type { NumberRange } from './validation.js';
