// A progress bar drawn as one element: its segments (a status's share of the tasks each, in order) as the stops of
// one gradient, given through the CSSOM (the Content-Security-Policy refuses style attributes). A count moving on
// paints the bar again and lays nothing out, where an element per segment was styled and laid out anew each time.
// Pure: frontend/tests/bar_image.test.mjs.

/** `parts`: `[count, colour]` in order (colour: a name of the palette, `--green`...); "none" when they count none. */
export function barImage(parts) {
  const total = parts.reduce((n, [k]) => n + k, 0);
  if (!total) return "none";
  let at = 0;
  const stops = parts.filter(([k]) => k > 0).map(([k, colour]) => {
    const from = at;
    at += k;
    return `var(--${colour}) ${percent(from / total)} ${percent(at / total)}`;
  });
  return `linear-gradient(to right, ${stops.join(", ")})`;
}

/** A share as a percentage of at most two decimals, the last stop exactly 100%. */
const percent = (share) => `${Number((share * 100).toFixed(2))}%`;
