// Small pieces the views share: escaping, times, toasts, the context menu.

export const esc = (s) => String(s ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));

export function ago(iso, now) {
  if (!iso) return "";
  const s = Math.max(0, Math.round((now - Date.parse(iso)) / 1000));
  if (s < 5) return "just now";
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.floor(s / 60)}m ago`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ago`;
  return `${Math.floor(s / 86400)}d ago`;
}

export function took(job) {
  if (job.status !== "completed" || !job.started_at || !job.finished_at) return "";
  const s = (Date.parse(job.finished_at) - Date.parse(job.started_at)) / 1000;
  if (s < 1) return `took ${Math.round(s * 1000)} ms`;
  if (s < 60) return `took ${s.toFixed(1)} s`;
  return `took ${Math.floor(s / 60)}m ${Math.round(s % 60)}s`;
}

export function toast(text, level = "success") {
  const el = document.createElement("div");
  el.className = `toast ${level}`;
  el.setAttribute("role", level === "warning" ? "alert" : "status");
  el.textContent = text;
  document.getElementById("toasts").append(el);
  setTimeout(() => el.remove(), 6000);
}

let openMenu = null;

export function closeMenu() { if (openMenu) { openMenu.remove(); openMenu = null; } }

/** A context menu of [label, action] at (x, y); keyboard: arrows, Enter, Escape. */
export function menu(x, y, items, label) {
  closeMenu();
  const el = (openMenu = document.createElement("ul"));
  el.className = "menu";
  el.setAttribute("role", "menu");
  el.setAttribute("aria-label", label);
  el.style.left = `${x}px`;
  el.style.top = `${y}px`;
  for (const [text, action] of items) {
    const li = document.createElement("li");
    li.setAttribute("role", "menuitem");
    li.tabIndex = -1;
    li.textContent = text;
    li.addEventListener("click", () => { closeMenu(); action(); });
    li.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); li.click(); } });
    el.append(li);
  }
  el.addEventListener("keydown", (e) => {
    const all = [...el.children];
    const i = all.indexOf(document.activeElement);
    if (e.key === "ArrowDown") { e.preventDefault(); all[(i + 1) % all.length].focus(); }
    if (e.key === "ArrowUp") { e.preventDefault(); all[(i - 1 + all.length) % all.length].focus(); }
    if (e.key === "Escape") closeMenu();
  });
  document.body.append(el);
  el.firstChild.focus();
}

export async function post(path) {
  const response = await fetch(path, { method: "POST" });
  const body = await response.json().catch(() => ({}));
  return { ok: response.ok, body };
}
