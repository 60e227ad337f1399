// Where an axis puts its ticks: round steps (1, 2 or 5 times a power of ten) from zero up to
// a little past the largest value, so the labels are short and the top bar has headroom.

/** Ticks from 0 to at least `max`, about `count` of them: [0, 250, 500, 750, 1000]; with
 *  `whole`, only whole-number steps (a count of seats is never 2.5). */
export function ticks(max, count = 4, { whole = false } = {}) {
  if (!(max > 0)) return [0, 1];
  const raw = whole ? Math.max(1, max / count) : max / count;
  const power = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * power)
    .find((s) => s >= raw && (!whole || Number.isInteger(s))) || 10 * power;
  const out = [];
  for (let i = 0; i * step < max + step * 0.999; i += 1) out.push(+(i * step).toPrecision(12));
  if (out.length < 2) out.push(step);
  return out;
}

/** Every how many of `n` evenly spaced slots a label of `labelWidth` px fits in `width` px. */
export function labelEvery(n, width, labelWidth) {
  return Math.max(1, Math.ceil((n * labelWidth) / Math.max(1, width)));
}
