// How a submission moves: the lifecycle diagram the gateway draws from the transition table it checks
// (GET /submissions/lifecycle.svg), in a modal dialog. The Submissions page opens it from its "How a submission
// moves" link and from the STATUS column's help button; Escape or Close closes it, and focus goes back.
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
      or (dashed) an action of this page's menu. Hover a status for what it means.</p>
    <div class="diagram" aria-busy="true" tabindex="0" role="region" aria-label="The diagram (it scrolls sideways on a narrow screen)"><p class="quiet">Loading…</p></div>
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
    box.replaceChildren(document.importNode(svg, true));
  } catch {
    box.replaceChildren(Object.assign(document.createElement("p"), { className: "red", textContent: "The diagram could not be loaded" }));
  } finally {
    box.removeAttribute("aria-busy");
  }
}
