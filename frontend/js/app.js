// The Jobs single-page app: header ring and popover, dashboard cards, a trajectory's panel, My Team, Clusters.
import { Live } from "./live.js";
import { buckets, colour, ringFill, ringLabel } from "./rules.js";
import { TeamState, TrajectoryState } from "./state.js";
import { JobTree } from "./tree.js";
import { SubmissionsPage, act as actOnSubmissions, submissionActions } from "./submissions.js";
import { ago, closeMenu, esc, menu, post, toast } from "./ui.js";

const $ = (id) => document.getElementById(id);
const team = new TeamState();
const trajectories = new Map(); // id -> { state, users }
let me = null, teamId = null, live = null, cards = [], dirty = false;
let popoverTree = null, popoverOpen = null, panelTree = null, panelId = null;
let submissionsPage = null;
const memberNames = new Map();

// -- rendering: at most once per animation frame, whatever the rate of updates

function schedule() {
  if (dirty) return;
  dirty = true;
  requestAnimationFrame(() => { dirty = false; draw(); });
}

// For the browser tests: how often we drew, and the live connection.
window.gatewayStats = { draws: 0 };

function draw() {
  window.gatewayStats.draws++;
  drawRing();
  if (!$("popover").hidden) drawPopover();
  if (panelTree) panelTree.render();
  if (popoverTree) popoverTree.render();
  route();
}

function drawRing() {
  const c = team.counts || { queued: 0, retrying: 0, running: 0, completed: 0, failed: 0 };
  $("ring-label").textContent = ringLabel(c);
  $("ring-fill").setAttribute("stroke-dasharray", `${Math.round(ringFill(c) * 100)} 100`);
}

function drawPopover() {
  const c = team.counts || { queued: 0, retrying: 0, running: 0, completed: 0, failed: 0 };
  const b = buckets(c);
  const list = team.recent();
  const clusters = me.local ? "" : clustersBlock();
  const online = me.single_user || !team.presence ? "" : `<a href="#/team" class="online">${team.presence.online} / ${team.presence.members} online</a>`;
  const pop = $("popover");
  // The expanded trajectory keeps its tree element; everything else is redrawn, keyboard focus included.
  const keep = popoverTree ? popoverTree.el : null;
  const focusedHead = pop.contains(document.activeElement) ? document.activeElement.dataset.head : undefined;
  pop.innerHTML = `
    <div class="counts" aria-label="Job counts">
      <div><b>${b.queued}</b>Queued</div><div><b>${b.running}</b>Running</div><div><b>${b.done}</b>Done</div><div><b>${b.failed}</b>Failed</div>
    </div>
    <div role="tree" aria-label="Trajectories">${list.map((t) => trajectoryRow(t)).join("") || `<p class="quiet">No jobs in the last 24 hours</p>`}</div>
    <div class="block">${clusters}${online}</div>`;
  if (keep && popoverOpen !== null) {
    const slot = pop.querySelector(`[data-traj="${popoverOpen}"]`);
    if (slot) slot.append(keep);
  }
  if (focusedHead !== undefined) {
    const again = pop.querySelector(`[data-head="${focusedHead}"]`);
    if (again) again.focus();
  }
}

function trajectoryRow(t) {
  const open = popoverOpen === t.id;
  return `<div class="traj ${team.isGlowing(t.id) ? "glow" : ""}" data-traj="${t.id}">
    <div class="head" role="treeitem" tabindex="0" aria-expanded="${open}" data-head="${t.id}">
      <span class="name ${colour(t.status)}">${esc(t.name)}</span>
      <span>${t.completed}/${t.total}</span><span class="quiet">${t.status === "neutral" ? "partly failed" : t.status}</span>
      <span class="quiet">${ago(t.updated_at, live.now())}</span>
    </div></div>`;
}

function clustersBlock() {
  const s = team.clusters;
  if (!s || !s.reporting) return `<span class="quiet">Clusters: none reporting</span> <a href="#/clusters">Open clusters</a>`;
  return `<span>Clusters (${s.reporting})</span>
    <span class="${s.cpu_high ? "cpu-high" : ""}">CPU ${s.cpu}%</span><span>Memory ${s.memory}%</span>
    <span>Disk ${s.disk}%</span><span>Network ${s.network} MB/s</span> <a href="#/clusters">Open clusters</a>`;
}

// -- trajectories: one subscription each, shared by the popover and the panel

function follow(id) {
  let t = trajectories.get(id);
  if (!t) {
    t = { state: new TrajectoryState(id), users: 0 };
    trajectories.set(id, t);
    live.subscribe(`trajectory:${id}`, (m) => {
      if (m.type === "notice") { if (panelId === id) toast(m.title, m.level); return; }
      t.state.apply(m);
      schedule();
    });
  }
  t.users++;
  return t.state;
}

function unfollow(id) {
  const t = trajectories.get(id);
  if (t && --t.users === 0) { trajectories.delete(id); live.unsubscribe(`trajectory:${id}`); }
}

async function act(path) {
  const { body } = await post(path);
  toast(body.message || "Something went wrong", body.unconfirmed && body.unconfirmed.length ? "warning" : "success");
}

function trajectoryMenu(id, x, y) {
  menu(x, y, [
    ["Remove Running Jobs", () => act(`/api/trajectories/${id}/remove-running`)],
    ["Retry Failed Jobs", () => act(`/api/trajectories/${id}/retry-failed`)],
  ], "Trajectory actions");
}

const retryFrames = (analysisId) => act(`/api/analyses/${analysisId}/retry-failed`);

function togglePopoverTrajectory(id) {
  if (popoverOpen !== null) { unfollow(popoverOpen); popoverTree = null; }
  popoverOpen = popoverOpen === id ? null : id;
  if (popoverOpen !== null) {
    const el = document.createElement("div");
    popoverTree = new JobTree(el, live, retryFrames);
    popoverTree.show(follow(id));
  }
  drawPopover();
  if (popoverTree) popoverTree.render(true);
}

function setPopover(open) {
  $("popover").hidden = !open;
  $("ring").setAttribute("aria-expanded", String(open));
  if (open) { drawPopover(); const first = $("popover").querySelector("[data-head]"); if (first) first.focus(); }
  else { closeMenu(); }
}

// -- the panel: one trajectory's jobs at the right of the dashboard

function openPanel(id, name, submission = null) {
  closePanel();
  panelId = id;
  const panel = $("panel");
  panel.hidden = false;
  panel.innerHTML = `<h2><span>${esc(name)}</span><button id="panel-close" aria-label="Close">×</button></h2><div class="tree-host" data-traj="${id}"></div>`;
  const options = submission === null ? {} : {
    filter: (job) => job.submission_id === submission,
    onTaskMenu: (job, x, y) => menu(x, y, submissionActions((body) => actOnSubmissions({ ...body, tasks: [job] })), "Task actions"),
  };
  panelTree = new JobTree(panel.querySelector(".tree-host"), live, retryFrames, options);
  panelTree.show(follow(id));
  $("panel-close").addEventListener("click", closePanel);
  panel.querySelector("h2").addEventListener("contextmenu", (e) => { e.preventDefault(); trajectoryMenu(id, e.clientX, e.clientY); });
}

function closePanel() {
  if (panelId !== null) unfollow(panelId);
  panelId = null; panelTree = null;
  $("panel").hidden = true;
}

// -- pages

function route() {
  if (location.pathname === "/submissions") {
    if (!submissionsPage) {
      submissionsPage = new SubmissionsPage($("main"), team, memberNames, (row) => {
        if (row && row.trajectory_id) openPanel(row.trajectory_id, row.title, row.id);
      });
      submissionsPage.wire();
    }
    return submissionsPage.render();
  }
  const page = location.hash.replace("#", "") || "/";
  if (page === "/team") return drawTeamPage();
  if (page === "/clusters") return drawClustersPage();
  drawDashboard();
}

function drawDashboard() {
  const main = $("main");
  const byId = new Map(cards.map((c) => [c.id, c]));
  for (const s of team.summaries.values()) if (!byId.has(s.id)) byId.set(s.id, { id: s.id, name: s.name });
  const list = [...byId.values()];
  const html = `<h1 class="visually-hidden">Dashboard</h1><div class="cards">${list.map((c) => {
    const s = team.summaries.get(c.id);
    return `<article class="card ${team.isGlowing(c.id) ? "glow" : ""}" data-card="${c.id}">
      <h3 class="${s ? colour(s.status) : ""}">${esc(c.name)}</h3>
      <div class="quiet">${s ? `${s.completed}/${s.total} jobs completed · ${ago(s.updated_at, live.now())}` : "No jobs in the last 24 hours"}</div>
      <button class="menu-button" aria-haspopup="menu" aria-label="Menu of ${esc(c.name)}" data-menu="${c.id}">⋯</button>
    </article>`;
  }).join("")}</div>`;
  if (main.dataset.page !== "dash" || main.innerHTML !== html) { main.innerHTML = html; main.dataset.page = "dash"; }
}

let members = null;
async function drawTeamPage() {
  const main = $("main");
  if (main.dataset.page !== "team") { main.dataset.page = "team"; members = null; }
  if (!members) {
    members = [];
    const r = await fetch(`/api/teams/${teamId}/members`);
    members = (await r.json()).members || [];
  }
  const online = new Set(team.presence ? team.presence.users : []);
  main.innerHTML = `<h1>My Team</h1>${me.single_user ? "" : `<p>${online.size} / ${members.length} online</p>`}
    <table><thead><tr><th>Member</th><th>Status</th></tr></thead><tbody>${members.map((m) =>
      `<tr><td>${esc(m.name)}</td><td>${me.single_user ? "" : online.has(m.id) ? "● online" : "○ offline"}</td></tr>`).join("")}</tbody></table>`;
}

function drawClustersPage() {
  const main = $("main");
  main.dataset.page = "clusters";
  if (me.local) { main.innerHTML = `<h1>Clusters</h1><p class="quiet">Not available when the app runs locally.</p>`; return; }
  const s = team.clusters;
  const rows = s ? s.clusters.map((c) => `<tr><td>${esc(c.name)}</td><td class="${c.cpu >= 85 ? "cpu-high red" : ""}">${c.cpu}%</td>
    <td>${c.memory}%</td><td>${c.disk}%</td><td>${c.network} MB/s</td><td>${c.live ? "live" : "silent"}</td></tr>`).join("") : "";
  main.innerHTML = `<h1>Clusters</h1><table><thead><tr><th>Cluster</th><th>CPU</th><th>Memory</th><th>Disk</th><th>Network</th><th></th></tr></thead>
    <tbody>${rows || `<tr><td colspan="6" class="quiet">No cluster reports metrics</td></tr>`}</tbody></table>`;
}

// -- signing in

const SIGN_IN_NOTES = {
  ended: "Your session has ended: sign in again.",
  expired: "That sign-in link has expired or was revoked.",
};

async function signIn() {
  const main = $("main");
  const note = SIGN_IN_NOTES[new URLSearchParams(location.search).get("signin")];
  const users = await fetch("/api/sign-in/users");
  if (!users.ok) {
    main.innerHTML = `<h1>Sign in</h1>${note ? `<p class="quiet">${note}</p>` : ""}
      <p>Open the link with your token (<code>/?token=…</code>) to sign in.</p>`;
    return;
  }
  const list = (await users.json()).users;
  main.innerHTML = `<h1>Who are you?</h1><div class="picker">${list.map((u) => `<button data-user="${u.id}">${esc(u.name)}</button>`).join("")}</div>`;
  main.addEventListener("click", async (e) => {
    const b = e.target.closest("[data-user]");
    if (!b) return;
    await fetch("/api/sign-in", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ user_id: Number(b.dataset.user) }) });
    location.reload();
  });
}

// -- wiring

function wire() {
  $("ring").addEventListener("click", () => setPopover($("popover").hidden));
  document.addEventListener("keydown", (e) => {
    if (e.key === "Escape") { if (document.querySelector(".menu")) closeMenu(); else if (!$("popover").hidden) { setPopover(false); $("ring").focus(); } }
  });
  document.addEventListener("click", (e) => {
    // The path, not the target: a click may have redrawn (detached) the element it landed on.
    const inside = (sel) => e.composedPath().some((n) => n instanceof Element && n.matches(sel));
    if (!inside(".menu")) closeMenu();
    if (!$("popover").hidden && !inside("#popover") && !inside("#ring") && !inside(".menu")) setPopover(false);
  });
  $("popover").addEventListener("click", (e) => {
    const head = e.target.closest("[data-head]");
    if (head) togglePopoverTrajectory(Number(head.dataset.head));
  });
  $("popover").addEventListener("keydown", (e) => {
    const head = e.target.closest("[data-head]");
    if (head && (e.key === "Enter" || e.key === " ")) { e.preventDefault(); togglePopoverTrajectory(Number(head.dataset.head)); }
    if (head && e.key === "ContextMenu") { const r = head.getBoundingClientRect(); trajectoryMenu(Number(head.dataset.head), r.left + 20, r.bottom); }
  });
  $("popover").addEventListener("contextmenu", (e) => {
    const traj = e.target.closest("[data-traj]");
    if (!traj) return;
    e.preventDefault();
    trajectoryMenu(Number(traj.dataset.traj), e.clientX, e.clientY);
  });
  $("main").addEventListener("click", (e) => {
    const button = e.target.closest("[data-menu]");
    if (!button) return;
    e.stopPropagation();
    const id = Number(button.dataset.menu);
    const name = button.closest(".card").querySelector("h3").textContent;
    const r = button.getBoundingClientRect();
    menu(r.left, r.bottom, [["Compute jobs", () => openPanel(id, name)]], `Menu of ${name}`);
  });
  $("team-switch").addEventListener("change", (e) => { localStorage.setItem("team", e.target.value); location.reload(); });
  window.addEventListener("hashchange", () => { $("main").dataset.page = ""; schedule(); });
  setInterval(schedule, 1000); // ages keep moving with the server's clock
}

// -- the session: renewed before its token expires, without a reload

let renewal = null, sessionEnds = 0;
function scheduleRenewal(expiresAt, serverNow) {
  clearTimeout(renewal);
  // No later expiry: the session has reached its maximum age. When it ends the socket closes (4001), the
  // renewal then is refused, and the person signs in again.
  if (expiresAt <= sessionEnds) return;
  sessionEnds = expiresAt;
  const lifetime = expiresAt - serverNow; // both from the server's clock: a skewed browser clock does not matter
  renewal = setTimeout(renewSession, Math.max(1000, lifetime * 0.8));
}

async function renewSession() {
  const response = await fetch("/api/session/renew", { method: "POST" }).catch(() => null);
  // Expired, revoked or past its maximum age: sign in again.
  if (response && response.status === 401) { location.assign("/?signin=ended"); return; }
  if (!response || !response.ok) { // rate limited or unreachable: the session is still good, try again shortly
    const wait = Number(response && response.headers.get("Retry-After")) || 5;
    await new Promise((resolve) => setTimeout(resolve, wait * 1000));
    return renewSession();
  }
  const body = await response.json();
  scheduleRenewal(body.expires_at, body.time);
}

async function start() {
  const response = await fetch("/api/me");
  if (!response.ok) return signIn();
  me = await response.json();
  if (!me.teams.length) { $("main").textContent = "You are not a member of any team."; return; }
  const saved = Number(localStorage.getItem("team"));
  teamId = me.teams.some((t) => t.id === saved) ? saved : me.teams[0].id;
  $("team-switch").innerHTML = me.teams.map((t) => `<option value="${t.id}" ${t.id === teamId ? "selected" : ""}>${esc(t.name)}</option>`).join("");
  if (me.local) $("nav-clusters").hidden = true;
  live = new Live((status) => {
    $("conn").textContent = status === "reconnecting" ? "reconnecting…" : status === "connecting" ? "connecting…" : "";
    document.body.dataset.live = status;
  }, renewSession);
  scheduleRenewal(me.expires_at, me.time);
  live.subscribe(`team:${teamId}`, (m) => { team.apply(m); if (m.type === "glow") setTimeout(schedule, 3600); schedule(); });
  live.start();
  window.gatewayLive = live;
  cards = (await (await fetch(`/api/teams/${teamId}/trajectories`)).json()).trajectories || [];
  for (const m of (await (await fetch(`/api/teams/${teamId}/members`)).json()).members || []) memberNames.set(m.id, m.name);
  wire();
  schedule();
}

start();
