// Comparisons the benchmark page and its runner both make (served to the
// page as /bench/page/compare.mjs, imported by bench/runners/run.mjs from disk).

/** The published logit_cost study's typical criterion: 45 suffix tokens. */
export const TYPICAL = 45;

export const maxAbsDiff = (a, b) => a.reduce((w, x, i) => Math.max(w, Math.abs(x - b[i])), 0);

/** A fitted line's cost of a 45-token criterion, in ms. */
export const cost45 = (fit) => fit.fixed_ms + fit.per_token_ms * TYPICAL;

/** How many times faster `fast` is than `slow` at a 45-token criterion, read off both fitted lines. */
export const fitRatio = (slow, fast) =>
  slow && fast ? cost45(slow) / cost45(fast) : null;
