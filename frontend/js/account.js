// The account page (/#/account): who is signed in, their teams and role in each, and where they are signed in
// (each session's device, when it started and was last seen), each session with a Revoke button that signs that
// device out on every node; which finishes reach them ("Finishes that reach me": mine, my team's, none), kept on the
// server so that it follows them to another browser. And signing out, from the header on every page.
import { app } from "./context.js";
import { chooseFinishes, finishesChosen } from "./notices.js";
import { ago, clock, esc, placeChildren, setAttr, setText, toast } from "./ui.js";

const ROLES = { owner: "Owner", admin: "Admin", member: "Member" };
const FINISHES = [
  ["mine", "Mine", "Trajectories you submitted, or opened or retried today, and the one whose jobs are open"],
  ["team", "My team's", "Every finish of your team, counted in one toast that names yours"],
  ["none", "None", "No toast and no browser notification: the rows, the ring and the glow still show them"],
];
const THEMES = [["system", "System"], ["light", "Light"], ["dark", "Dark"]];

/** The theme chosen in this browser (js/theme.js sets it before the first paint, from the same key). */
function theme() {
  try { return ["light", "dark"].includes(localStorage.getItem("theme")) ? localStorage.getItem("theme") : "system"; } catch { return "system"; }
}

/** Choose the theme: at once, and kept in this browser (not a "jobs." key: it stays after signing out). */
function setTheme(value) {
  try { if (value === "system") localStorage.removeItem("theme"); else localStorage.setItem("theme", value); } catch { /* kept for this page */ }
  if (value === "system") delete document.documentElement.dataset.theme;
  else document.documentElement.dataset.theme = value;
}

/** Sign out: the session is revoked on every node and the cookie cleared; then the sign-in page. */
export async function signOut() {
  app.leaving = true; // a renewal refused meanwhile must not send the person to "session ended" instead
  if (app.live) app.live.stop(); // its socket is closed with the session: no renewal, no "session ended" page
  await fetch("/api/sign-out", { method: "POST" }).catch(() => null);
  forget(localStorage);
  forget(sessionStorage);
  location.assign("/?signin=out");
}

/** What this person's pages kept in the browser (the bell's toasts, the trajectories they opened today, the
 * notification switch): a shared machine keeps none of it once they sign out. */
function forget(storage) {
  try {
    for (const key of Object.keys(storage)) if (key.startsWith("jobs.")) storage.removeItem(key);
  } catch { /* storage refused: nothing was kept either */ }
}

export class AccountPage {
  constructor(main) {
    this.main = main;
    this.data = null; // GET /api/account
    this.offset = 0; // the server's clock minus ours, in ms
    this.rows = new Map(); // session id -> its <tr>
    this.tbody = null;
  }

  render() {
    if (this.main.dataset.page !== "account" || !this.tbody) this.mount();
    this.draw();
  }

  mount() {
    this.main.dataset.page = "account";
    this.main.innerHTML = `<h1>Account</h1><p class="who quiet">Loading…</p>
      <h2>Teams</h2>
      <div class="table-scroll"><table class="account-teams"><caption class="visually-hidden">Your teams and your role in each</caption>
      <thead><tr><th scope="col">Team</th><th scope="col">Role</th></tr></thead><tbody></tbody></table></div>
      <h2>Notifications</h2>
      <fieldset class="finishes"><legend>Finishes that reach me</legend>
      ${FINISHES.map(([value, label, note]) => `<label><input type="radio" name="finishes" value="${value}">
        <span class="choice">${esc(label)}</span> <span class="quiet small">${esc(note)}</span></label>`).join("")}
      </fieldset>
      <h2>Appearance</h2>
      <fieldset class="theme-choice"><legend>Theme</legend>${THEMES.map(([value, label]) =>
        `<label><input type="radio" name="theme" value="${value}"${value === theme() ? " checked" : ""}> ${label}</label>`).join("")}
        <p class="quiet small">Kept in this browser. System follows your device's light or dark setting.</p></fieldset>
      <h2 id="sessions-title" tabindex="-1">Sessions</h2>
      <p class="quiet">Where you are signed in. Revoke a session to sign that device out; revoking this device signs you out here.</p>
      <div class="table-scroll"><table class="account-sessions"><caption class="visually-hidden">Your sessions</caption>
      <thead><tr><th scope="col">Device</th><th scope="col" class="started">Signed in</th><th scope="col" class="seen">Last seen</th><th scope="col"><span class="visually-hidden">Revoke</span></th></tr></thead>
      <tbody></tbody></table></div><p class="sessions-more quiet" hidden></p>`;
    this.tbody = this.main.querySelector(".account-sessions tbody");
    this.rows = new Map();
    this.data = null;
    this.checkFinishes(finishesChosen());
    this.main.querySelector("fieldset.finishes").addEventListener("change", (e) => this.chooseFinishes(e.target));
    this.main.querySelector(".theme-choice").addEventListener("change", (e) => setTheme(e.target.value));
    this.tbody.addEventListener("click", (e) => {
      const button = e.target.closest("button[data-revoke]");
      if (button) this.revoke(button);
    });
    this.load();
  }

  async load() {
    const response = await fetch("/api/account").catch(() => null);
    if (response && response.status === 401) { location.assign("/?signin=ended"); return; }
    if (!response || !response.ok) { toast("The account could not be read", "error"); return; }
    const data = await response.json();
    if (this.main.dataset.page !== "account") return; // the person went on to another page meanwhile
    this.data = data;
    this.offset = this.data.time - Date.now();
    this.main.querySelector(".who").textContent = `Signed in as ${this.data.user.name}`;
    if (this.data.preferences.finishes !== finishesChosen()) chooseFinishes(this.data.preferences.finishes); // chosen in another browser
    this.checkFinishes(this.data.preferences.finishes);
    this.main.querySelector(".account-teams tbody").innerHTML = this.data.teams.length
      ? this.data.teams.map((t) => `<tr data-team="${t.id}"><td>${esc(t.name)}</td><td>${esc(ROLES[t.role] || t.role)}</td></tr>`).join("")
      : `<tr><td colspan="2" class="quiet">You are not a member of any team</td></tr>`;
    app.schedule();
  }

  checkFinishes(choice) {
    for (const input of this.main.querySelectorAll("input[name=finishes]")) {
      if (input.checked !== (input.value === choice)) input.checked = input.value === choice;
    }
  }

  /** The person picked another answer: kept on the server (every browser of theirs); refused, the old one is back. */
  async chooseFinishes(input) {
    const before = finishesChosen();
    this.choosing = true; // the answer decides what is checked: no redraw puts the old one back meanwhile
    try { await this._choose(input, before); } finally { this.choosing = false; }
  }

  async _choose(input, before) {
    const response = await fetch("/api/account/preferences", {
      method: "PUT",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ finishes: input.value }),
    }).catch(() => null);
    if (response && response.status === 401) { location.assign("/?signin=ended"); return; }
    if (response && response.ok) {
      const { finishes } = await response.json();
      chooseFinishes(finishes);
      if (this.data) this.data.preferences = { finishes };
      return;
    }
    const body = response ? await response.json().catch(() => ({})) : {};
    toast(body.message || "The choice could not be kept: the gateway could not be reached", "error");
    this.checkFinishes(before);
  }

  draw() {
    // The choice made in another tab or browser (told over the socket) shows here at once.
    if (!this.choosing && this.tbody) this.checkFinishes(finishesChosen());
    if (!this.data || !this.tbody) return;
    const now = Date.now() + this.offset;
    const kept = new Map();
    for (const s of this.data.sessions) {
      const tr = this.rows.get(s.id) || this.row(s);
      setText(tr.querySelector(".started"), clock(s.started_at, now));
      setText(tr.querySelector(".seen"), s.current ? "now" : ago(s.last_seen_at, now));
      kept.set(s.id, tr);
    }
    this.rows = kept;
    placeChildren(this.tbody, [...kept.values()]);
    const more = this.main.querySelector(".sessions-more");
    const { sessions, sessions_total: total } = this.data;
    setAttr(more, "hidden", total <= sessions.length);
    setText(more, total > sessions.length ? `Showing the ${sessions.length} most recently seen of ${total} sessions.` : "");
  }

  row(s) {
    const tr = document.createElement("tr");
    tr.dataset.session = s.id;
    if (s.current) tr.dataset.current = "";
    const label = s.current ? `Revoke ${s.device} (this device): sign out here` : `Revoke ${s.device}`;
    tr.innerHTML = `<td><span class="device">${esc(s.device)}</span>${s.current ? ` <span class="this-device">This device</span>` : ""}</td>
      <td class="started"></td><td class="seen"></td>
      <td><button type="button" class="revoke" data-revoke="${s.id}" aria-label="${esc(label)}">Revoke</button></td>`;
    return tr;
  }

  async revoke(button) {
    const id = Number(button.dataset.revoke);
    const session = this.data.sessions.find((s) => s.id === id);
    if (!session || button.disabled) return;
    button.disabled = true;
    button.setAttribute("aria-busy", "true");
    // This browser's own session: its socket is closed with it, so stop first (no renewal, no "session ended").
    const live = session.current ? app.live : null;
    if (live) { app.leaving = true; live.stop(); }
    const response = await fetch(`/api/account/sessions/${id}/revoke`, { method: "POST" }).catch(() => null);
    if (response && response.ok && session.current) { location.assign("/?signin=out"); return; }
    if (live && !(response && response.status === 401)) { app.leaving = false; live.resume(); } // not revoked: live again
    if (response && response.status === 401) { location.assign("/?signin=ended"); return; }
    const body = response ? await response.json().catch(() => ({})) : {};
    if (response && response.ok) toast(`Signed out ${session.device}`);
    else if (response && response.status === 404) toast("That session had already ended", "info");
    else {
      toast(body.message || "The gateway could not be reached", "error");
      button.disabled = false;
      button.removeAttribute("aria-busy");
      return;
    }
    // Focus goes on to the next session's button, or to the list's heading, not to the page's top (nor to this
    // device's button above, where a second Enter would sign this browser out).
    const rows = [...this.rows.values()];
    const next = rows[rows.indexOf(button.closest("tr")) + 1];
    this.data.sessions = this.data.sessions.filter((s) => s.id !== id);
    this.data.sessions_total = Math.max(0, this.data.sessions_total - 1);
    this.draw();
    (next && next.isConnected ? next.querySelector("button") : this.main.querySelector("#sessions-title")).focus();
    this.load(); // and the list as the server has it now
  }
}
