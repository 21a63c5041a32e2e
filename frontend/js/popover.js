// The Jobs popover: the counts, every trajectory (most recent first) with its jobs a click away, and Clusters.
// The team channel's snapshot brings the few hundred most recent; older ones are a "Show older" away and a search
// finds any by name (both read over HTTP), and the count says how many there are in all.
//
// The counts and the Clusters block stay in view; only the list scrolls. Rows are keyed and change in place;
// while the person aims at the popover (pointer, keyboard focus, an open menu) they keep their order, new
// trajectories are announced ("2 new, show"), and the order catches up when the pointer leaves.
import { param, setParams } from "./address.js";
import { app } from "./context.js";
import { Aim, StableOrder, holding, newsText } from "./order.js";
import { buckets, colour, word } from "./rules.js";
import { stuckCount, timeLeft, unfinished, whyUnknown } from "./eta.js";
import { ICON, JobTree } from "./tree.js";
import { follow, jobMenu, retryFrames, runLabel, trajectoryMenu, unfollow } from "./trajectories.js";
import { actionOf } from "./keys.js";
import { ago, count, placeChildren, setAttr, setText } from "./ui.js";

const ZERO = { queued: 0, retrying: 0, running: 0, completed: 0, failed: 0, holding: 0, preempted: 0, silent: 0 };

export class Popover {
  constructor(el, ring, panel = null) {
    this.el = el;
    this.ring = ring;
    this.panel = panel; // while it is open, the rows keep their places too
    this.order = new StableOrder();
    this.rows = new Map(); // trajectory id -> its row element
    this.seen = new Map(); // trajectory id -> its last summary (a row held in place after it left the list)
    this.openId = null; // the expanded trajectory
    this.tree = null;
    this.focusId = null; // the row in the tab order
    this.el.innerHTML = `
      <div class="counts" role="group" aria-label="Job counts">
        <div><b data-bucket="queued">–</b>Queued</div><div><b data-bucket="running">–</b>Running</div>
        <div><b data-bucket="done">–</b>Done</div><div><b data-bucket="failed">–</b>Failed</div>
        <div class="silent-count" hidden><b data-bucket="silent">0</b>Cluster silent</div>
      </div>
      <div class="pop-bar"><h2 id="pop-title">Trajectories</h2><span class="pop-stuck small"></span><span class="pop-count quiet small" aria-live="polite"></span>
        <button type="button" class="news" hidden></button></div>
      <label class="pop-find"><span class="visually-hidden">Find a trajectory</span>
        <input type="search" name="find" placeholder="Find a trajectory" autocomplete="off" maxlength="200"></label>
      <div class="pop-list">
        <p class="empty quiet" hidden>No jobs in the last 24 hours</p>
        <div class="pop-tree" role="tree" aria-labelledby="pop-title"></div>
        <button type="button" class="older" hidden>Show older</button>
      </div>
      <div class="block">
        <span class="clusters-none quiet">Clusters: none reporting</span>
        <span class="clusters-live"><span class="c-n"></span><span class="c-cpu"></span><span class="c-memory"></span><span class="c-disk"></span><span class="c-network"></span></span>
        <a href="#/clusters" class="open-clusters" data-close>Open clusters</a>
        <a href="#/team" class="online" data-close></a>
      </div>`;
    this.list = this.el.querySelector(".pop-tree");
    this.empty = this.el.querySelector(".empty");
    this.news = this.el.querySelector(".news");
    this.aim = new Aim(this.el, () => app.schedule());
    this.news.addEventListener("click", () => { this.order.release(); this.draw(); });
    this.find = param("find"); // the search, as typed
    this.found = null; // the server's count of trajectories whose name has it (null: no search)
    this.el.querySelector("input[name=find]").value = this.find;
    let typing = null;
    this.el.querySelector("input[name=find]").addEventListener("input", (e) => {
      clearTimeout(typing);
      typing = setTimeout(() => this.search(e.target.value.trim()), 250);
    });
    this.el.querySelector(".older").addEventListener("click", () => this.older());
    this.el.addEventListener("click", (e) => this._click(e));
    this.el.addEventListener("keydown", (e) => this._key(e));
    this.el.addEventListener("contextmenu", (e) => {
      const head = e.target.closest("[data-head]");
      if (!head) return; // the rows of an expanded trajectory's tree have their own menu
      e.preventDefault();
      this._menu(head, e.clientX, e.clientY);
    });
    this.el.addEventListener("focusin", (e) => { const head = e.target.closest("[data-head]"); if (head) this.focusId = Number(head.dataset.head); });
  }

  get isOpen() { return !this.el.hidden; }

  held() { return holding([this.aim], () => this.panel !== null && this.panel.isOpen); }

  setOpen(open) {
    this.el.hidden = !open;
    this.ring.setAttribute("aria-expanded", String(open));
    setParams({ jobs: open ? "open" : "" });
    if (!open) return;
    this.order.release(); // it opens in the latest order
    if (this.find && this.found === null) this.search(this.find);
    this.draw();
    // Without scrolling it into view (it opens at the top of its list): a focus that scrolls makes the browser lay
    // the whole popover out inside the click, the longest part of opening it; the frame lays it out once anyway.
    const first = this.list.querySelector("[data-head]");
    if (first) first.focus({ preventScroll: true });
  }

  /** Read a page of trajectories over HTTP (older ones, or those a search finds) into the team's summaries. */
  async _read(query) {
    const body = await fetch(`/api/teams/${app.teamId}/trajectories/active?${new URLSearchParams(query)}`)
      .then((r) => r.json()).catch(() => null);
    if (body && body.summaries) app.team.learn(body.summaries);
    return body;
  }

  async search(find) {
    this.find = find;
    setParams({ find });
    this.found = null;
    this.order.release(); // the person's own doing: it shows at once
    if (find) {
      const body = await this._read({ q: find, limit: "300" });
      if (this.find === find && body) this.found = body.total;
    }
    app.schedule();
  }

  async older() {
    const query = { offset: String(this.matching().length), limit: "300" };
    if (this.find) query.q = this.find;
    await this._read(query);
    this.order.release(); // the person's own doing: the older ones show at once, after the rest
    app.schedule();
  }

  /** The trajectories the browser knows that the search matches (all of them without one), most recent first. */
  matching() {
    const find = this.find.toLowerCase();
    const all = app.team.recent();
    return find ? all.filter((s) => s.name.toLowerCase().includes(find)) : all;
  }

  _name(id) { const s = app.team.summaries.get(id) || this.seen.get(id); return s ? s.name : `Trajectory ${id}`; }

  _menu(head, x, y) { const id = Number(head.dataset.head); trajectoryMenu(id, this._name(id), head, x, y); }

  _click(e) {
    if (e.target.closest("[data-close]")) { this.setOpen(false); return; } // its links lead away: it closes
    const head = e.target.closest("[data-head]");
    if (!head) return;
    const button = e.target.closest(".menu-button");
    if (button) { const r = button.getBoundingClientRect(); this._menu(head, r.left, r.bottom); return; }
    this.toggle(Number(head.dataset.head));
  }

  _key(e) {
    const head = e.target.closest("[data-head]");
    if (!head || e.target !== head) return;
    const heads = [...this.list.querySelectorAll("[data-head]")];
    const i = heads.indexOf(head);
    const action = actionOf(e); // keys.js: the one table of shortcuts
    const to = { down: i + 1, up: i - 1, first: 0, last: heads.length - 1 }[action];
    if (to !== undefined) { e.preventDefault(); const next = heads[Math.max(0, Math.min(heads.length - 1, to))]; next.focus(); return; }
    const id = Number(head.dataset.head);
    if (action === "open" || e.key === " ") { e.preventDefault(); this.toggle(id); } // Space too, as before
    else if (e.key === "ArrowRight" && this.openId !== id) { e.preventDefault(); this.toggle(id); }
    else if (e.key === "ArrowLeft" && this.openId === id) { e.preventDefault(); this.toggle(id); }
    else if (action === "act") { e.preventDefault(); const r = head.getBoundingClientRect(); this._menu(head, r.left + 20, r.bottom); }
  }

  /** Expand a trajectory (its frames and jobs), or fold it again. */
  toggle(id) {
    if (this.openId !== null) {
      unfollow(this.openId);
      if (this.tree) this.tree.el.remove();
      this.tree = null;
    }
    this.openId = this.openId === id ? null : id;
    if (this.openId !== null) {
      const name = this._name(id);
      const host = document.createElement("div");
      host.className = "traj-jobs";
      this.tree = new JobTree(host, app.live, {
        label: `Jobs of ${name}`,
        role: "group",
        held: () => this.held(),
        onGroupMenu: (anchor, x, y) => trajectoryMenu(id, name, anchor, x, y),
        onJobMenu: (job, anchor, x, y) => jobMenu(id, name, job, anchor, x, y),
        onRetry: (job) => retryFrames(job.analysis_id, job.name),
        runLabel: runLabel(id),
      });
      this.tree.show(follow(id));
    }
    this.draw();
  }

  draw() {
    if (!this.isOpen) return;
    // Before the team channel's first snapshot nothing is counted yet: a dash, not a zero that is not true.
    const known = app.team.counts !== null, b = buckets(app.team.counts || ZERO);
    for (const el of this.el.querySelectorAll("[data-bucket]")) setText(el, known ? count(b[el.dataset.bucket]) : "–");
    setAttr(this.el.querySelector(".counts"), "aria-busy", known ? null : "true");
    this.el.querySelector(".silent-count").hidden = !b.silent; // shown only while a cluster is silent
    const latest = this.matching();
    for (const s of latest) this.seen.set(s.id, s);
    const ids = this.order.next(latest.map((s) => s.id), this.held());
    const now = app.live.now();
    const nodes = [];
    const keep = new Map();
    const focusId = ids.includes(this.focusId) ? this.focusId : ids[0];
    for (const id of ids) {
      const s = app.team.summaries.get(id) || this.seen.get(id);
      if (!s) continue;
      const el = this.rows.get(id) || this._row(id);
      this._fill(el, s, now, !app.team.summaries.has(id), id === focusId);
      keep.set(id, el);
      nodes.push(el);
    }
    for (const id of this.seen.keys()) if (!keep.has(id) && !app.team.summaries.has(id)) this.seen.delete(id);
    this.rows = keep;
    placeChildren(this.list, nodes);
    this.empty.hidden = nodes.length > 0;
    // Opened before the team channel's first snapshot (a click as the page appears): it is on its way.
    const none = app.team.counts === null ? "Loading…" : "No jobs in the last 24 hours";
    setText(this.empty, this.find ? `No trajectory's name has “${this.find}”` : none);
    this.list.hidden = nodes.length === 0;
    const total = Math.max(this.find ? this.found ?? latest.length : app.team.total || 0, latest.length);
    const stuck = this.el.querySelector(".pop-stuck"), stuckWords = stuckCount(app.team.stuck());
    setText(stuck, stuckWords); // in the bar's own line, cut short rather than wrapped
    setAttr(stuck, "title", stuckWords || null);
    setText(this.el.querySelector(".pop-count"), total ? `${count(latest.length)} of ${count(total)}` : "");
    this.el.querySelector(".older").hidden = latest.length >= total;
    this.news.hidden = !this.order.waiting;
    setText(this.news, newsText(this.order.waiting));
    this._block();
    if (this.tree) this.tree.render();
  }

  _row(id) {
    const el = document.createElement("div");
    el.className = "traj";
    el.dataset.traj = id;
    el.innerHTML = `<div class="head" role="treeitem" aria-expanded="false" tabindex="-1" data-head="${id}" data-key="t:${id}">
      <span class="icon" aria-hidden="true"></span><span class="name"></span>
      <button class="menu-button" type="button" tabindex="-1" aria-haspopup="menu">⋯</button>
      <span class="meta"><span class="progress"></span><span class="state"></span><span class="eta"></span><span class="when quiet"></span></span></div>`;
    return el;
  }

  _fill(el, s, now, gone, tabbable) {
    const head = el.firstElementChild;
    const [icon, name, button, meta] = head.children;
    const [progress, state, eta, when] = meta.children;
    const c = colour(s.status);
    el.className = `traj ${app.team.isGlowing(s.id) ? "glow" : ""}${gone ? " gone" : ""}`;
    head.className = `head ${c}`;
    head.tabIndex = tabbable ? 0 : -1;
    setAttr(head, "aria-expanded", String(this.openId === s.id));
    setText(icon, ICON[c]);
    setText(name, s.name);
    setAttr(name, "title", s.name);
    setAttr(button, "aria-label", `Actions of ${s.name}`);
    setText(progress, `${count(s.completed)}/${count(s.total)} jobs completed`);
    setText(state, word(s.status));
    setText(eta, unfinished(s.counts) ? timeLeft(s.eta) : "");
    setAttr(eta, "title", whyUnknown(s.eta, s.counts));
    eta.hidden = !eta.textContent;
    setText(when, ago(s.updated_at, now));
    if (this.openId === s.id && this.tree && this.tree.el.parentNode !== el) el.append(this.tree.el);
  }

  _block() {
    const block = this.el.querySelector(".block");
    block.hidden = false;
    const local = app.me.local;
    const s = app.team.clusters;
    const none = this.el.querySelector(".clusters-none"), live = this.el.querySelector(".clusters-live");
    none.hidden = local || Boolean(s && s.reporting);
    live.hidden = local || !(s && s.reporting);
    this.el.querySelector(".open-clusters").hidden = local;
    if (s && s.reporting) {
      const [n, cpu, memory, disk, network] = live.children;
      setText(n, `Clusters (${s.reporting})`);
      setText(cpu, `CPU ${s.cpu}%`);
      cpu.className = `c-cpu ${s.cpu_high ? "cpu-high" : ""}`;
      setText(memory, `Memory ${s.memory}%`);
      setText(disk, `Disk ${s.disk}%`);
      setText(network, `Network ${s.network} MB/s`);
    }
    const online = this.el.querySelector(".online");
    const p = app.team.presence;
    online.hidden = app.me.single_user || !p;
    // The person reading it is online: a count read just before their own arrival reached the bus never says 0.
    if (p) setText(online, `${Math.max(p.online, 1)} / ${p.members} online`);
    block.hidden = local && online.hidden;
  }
}
