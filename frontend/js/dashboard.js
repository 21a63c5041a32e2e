// The dashboard: a card per trajectory, newest first (new ones included), each with its menu. A team may hold
// thousands: the server pages and searches them ("100 of 1,204 trajectories", Show more), and each card tells the
// truth from its first second (an upload on its way says so).
//
// Cards are keyed and change in place. While the pointer or keyboard focus is on the grid, or a menu or the panel
// is open, they keep their places: new trajectories are announced ("2 new, show") and take their place (first)
// when the pointer leaves.
import { param, setParams } from "./address.js";
import { app } from "./context.js";
import { Aim, StableOrder, holding, newsText } from "./order.js";
import { timeLeft, unfinished, whyUnknown } from "./eta.js";
import { colour, word } from "./rules.js";
import { ICON } from "./tree.js";
import { actionOf } from "./keys.js";
import { ago, count, menuAt, placeChildren, setAttr, setText } from "./ui.js";

const PAGE = 100;
const DAY = 24 * 3600 * 1000;
const HOUR = 3600 * 1000;

/** The folded cards' heading: "12 finished in the last hour", "12 finished in the last hour, 40 earlier". */
export function foldText(recent, earlier) {
  if (!recent) return `${count(earlier)} finished or idle`;
  return `${count(recent)} finished in the last hour${earlier ? `, ${count(earlier)} earlier` : ""}`;
}
// Where an upload's data is, while its trajectory has no jobs yet (the submission's staging).
export const STAGING_WORDS = {
  upload_pending: "Waiting to upload", uploading: "Uploading", sync_pending: "Uploaded, waiting to sync",
  syncing: "Syncing to the cluster", sync_failed: "Sync failed: Retry Sync on the Submissions page",
};

export class Dashboard {
  constructor(main, panel) {
    this.main = main;
    this.panel = panel;
    this.known = []; // the team's trajectories as loaded: { id, name, created_at, staging }, newest first
    this.byId = new Map(); // the same, by id (set with them: _setKnown)
    this.total = null; // trajectories matching the search, in all
    this.search = param("q");
    this.loading = false;
    this.uploads = new Map(); // trajectory id -> { submission, staging } of an upload on its way (live)
    app.team.onSubmissions((rows) => this._uploads(rows));
    this.order = new StableOrder();
    this.cards = new Map(); // id -> element
    this.grid = null;
  }

  /** Build the page (once each time it is shown). */
  mount() {
    this.main.dataset.page = "dash";
    this.main.innerHTML = `<h1 class="visually-hidden">Dashboard</h1>
      <div class="cards-bar"><label class="search"><span class="visually-hidden">Find a trajectory</span>
          <input type="search" name="q" placeholder="Find a trajectory" autocomplete="off" maxlength="200"></label>
        <span class="count quiet" aria-live="polite"></span><button type="button" class="news" hidden></button></div>
      <div class="cards"></div>
      <details class="finished-fold" hidden><summary></summary><div class="cards finished-cards"></div></details>
      <p class="empty quiet" hidden></p>
      <div class="more-bar"><button type="button" class="more" hidden>Show more</button></div>`;
    this.main.querySelector("input[name=q]").value = this.search;
    let typing = null;
    this.main.querySelector("input[name=q]").addEventListener("input", (e) => {
      clearTimeout(typing);
      typing = setTimeout(() => { this.search = e.target.value.trim(); setParams({ q: this.search }); this.load(); }, 250);
    });
    this.main.querySelector(".more").addEventListener("click", () => this.load(this.known.length));
    this.grid = this.main.querySelector(".cards");
    this.fold = this.main.querySelector(".finished-fold");
    this.foldGrid = this.main.querySelector(".finished-cards");
    this.fold.addEventListener("toggle", () => app.schedule()); // opened: its cards are filled with what is new
    this.news = this.main.querySelector(".news");
    this.cards = new Map();
    this.order = new StableOrder();
    this.aim = new Aim(this.grid, () => app.schedule());
    this.news.addEventListener("click", () => { this.order.release(); this.draw(); });
    this.main.addEventListener("keydown", (e) => this._key(e));
    this.main.addEventListener("click", (e) => {
      const button = e.target.closest("[data-menu]");
      if (!button) return;
      e.stopPropagation();
      this.menu(Number(button.dataset.menu), button);
    });
  }

  held() { return holding([this.aim], () => this.panel.isOpen); }

  /** A card's keys (keys.js): move to the next or previous card (the folded ones when shown), open its jobs, its
   * menu. A card is focused by these keys only (tabindex -1): Tab still goes from menu button to menu button. */
  _key(e) {
    const card = e.target.closest("[data-card]");
    if (!card || e.target !== card) return;
    const action = actionOf(e);
    const cards = [...this.main.querySelectorAll("[data-card]")].filter((c) => c.offsetParent !== null);
    const i = cards.indexOf(card);
    const to = { down: i + 1, up: i - 1, first: 0, last: cards.length - 1 }[action];
    const id = Number(card.dataset.card);
    if (to !== undefined) { e.preventDefault(); cards[Math.max(0, Math.min(cards.length - 1, to))].focus(); }
    else if (action === "open") { e.preventDefault(); this.panel.open(id, this._name(id), { opener: card }); }
    else if (action === "act") { e.preventDefault(); this.menu(id, card); } // under the card; focus comes back to it
  }

  /** A page of cards from the server (`offset` 0: the first page again, for a new search; `front`: the newest
   * page merged in front of what is loaded, for trajectories created since). */
  async load(offset = 0, front = false) {
    this.loading = true;
    const asked = (this.asked = (this.asked || 0) + 1);
    const p = new URLSearchParams({ offset: String(offset), limit: String(PAGE) });
    if (this.search) p.set("q", this.search);
    const body = await fetch(`/api/teams/${app.teamId}/trajectories?${p}`).then((r) => r.json()).catch(() => null);
    if (asked !== this.asked) return;
    this.loading = false;
    if (!body || !body.trajectories) { app.schedule(); return; }
    app.team.learn(body.summaries);
    const page = body.trajectories;
    const ids = new Set(page.map((t) => t.id));
    if (front) this._setKnown([...page, ...this.known.filter((t) => !ids.has(t.id))]);
    else this._setKnown(offset === 0 ? page : [...this.known, ...page.filter((t) => !this.listed(t.id))]);
    this.total = body.total;
    if (offset === 0 && !front) this.order.release(); // a new search shows at once
    this._arrivals();
    app.schedule();
  }

  /** Uploads on their way, from the Submissions page's rows as they stream: the card says where the data is. */
  _uploads(rows) {
    let changed = false;
    for (const r of rows) {
      if (r.trajectory_id === null) continue;
      const seen = this.uploads.get(r.trajectory_id);
      // The newest news of a trajectory's upload wins over what the cards were read with (null: its data is there).
      if (r.staging !== "ready") { this.uploads.set(r.trajectory_id, { submission: r.id, staging: r.staging }); changed = true; }
      else if (!seen || seen.submission === r.id) { this.uploads.set(r.trajectory_id, { submission: r.id, staging: null }); changed = true; }
    }
    this._arrivals();
    if (changed) app.schedule();
  }

  /** An upload of a trajectory created since the cards were read: its card (with its name) comes from the server,
   * once per trajectory (a search may leave it out). Checked again when a page arrives: it may have been read
   * before the trajectory was written. */
  _arrivals() {
    if (this.total === null || this.loading) return;
    const newest = this.known.reduce((m, t) => Math.max(m, t.id), 0);
    this.fetched = this.fetched || new Set();
    const arrived = [...this.uploads].filter(([id, u]) => u.staging && id > newest && !this.listed(id) && !this.fetched.has(id));
    if (!arrived.length) return;
    for (const [id] of arrived) this.fetched.add(id);
    this.load(0, true);
  }

  _staging(id) {
    const live = this.uploads.get(id);
    if (live) return live.staging;
    const t = this.listed(id);
    return t ? t.staging || null : null;
  }

  _setKnown(list) {
    this.known = list;
    this.byId = new Map(list.map((t) => [t.id, t]));
  }

  /** A card the server listed (its name, when it was created, where its upload is). */
  listed(id) { return this.byId.get(id); }

  menu(id, button) {
    const name = this._name(id);
    menuAt(button, [
      ["Compute jobs", () => this.panel.open(id, name, { opener: button })],
      ["Analyses", () => this.panel.open(id, name, { opener: button, tab: "analyses" })],
    ], `Menu of ${name}`);
  }

  _name(id) {
    const s = app.team.summaries.get(id);
    return s ? s.name : this.listed(id)?.name || `Trajectory ${id}`;
  }

  /** Newest first: the trajectories created since the page loaded (known by their summary, newer than every
   * card loaded) lead, newest id first. */
  latest() {
    const loaded = new Set(this.known.map((t) => t.id));
    const newest = this.known.reduce((m, t) => Math.max(m, t.id), 0);
    const fresh = [...app.team.summaries.values()]
      .filter((s) => !loaded.has(s.id) && s.id > newest && (!this.search || s.name.toLowerCase().includes(this.search.toLowerCase())))
      .map((s) => s.id).sort((a, b) => b - a);
    this.fresh = fresh.length;
    return [...fresh, ...this.known.map((t) => t.id)];
  }

  draw() {
    if (this.main.dataset.page !== "dash" || !this.grid) this.mount();
    if (this.total === null && !this.loading) this.load();
    const ids = this.order.next(this.latest(), this.held());
    const now = app.live.now();
    const nodes = [];
    const active = [];
    const done = [];
    let recent = 0;
    const keep = new Map();
    const folded = !this.fold.open; // the finished cards are out of sight: each is filled once, then as it opens
    for (const id of ids) {
      const known = this.cards.get(id);
      const el = known || this._card(id);
      // The work in hand leads; what is over is folded, counted by when it finished. A card that has just
      // finished stays in place while it glows, so the finish is seen where the work was.
      const s = app.team.summaries.get(id);
      const over = s ? !unfinished(s.counts) && !app.team.isGlowing(id) : !this._staging(id) && !this._young(id, now);
      if (!(over && folded && known && known.parentElement === this.foldGrid)) this._fill(el, id, now);
      keep.set(id, el);
      nodes.push(el);
      (over ? done : active).push(el);
      if (over && s && now - Date.parse(s.updated_at || "") < HOUR) recent++;
    }
    this.cards = keep;
    placeChildren(this.grid, active);
    placeChildren(this.foldGrid, done);
    this.fold.hidden = !done.length;
    setText(this.fold.querySelector("summary"), foldText(recent, done.length - recent));
    this.news.hidden = !this.order.waiting;
    setText(this.news, newsText(this.order.waiting));
    const shown = nodes.length; // the cards read, and those created since
    const total = Math.max((this.total || 0) + (this.fresh || 0), shown);
    setText(this.main.querySelector(".count"), this.total === null ? "" : `${count(Math.min(shown, total))} of ${count(total)} trajectories`);
    this.main.querySelector(".more").hidden = this.total === null || this.known.length >= this.total;
    const empty = this.main.querySelector(".empty");
    empty.hidden = this.total === null || nodes.length > 0;
    setText(empty, this.search ? `No trajectory's name has “${this.search}”` : "No trajectories yet");
  }

  _card(id) {
    const el = document.createElement("article");
    el.className = "card";
    el.dataset.card = id;
    el.tabIndex = -1; // reached by the list's keys (j, k, arrows), not by Tab
    el.setAttribute("aria-labelledby", `card-${id}`);
    el.innerHTML = `<div class="card-top"><h2 class="card-title" id="card-${id}"><span class="icon" aria-hidden="true"></span>
      <span class="title-text"></span></h2><button class="menu-button" type="button" aria-haspopup="menu" data-menu="${id}">⋯</button></div>
      <p class="meta"><span class="progress"></span><span class="state"></span><span class="eta"></span><span class="when quiet"></span></p>`;
    return el;
  }

  _young(id, now) {
    const listed = this.listed(id);
    return Boolean(listed && now - Date.parse(listed.created_at) < DAY);
  }

  _fill(el, id, now) {
    const s = app.team.summaries.get(id);
    const name = this._name(id);
    const [top, meta] = el.children;
    const [title, button] = top.children;
    const [icon, text] = title.children;
    const [progress, state, eta, when] = meta.children;
    const c = s ? colour(s.status) : "neutral";
    el.className = `card ${app.team.isGlowing(id) ? "glow" : ""}`;
    title.className = `card-title ${s ? c : ""}`;
    setText(icon, s ? ICON[c] : "");
    setText(text, name);
    setAttr(title, "title", name); // the whole name, when it is cut short
    setAttr(button, "aria-label", `Menu of ${name}`);
    const staging = s ? null : this._staging(id);
    const young = this._young(id, now);
    setText(progress, s ? `${count(s.completed)}/${count(s.total)} jobs` : staging ? STAGING_WORDS[staging] || staging : young ? "No jobs yet" : "No jobs in the last 24 hours");
    setText(state, s ? word(s.status) : "");
    setText(eta, s && unfinished(s.counts) ? timeLeft(s.eta) : "");
    setAttr(eta, "title", s ? whyUnknown(s.eta, s.counts) : null);
    eta.hidden = !eta.textContent;
    setText(when, s ? ago(s.updated_at, now) : "");
  }
}
