/** The longest delay a Node.js timer holds (about 24.8 days); a longer wait is armed in steps. */
export const MAX_TIMER_MS = 2_147_483_647;
