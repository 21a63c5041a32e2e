// How a submission moves: the lifecycle diagram the gateway draws from the transition table it checks
// (GET /submissions/lifecycle.svg), in a modal dialog. The Submissions page opens it from its "How a submission
// moves" link and from the STATUS column's help button; Escape or Close closes it, and focus goes back. On a narrow
// screen the same table is laid out downwards instead (`steps`: each status, what it means, the moves out of it),
// read from the drawn diagram so the two cannot disagree: the wide picture would scroll sideways or shrink its words
// past reading.
import { countDialog, focusBack } from "./ui.js";

let diagram = null; // the SVG's text: the table only changes with the gateway, so it is read once per page

async function read() {
  if (diagram === null) {
    const response = await fetch("/submissions/lifecycle.svg");
    if (!response.ok) throw new Error(`the diagram answered ${response.status}`);
    diagram = await response.text();
  }
  return diagram;
}

/** The dialog with the diagram, inline (its text is text: a screen reader reads its title and description). */
export async function showLifecycle(opener = document.activeElement) {
  const dlg = document.createElement("dialog");
  dlg.className = "dialog lifecycle";
  dlg.setAttribute("aria-labelledby", "lifecycle-heading");
  dlg.innerHTML = `<h2 id="lifecycle-heading">How a submission moves</h2>
    <p class="quiet">Each arrow names what moves a submission on: where its cluster says its data is, what its tasks do,
      or (dashed) an action of this page's menu.<span class="hover-hint"> Hover a status for what it means.</span></p>
    <div class="diagram" aria-busy="true" tabindex="0" role="region" aria-label="The diagram"><p class="quiet">Loading…</p></div>
    <div class="dialog-buttons"><button type="button" class="primary close">Close</button></div>`;
  const box = dlg.querySelector(".diagram");
  dlg.querySelector(".close").addEventListener("click", () => dlg.close());
  // Escape closes the dialog (the browser does it), and nothing else: the page's own Escape is not for it.
  dlg.addEventListener("keydown", (e) => { if (e.key === "Escape") e.stopPropagation(); });
  dlg.addEventListener("close", () => {
    dlg.remove();
    focusBack(opener);
    document.dispatchEvent(new CustomEvent("menuclosed")); // lists that waited catch up
  });
  document.body.append(dlg);
  countDialog(dlg);
  dlg.showModal();
  dlg.querySelector(".close").focus();
  try {
    const svg = new DOMParser().parseFromString(await read(), "image/svg+xml").documentElement;
    if (svg.nodeName !== "svg") throw new Error("not an SVG");
    const drawn = document.importNode(svg, true);
    box.replaceChildren(drawn, steps(drawn));
  } catch {
    box.replaceChildren(Object.assign(document.createElement("p"), { className: "red", textContent: "The diagram could not be loaded" }));
  } finally {
    box.removeAttribute("aria-busy");
  }
}

/** The diagram's statuses and moves laid out downwards, for a narrow screen (the stylesheet shows one of the two):
 * where a submission starts, then each status in its colour with its meaning and the moves leaving it (dashed: an
 * action of the page's menu). */
function steps(svg) {
  const colour = {}, meaning = {};
  const statuses = [...svg.querySelectorAll("g.status")].map((g) => {
    const status = g.dataset.status;
    colour[status] = g.dataset.colour || "neutral";
    meaning[status] = (g.querySelector("title")?.textContent || "").replace(`${status}: `, "");
    return status;
  });
  const moves = [...svg.querySelectorAll("g.transition")].map((g) => ({ ...g.dataset, label: g.querySelector("text").textContent }));
  const sources = [...new Set(moves.map((m) => m.source).filter((s) => !(s in colour))), ...statuses];
  const list = el("ol", "steps");
  list.setAttribute("aria-label", "Each status and the moves out of it");
  for (const source of sources) {
    const item = el("li", "step");
    item.dataset.status = source;
    const known = source in colour;
    item.append(el("span", known ? `state ${colour[source]}` : "state start", known ? source : "A submission starts"));
    if (meaning[source]) item.append(el("p", "meaning", meaning[source]));
    const out = el("ul", "moves");
    for (const m of moves.filter((x) => x.source === source)) {
      const move = el("li", `move ${m.cause === "action" ? "action" : "cluster"}`);
      Object.assign(move.dataset, { source: m.source, target: m.target, cause: m.cause });
      move.append("to ", el("span", colour[m.target], m.target), el("span", "label", m.label));
      out.append(move);
    }
    if (out.children.length) item.append(out);
    list.append(item);
  }
  return list;
}

function el(tag, className, text) {
  const e = document.createElement(tag);
  if (className) e.className = className;
  if (text !== undefined) e.textContent = text;
  return e;
}
