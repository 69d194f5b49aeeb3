import { ErrorCode, FencedError } from '@fenced/shared';

/**
 * A command line the `fenced-coordinator` command cannot run: an unknown command or flag, a missing or bad
 * argument, a bad environment variable. The message says what was wrong, what was given and what is allowed;
 * the command prints it with the usage and exits with code 2.
 */
export class UsageError extends FencedError {
  override readonly name: string = 'UsageError';

  constructor(
    message: string,
    /** The command whose usage to print, or undefined for the command list. */
    readonly command?: string,
  ) {
    super(ErrorCode.INVALID_REQUEST, message);
  }
}
