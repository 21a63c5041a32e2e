// My Team's and Clusters' controls for a team's owners and admins: add a member, change a role, remove a member;
// add a cluster (its key shown once), issue a new key, remove a cluster. Each asks first; members see none of them
// (the gateway answers them 403 anyway: gateway/core/roles.py).
import { app } from "./context.js";
import { confirmDialog, esc, formDialog, send, showResult, toast } from "./ui.js";

export const manages = (role) => role === "owner" || role === "admin";
const ROLES = ["owner", "admin", "member"];

/** My Team's extra cells for one member row: their role and, for a manager, Change role and Remove. */
export function memberCells(m, role) {
  if (!manages(role)) return `<td>${esc(m.role)}</td>`;
  return `<td>${esc(m.role)}</td><td class="controls">
    <button type="button" data-role-of="${m.id}" aria-label="Change role of ${esc(m.name)}">Change role</button>
    <button type="button" class="danger" data-remove-member="${m.id}" aria-label="Remove ${esc(m.name)}">Remove</button></td>`;
}

export function memberHead(role) {
  return `<th scope="col">Role</th>${manages(role) ? `<th scope="col"><span class="visually-hidden">Manage</span></th>` : ""}`;
}

export const addMemberButton = (role) => (manages(role) ? `<p><button type="button" class="primary" data-add-member>Add member</button></p>` : "");

/** The Clusters page's keys section, for a manager: each cluster with New key and Remove, and Add cluster. */
export function clusterKeys(list, role) {
  if (!manages(role) || !list) return "";
  const rows = list.map((c) => `<tr><td>${esc(c.name)}</td><td>${c.has_key ? "set" : "none"}</td><td class="controls">
    <button type="button" data-rotate="${c.id}" aria-label="New key for ${esc(c.name)}">New key</button>
    <button type="button" class="danger" data-remove-cluster="${c.id}" aria-label="Remove ${esc(c.name)}">Remove</button></td></tr>`).join("");
  return `<h2>Cluster keys</h2><p><button type="button" class="primary" data-add-cluster>Add cluster</button></p>
    <div class="table-scroll"><table><caption class="visually-hidden">The team's clusters and their keys</caption>
    <thead><tr><th scope="col">Cluster</th><th scope="col">Key</th><th scope="col"><span class="visually-hidden">Manage</span></th></tr></thead>
    <tbody>${rows || `<tr><td colspan="3" class="quiet">No cluster yet</td></tr>`}</tbody></table></div>`;
}

/** A key, shown this once, with a copy button. */
async function showKey(name, key, opener) {
  const shown = formDialog({
    title: `The key of ${name}`,
    fields: `<p>Copy this key now: it won't be shown again. Give it to the cluster as its key (only its hash is kept).</p>
      <label>Key <input name="key" readonly value="${esc(key)}" data-key-shown></label>
      <p><button type="button" data-copy-key>Copy</button></p>`,
    submit: "Done",
    opener,
  });
  const copy = document.querySelector("[data-copy-key]");
  copy?.addEventListener("click", async () => {
    const input = document.querySelector("[data-key-shown]");
    input.select();
    try { await navigator.clipboard.writeText(key); } catch { document.execCommand("copy"); }
    copy.textContent = "Copied";
  });
  await shown;
}

const base = () => `/api/teams/${app.teamId}`;

async function act(request, done) {
  const { ok, body } = await request.catch(() => ({ ok: false, body: { message: "The gateway could not be reached" } }));
  if (!ok) { showResult(false, body); return null; }
  if (done) toast(done);
  return body;
}

/** Wire the controls on `main` once; `changed(what)` redraws ("members" or "clusters") after a change. */
export function wireTeamAdmin(main, { members, clusters, changed }) {
  main.addEventListener("click", async (event) => {
    const button = event.target.closest("button");
    if (!button) return;
    const d = button.dataset;
    const name = (id) => (members().find((m) => m.id === id) || {}).name || `user ${id}`;
    const cluster = (id) => (clusters().find((c) => c.id === id) || {}).name || `cluster ${id}`;
    if (d.addMember !== undefined) {
      const answer = await formDialog({
        title: "Add a member",
        fields: `<label>User (their name or id) <input name="user" required autocomplete="off"></label>
          <label>Role <select name="role">${ROLES.map((r) => `<option ${r === "member" ? "selected" : ""}>${r}</option>`).join("")}</select></label>`,
        submit: "Add member",
        check: (form) => (form.user.value.trim() ? null : "Name the user to add"),
        opener: button,
      });
      if (!answer) return;
      const user = /^\d+$/.test(answer.user.trim()) ? Number(answer.user.trim()) : answer.user.trim();
      if (await act(send(`${base()}/members`, { body: { user, role: answer.role } }), "Member added")) changed("members");
    } else if (d.roleOf) {
      const id = Number(d.roleOf);
      const now = (members().find((m) => m.id === id) || {}).role;
      const answer = await formDialog({
        title: `Change the role of ${name(id)}`,
        fields: `<p class="quiet">Owners and admins manage members and cluster keys; members act on jobs. Only an owner makes or unmakes an owner.</p>
          <label>Role <select name="role">${ROLES.map((r) => `<option ${r === now ? "selected" : ""}>${r}</option>`).join("")}</select></label>`,
        submit: "Change role",
        opener: button,
      });
      if (!answer) return;
      if (await act(send(`${base()}/members`, { body: { user: id, role: answer.role } }), "Role changed")) changed("members");
    } else if (d.removeMember) {
      const id = Number(d.removeMember);
      const sure = await confirmDialog({
        title: `Remove ${name(id)} from the team?`,
        text: "They stop seeing the team's jobs at once, on every device.",
        confirm: "Remove member",
        opener: button,
      });
      if (sure && (await act(send(`${base()}/members/${id}`, { method: "DELETE" }), "Member removed"))) changed("members");
    } else if (d.addCluster !== undefined) {
      const answer = await formDialog({
        title: "Add a cluster",
        fields: `<label>Name <input name="name" required autocomplete="off"></label>`,
        submit: "Add cluster",
        check: (form) => (form.name.value.trim() ? null : "Name the cluster"),
        opener: button,
      });
      if (!answer) return;
      const made = await act(send(`${base()}/clusters`, { body: { name: answer.name.trim() } }));
      if (!made) return;
      if (made.key) await showKey(made.name, made.key, button);
      else toast(`${made.name} is already one of the team's clusters: it keeps its key`, "info");
      changed("clusters");
    } else if (d.rotate) {
      const id = Number(d.rotate);
      const sure = await confirmDialog({
        title: `Issue a new key for ${cluster(id)}?`,
        text: "Its current key stops working at once: the cluster reports nothing until it is given the new one.",
        confirm: "Issue new key",
        opener: button,
      });
      if (!sure) return;
      const rotated = await act(send(`${base()}/clusters/${id}/key`));
      if (rotated) { await showKey(cluster(id), rotated.key, button); changed("clusters"); }
    } else if (d.removeCluster) {
      const id = Number(d.removeCluster);
      const sure = await confirmDialog({
        title: `Remove ${cluster(id)}?`,
        text: "Its key stops working at once. A cluster that still holds jobs is not removed.",
        confirm: "Remove cluster",
        opener: button,
      });
      if (sure && (await act(send(`${base()}/clusters/${id}`, { method: "DELETE" }), "Cluster removed"))) changed("clusters");
    }
  });
}
