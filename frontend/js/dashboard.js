// The dashboard: a card per trajectory, newest first (new ones included), each with its menu.
//
// Cards are keyed and change in place. While the pointer or keyboard focus is on the grid, or a menu or the panel
// is open, they keep their places: new trajectories are announced ("2 new, show") and take their place (first)
// when the pointer leaves.
import { app } from "./context.js";
import { Aim, StableOrder, holding, newsText } from "./order.js";
import { colour, word } from "./rules.js";
import { ICON } from "./tree.js";
import { ago, menuAt, placeChildren, setAttr, setText } from "./ui.js";

export class Dashboard {
  constructor(main, panel) {
    this.main = main;
    this.panel = panel;
    this.known = []; // the team's trajectories as loaded: { id, name, created_at }, newest first
    this.names = null; // id -> name of the known ones
    this.order = new StableOrder();
    this.cards = new Map(); // id -> element
    this.grid = null;
  }

  /** Build the page (once each time it is shown). */
  mount() {
    this.main.dataset.page = "dash";
    this.main.innerHTML = `<h1 class="visually-hidden">Dashboard</h1>
      <div class="cards-bar"><button type="button" class="news" hidden></button></div>
      <div class="cards"></div>`;
    this.grid = this.main.querySelector(".cards");
    this.news = this.main.querySelector(".news");
    this.cards = new Map();
    this.order = new StableOrder();
    this.aim = new Aim(this.grid, () => app.schedule());
    this.news.addEventListener("click", () => { this.order.release(); this.draw(); });
    this.grid.addEventListener("click", (e) => {
      const button = e.target.closest("[data-menu]");
      if (!button) return;
      e.stopPropagation();
      this.menu(Number(button.dataset.menu), button);
    });
  }

  held() { return holding([this.aim], () => this.panel.isOpen); }

  menu(id, button) {
    const name = this._name(id);
    menuAt(button, [
      ["Compute jobs", () => this.panel.open(id, name, { opener: button })],
      ["Analyses", () => this.panel.open(id, name, { opener: button, tab: "analyses" })],
    ], `Menu of ${name}`);
  }

  _name(id) {
    const s = app.team.summaries.get(id);
    if (s) return s.name;
    if (!this.names || this.names.size !== this.known.length) this.names = new Map(this.known.map((t) => [t.id, t.name]));
    return this.names.get(id) || `Trajectory ${id}`;
  }

  /** Newest first: the trajectories created since the page loaded (known by their summary) lead, newest id first. */
  latest() {
    const loaded = new Set(this.known.map((t) => t.id));
    const fresh = [...app.team.summaries.keys()].filter((id) => !loaded.has(id)).sort((a, b) => b - a);
    return [...fresh, ...this.known.map((t) => t.id)];
  }

  draw() {
    if (this.main.dataset.page !== "dash" || !this.grid) this.mount();
    const ids = this.order.next(this.latest(), this.held());
    const now = app.live.now();
    const nodes = [];
    const keep = new Map();
    for (const id of ids) {
      const el = this.cards.get(id) || this._card(id);
      this._fill(el, id, now);
      keep.set(id, el);
      nodes.push(el);
    }
    this.cards = keep;
    placeChildren(this.grid, nodes);
    this.news.hidden = !this.order.waiting;
    setText(this.news, newsText(this.order.waiting));
  }

  _card(id) {
    const el = document.createElement("article");
    el.className = "card";
    el.dataset.card = id;
    el.setAttribute("aria-labelledby", `card-${id}`);
    el.innerHTML = `<div class="card-top"><h2 class="card-title" id="card-${id}"><span class="icon" aria-hidden="true"></span>
      <span class="title-text"></span></h2><button class="menu-button" type="button" aria-haspopup="menu" data-menu="${id}">⋯</button></div>
      <p class="meta"><span class="progress"></span><span class="state"></span><span class="when quiet"></span></p>`;
    return el;
  }

  _fill(el, id, now) {
    const s = app.team.summaries.get(id);
    const name = this._name(id);
    const [top, meta] = el.children;
    const [title, button] = top.children;
    const [icon, text] = title.children;
    const [progress, state, when] = meta.children;
    const c = s ? colour(s.status) : "neutral";
    el.className = `card ${app.team.isGlowing(id) ? "glow" : ""}`;
    title.className = `card-title ${s ? c : ""}`;
    setText(icon, s ? ICON[c] : "");
    setText(text, name);
    setAttr(title, "title", name); // the whole name, when it is cut short
    setAttr(button, "aria-label", `Menu of ${name}`);
    setText(progress, s ? `${s.completed}/${s.total} jobs completed` : "No jobs in the last 24 hours");
    setText(state, s ? word(s.status) : "");
    setText(when, s ? ago(s.updated_at, now) : "");
  }
}
