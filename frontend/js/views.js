// Manage views: the saved views a person sees in the team (their own and the shared ones) in their own order, to
// rename and to reorder, by dragging a view's handle or by its ↑ and ↓ buttons (Tab to one, Enter). The order is the
// person's alone, kept on the server (PUT /api/teams/{id}/views/order): it follows them to another browser and is the
// order of the page's View list. A rename keeps the view's place; a view the person may not change (another
// member's shared view, for a member) is listed, placed, never renamed.
import { countDialog, esc, focusBack, formDialog, send, showResult, toast } from "./ui.js";

/** Open the dialog on `views` (as GET .../views lists them); `changed()` is called after each change is kept. */
export function manageViews(teamId, views, changed, opener = document.activeElement) {
  let list = [...views];
  const dlg = document.createElement("dialog");
  dlg.className = "dialog views-manager";
  dlg.setAttribute("aria-labelledby", "manage-views-title");
  dlg.innerHTML = `<h2 id="manage-views-title">Manage views</h2>
    <p class="quiet small">Drag a view by its handle, or use ↑ and ↓, to set the order of your View list. The order is yours
      alone; it follows you to another browser.</p>
    <p class="quiet empty-views" hidden>No saved views yet: Save view… keeps the page's filters, sort and columns.</p>
    <ol class="views-order" aria-label="Your views, in order"></ol>
    <p class="visually-hidden moved" aria-live="polite"></p>
    <div class="dialog-buttons"><button type="button" class="primary close">Close</button></div>`;
  const ol = dlg.querySelector("ol");
  const said = dlg.querySelector(".moved");

  const draw = (focus = null) => {
    dlg.querySelector(".empty-views").hidden = list.length > 0;
    ol.innerHTML = list.map((v, i) => `<li data-view="${v.id}">
      <span class="handle" aria-hidden="true" title="Drag to move">⠿</span>
      <span class="view-name">${esc(v.name)}${v.shared ? ` <span class="quiet">(shared)</span>` : ""}${v.default ? " ★" : ""}</span>
      <button type="button" data-move="-1" aria-label="Move ${esc(v.name)} up" ${i === 0 ? "disabled" : ""}>↑</button>
      <button type="button" data-move="1" aria-label="Move ${esc(v.name)} down" ${i === list.length - 1 ? "disabled" : ""}>↓</button>
      ${v.editable ? `<button type="button" data-rename aria-label="Rename ${esc(v.name)}">Rename</button>` : ""}</li>`).join("");
    if (focus) (ol.querySelector(`[data-view="${focus.id}"] ${focus.what}`) || ol.querySelector(`[data-view="${focus.id}"] button:not(:disabled)`))?.focus();
  };

  /** Keep the order on the server; refused, the server's order comes back. */
  const keep = async () => {
    const { ok, body } = await send(`/api/teams/${teamId}/views/order`, { method: "PUT", body: { view_ids: list.map((v) => v.id) } })
      .catch(() => ({ ok: false, body: {} }));
    if (!ok) showResult(false, body);
    changed();
  };

  const move = (id, to) => {
    const from = list.findIndex((v) => v.id === id);
    to = Math.max(0, Math.min(list.length - 1, to));
    if (from < 0 || from === to) return false;
    const [view] = list.splice(from, 1);
    list.splice(to, 0, view);
    said.textContent = `${view.name}: ${to + 1} of ${list.length}`;
    return true;
  };

  ol.addEventListener("click", async (e) => {
    const li = e.target.closest("[data-view]");
    if (!li) return;
    const id = Number(li.dataset.view);
    const button = e.target.closest("[data-move]");
    if (button) {
      const by = Number(button.dataset.move);
      if (move(id, list.findIndex((v) => v.id === id) + by)) {
        const at = list.findIndex((v) => v.id === id);
        // Focus stays on the button pressed, or on the other one once the view reaches an end.
        const stays = (by < 0 && at > 0) || (by > 0 && at < list.length - 1);
        draw({ id, what: `[data-move="${stays ? by : -by}"]` });
        await keep();
      }
    } else if (e.target.closest("[data-rename]")) {
      const renamed = await rename(teamId, list.find((v) => v.id === id), e.target);
      if (renamed) { list = list.map((v) => (v.id === id ? renamed : v)); draw({ id, what: "[data-rename]" }); changed(); }
    }
  });

  // Dragging a handle: the view follows the pointer through the list (the person's own move, so the rows under it
  // move as they expect), and its new place is kept when it is let go.
  ol.addEventListener("pointerdown", (e) => {
    const handle = e.target.closest(".handle");
    if (!handle || e.button !== 0) return;
    e.preventDefault();
    const li = handle.closest("li"), id = Number(li.dataset.view), from = list.findIndex((v) => v.id === id);
    li.classList.add("dragging");
    // Heard on the document, not captured by the handle: moving its row in the list would release a capture.
    const over = (m) => {
      if (m.pointerId !== e.pointerId) return;
      const others = [...ol.children].filter((el) => el !== li);
      const to = others.filter((el) => el.getBoundingClientRect().top + el.offsetHeight / 2 < m.clientY).length;
      if (move(id, to)) ol.insertBefore(li, others[to] || null);
    };
    const done = async (m) => {
      if (m.pointerId !== e.pointerId) return;
      document.removeEventListener("pointermove", over);
      document.removeEventListener("pointerup", done);
      document.removeEventListener("pointercancel", done);
      li.classList.remove("dragging");
      draw({ id, what: "[data-move]:not(:disabled)" });
      if (list.findIndex((v) => v.id === id) !== from) await keep();
    };
    document.addEventListener("pointermove", over);
    document.addEventListener("pointerup", done);
    document.addEventListener("pointercancel", done);
  });

  dlg.querySelector(".close").addEventListener("click", () => dlg.close());
  dlg.addEventListener("keydown", (e) => { if (e.key === "Escape") e.stopPropagation(); }); // the browser closes it
  dlg.addEventListener("close", () => {
    dlg.remove();
    focusBack(opener);
    document.dispatchEvent(new CustomEvent("menuclosed"));
  });
  document.body.append(dlg);
  countDialog(dlg);
  draw();
  dlg.showModal();
  (ol.querySelector("button:not(:disabled)") || dlg.querySelector(".close")).focus();
}

/** Ask for a new name and keep it (the view as it was, renamed); answers the view renamed, or null. */
async function rename(teamId, view, opener) {
  const answer = await formDialog({
    title: `Rename ${view.name}`,
    fields: `<label>Name <input name="name" maxlength="80" autocomplete="off" required value="${esc(view.name)}"></label>`,
    submit: "Rename",
    check: (form) => (form.elements.name.value.trim() ? null : "Give the view a name."),
    opener,
  });
  if (!answer || answer.name.trim() === view.name) return null;
  const body = { name: answer.name.trim(), shared: view.shared, default: view.default, view: view.view };
  const { ok, body: refused } = await send(`/api/teams/${teamId}/views/${view.id}`, { method: "PUT", body }).catch(() => ({ ok: false, body: {} }));
  if (!ok) { showResult(false, refused); return null; }
  toast(`Renamed view “${view.name}” to “${body.name}”`, "info");
  return { ...view, name: body.name };
}
