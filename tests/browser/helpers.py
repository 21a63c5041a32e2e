"""What the browser tests share: signing in, opening a tree's groups, the page's errors, and the checks
every view gets (an accessibility audit by axe-core, nothing overlapping, nothing off-screen)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.browser import open_groups, sign_in  # noqa: F401  (the tests import them from here too)
from tests.conftest import node_tools

ROOT = Path(__file__).resolve().parents[2]


def csp_violations(page: Any, errors: list[str]) -> None:
    """What the Content-Security-Policy refused (an inline style or script) is a bug like any page error."""
    page.on(
        "console",
        lambda m: errors.append(m.text) if m.type == "error" and "Content Security Policy" in m.text else None,
    )


async def axe_violations(page: Any, impacts: tuple[str, ...] = ("serious", "critical")) -> list[dict[str, Any]]:
    """axe-core's audit of the page as it is now (the npm package in tests/tools, injected like a test's own
    script: the page is opened with bypass_csp). Returns the violations of these impacts, each with the
    elements it found."""
    if not await page.evaluate("typeof window.axe !== 'undefined'"):
        axe = node_tools("the accessibility audit (axe-core)") / "node_modules" / "axe-core" / "axe.min.js"
        await page.add_script_tag(path=str(axe))
    result = await page.evaluate(
        """async (impacts) => {
            const r = await axe.run(document, { resultTypes: ['violations'] });
            return r.violations.filter(v => impacts.includes(v.impact)).map(v => ({
                id: v.id, impact: v.impact, help: v.help,
                nodes: v.nodes.slice(0, 5).map(n => [n.target.join(' '), n.failureSummary]),
            }));
        }""",
        list(impacts),
    )
    return list(result)


# In the page: every interactive element and every run of text in `scope`, as the person sees them (clipped by
# their scrolling or clipping ancestors; hidden or scrolled-away ones left out). Two of them overlapping, or one
# reaching past the viewport with no ancestor clipping it, is a problem; nested ones (a word inside its button)
# are not compared.
_LAYOUT = """(scope) => {
  const W = document.documentElement.clientWidth, H = document.documentElement.clientHeight;
  const problems = [];
  if (document.documentElement.scrollWidth > W + 1) problems.push(`the page scrolls sideways: ${document.documentElement.scrollWidth} > ${W}`);
  const clips = (el) => { const cs = getComputedStyle(el); return cs.overflowX !== 'visible' || cs.overflowY !== 'visible'; };
  const hiddenBy = (el) => { for (let a = el; a; a = a.parentElement) { const cs = getComputedStyle(a); if (cs.display === 'none' || cs.visibility === 'hidden' || cs.opacity === '0') return true; } return false; };
  const clipRect = (el, self) => {
    let r = { l: 0, t: 0, r: W, b: H }, clipped = false;
    for (let a = self ? el : el.parentElement; a && a !== document.documentElement; a = a.parentElement) {
      if (!clips(a)) continue;
      clipped = true;
      const q = a.getBoundingClientRect();
      r = { l: Math.max(r.l, q.left), t: Math.max(r.t, q.top), r: Math.min(r.r, q.right), b: Math.min(r.b, q.bottom) };
    }
    return [r, clipped];
  };
  const name = (el) => (el.id ? '#' + el.id : el.tagName.toLowerCase() + (el.className && typeof el.className === 'string' ? '.' + el.className.trim().split(/\\s+/).join('.') : ''))
    + (el.textContent ? ` "${el.textContent.trim().slice(0, 30)}"` : '');
  const boxes = [];
  const add = (el, rect, text) => {
    if (!rect.width || !rect.height || hiddenBy(el)) return;
    const [clip, clipped] = clipRect(el, Boolean(text));
    if (!clipped && (rect.left < -1 || rect.top < -1 || rect.right > W + 1 || rect.bottom > H + 1))
      problems.push(`${name(el)} reaches past the viewport: ${Math.round(rect.left)},${Math.round(rect.top)} to ${Math.round(rect.right)},${Math.round(rect.bottom)} of ${W}x${H}`);
    const r = { l: Math.max(rect.left, clip.l), t: Math.max(rect.top, clip.t), r: Math.min(rect.right, clip.r), b: Math.min(rect.bottom, clip.b) };
    if (r.r - r.l < 1 || r.b - r.t < 1) return; // scrolled or clipped away
    boxes.push({ el, r, text });
  };
  const roots = [...document.querySelectorAll(scope)];
  for (const root of roots) {
    for (const el of [root, ...root.querySelectorAll('a[href], button, select, input, textarea, [tabindex], [role=menuitem], [role=menuitemcheckbox], [role=tab]')])
      if (el.matches('a[href], button, select, input, textarea, [tabindex], [role=menuitem], [role=menuitemcheckbox], [role=tab]') && !el.closest('svg')) add(el, el.getBoundingClientRect(), false);
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      if (!n.textContent.trim() || !n.parentElement || n.parentElement.closest('option, script, style, svg')) continue;
      const range = document.createRange(); range.selectNodeContents(n);
      for (const rect of range.getClientRects()) add(n.parentElement, rect, true);
    }
  }
  // Interactive rows of a list (a treeitem, a table row) hold their texts and buttons: compare only what they hold.
  const container = (el) => el.matches('[role=treeitem], tr, .traj > .head');
  for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
    const a = boxes[i], b = boxes[j];
    if (a.el === b.el || a.el.contains(b.el) || b.el.contains(a.el)) continue;
    if ((!a.text && container(a.el)) || (!b.text && container(b.el))) continue;
    const w = Math.min(a.r.r, b.r.r) - Math.max(a.r.l, b.r.l), h = Math.min(a.r.b, b.r.b) - Math.max(a.r.t, b.r.t);
    if (w > 1 && h > 1) problems.push(`${name(a.el)} and ${name(b.el)} overlap by ${Math.round(w)}x${Math.round(h)}`);
  }
  return [...new Set(problems)];
}"""


async def layout_problems(page: Any, scope: str) -> list[str]:
    """What overlaps or runs off-screen among the interactive elements and texts of `scope` (a selector)."""
    return list(await page.evaluate(_LAYOUT, scope))


async def unfold(page: Any, trajectory_id: int) -> None:
    """A trajectory whose work is over sits under the dashboard's "N finished ..." fold: open it, as a person would."""
    button = page.locator(f"[data-menu='{trajectory_id}']")
    await button.wait_for(state="attached")
    if await button.evaluate("b => !!b.closest('details.finished-fold:not([open])')"):
        await page.click("details.finished-fold > summary")
