// The Submissions page's columns of one's own: which show, in what order, how wide (the Columns control and the
// headers' resize handles), and the named views that keep them with the filters and sort on the server
// (/api/teams/{id}/views), so they follow the person to another browser.
import { esc, formDialog, send, showResult, toast } from "./ui.js";

const MIN = 40, MAX = 800, STEP = 16; // px, the server's bounds (gateway.core.saved_views)

// Shown by default: the columns whose words all fit at 1,400 px; the instance type's numbers (CORES, MEMORY,
// PREEMPTIBLE) are a click away in Columns.
const HIDDEN_BY_DEFAULT = new Set(["cores", "memory_gb", "preemptible"]);

/** The page's own columns, in its order, at its own widths. */
export const defaultColumns = (columns) => columns.filter(([key]) => !HIDDEN_BY_DEFAULT.has(key)).map(([key]) => ({ key, width: null }));

/** Show the columns in `shown`'s order, hide the rest (in the header, when given, and in `rows`); widths through the CSSOM (the CSP refuses style attributes). */
export function arrange(headRow, rows, shown) {
  const order = shown.map((c) => c.key);
  const place = (tr, tag) => {
    const cells = new Map([...tr.children].map((el) => [el.dataset.col, el]));
    const ordered = [...order.map((k) => cells.get(k)), ...[...cells.keys()].filter((k) => !order.includes(k)).map((k) => cells.get(k))];
    ordered.forEach((el, i) => { if (tr.children[i] !== el) tr.insertBefore(el, tr.children[i] || null); el.hidden = !order.includes(el.dataset.col); });
    if (tag === "th") for (const c of shown) cells.get(c.key).style.width = c.width ? `${c.width}px` : "";
  };
  if (headRow) place(headRow, "th");
  for (const tr of rows) place(tr, "td");
}

/** The Columns control: a checkbox to show each column, Move up / Move down for its place (keyboard and mouse). */
export function columnsPanel(columns, shown) {
  const at = new Map(shown.map((c, i) => [c.key, i]));
  const all = [...shown.map((c) => columns.find(([k]) => k === c.key)), ...columns.filter(([k]) => !at.has(k))];
  return all.map(([k, label], i) => `<li data-col="${k}"><label><input type="checkbox" data-show="${k}" ${at.has(k) ? "checked" : ""}> ${esc(label)}</label>
    <button type="button" data-move="-1" data-key="${k}" aria-label="Move ${esc(label)} up" ${i === 0 || !at.has(k) ? "disabled" : ""}>↑</button>
    <button type="button" data-move="1" data-key="${k}" aria-label="Move ${esc(label)} down" ${!at.has(k) || at.get(k) === shown.length - 1 ? "disabled" : ""}>↓</button></li>`).join("");
}

/** `shown` with `key` shown or hidden (one column always stays) or moved by `by` places. */
export function changed(shown, columns, { show, key, by }) {
  if (show !== undefined) {
    if (show) return shown.some((c) => c.key === key) ? shown : [...shown, { key, width: null }].sort((a, b) =>
      columns.findIndex(([k]) => k === a.key) - columns.findIndex(([k]) => k === b.key));
    return shown.length > 1 ? shown.filter((c) => c.key !== key) : shown;
  }
  const i = shown.findIndex((c) => c.key === key), j = i + by;
  if (i < 0 || j < 0 || j >= shown.length) return shown;
  const next = [...shown];
  [next[i], next[j]] = [next[j], next[i]];
  return next;
}

/** A resize handle's new width: dragged to `px`, or a step by the arrow keys. */
export const clampWidth = (px) => Math.max(MIN, Math.min(MAX, Math.round(px)));
export { STEP };

/** The views the person sees in the team: their own and the shared ones. */
export async function listViews(teamId) {
  const { ok, body } = await send(`/api/teams/${teamId}/views`, { method: "GET" }).catch(() => ({ ok: false, body: {} }));
  return ok ? body.views : null;
}

/** Ask for a name and who sees it, then save the page's view; answers the new view's id, or null. */
export async function saveView(teamId, state, opener) {
  const answer = await formDialog({
    title: "Save view",
    fields: `<p class="quiet">Keeps the filters, the sort and the columns (which show, in what order, how wide).</p>
      <label>Name <input name="name" maxlength="80" autocomplete="off" required></label>
      <label><input type="checkbox" name="shared"> Shared with the team</label>
      <label><input type="checkbox" name="default" checked> Open the Submissions page on this view</label>`,
    submit: "Save view",
    check: (form) => (form.elements.name.value.trim() ? null : "Give the view a name."),
    opener,
  });
  if (!answer) return null;
  const body = { name: answer.name.trim(), shared: Boolean(answer.shared), default: Boolean(answer.default), view: state };
  const { ok, body: saved } = await send(`/api/teams/${teamId}/views`, { body }).catch(() => ({ ok: false, body: {} }));
  if (!ok) { showResult(false, saved); return null; }
  toast(`Saved view “${body.name}”`, "info");
  return saved.id;
}

export async function deleteView(teamId, view) {
  const { ok, body } = await send(`/api/teams/${teamId}/views/${view.id}`, { method: "DELETE" }).catch(() => ({ ok: false, body: {} }));
  if (!ok) showResult(false, body);
  return ok;
}

export async function chooseDefault(teamId, viewId) {
  const { ok, body } = await send(`/api/teams/${teamId}/views/default`, { method: "PUT", body: { view_id: viewId } }).catch(() => ({ ok: false, body: {} }));
  if (!ok) showResult(false, body);
  return ok;
}
