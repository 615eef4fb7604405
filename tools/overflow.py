"""List what sticks out of the text column, or scrolls sideways, on every page of the built site.

Usage::

    python tools/overflow.py [--html _build/html] [--width 1280] [--allow-scroll]

Each page is loaded in headless Chromium, in a frame of the given width (a headless window is at
least 500 px wide), with a small script added to a temporary copy of it. After the page (MathJax
included) has settled, the script lists every element of the article that ends past the right edge
of the article's text, and every element that scrolls sideways (a code block or table wider than
the column). The pages themselves are not changed.
An element inside a box that scrolls or clips sideways is cut at the box's edge and is not listed.
With ``--allow-scroll`` (a phone's width, ``--width 390``) a box that scrolls inside the column
is listed but passes; what ends past the column still fails.
Prints one line per page and one per offending element; exits 1 if any page has one. Needs
Debian's Chromium (``apt-get install chromium``), like ``tools/screenshots.py``.
"""

from __future__ import annotations

import argparse
import html
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from screenshots import CHROMIUM_FLAGS, chromium_path, find_pages

#: The probe: after load (plus time for MathJax), write the offenders into a <pre> that
#: ``--dump-dom`` then shows. MathJax's hidden assistive copies are not drawn and are skipped.
PROBE = """<script>
window.addEventListener("load", () => setTimeout(() => {
  const article = document.querySelector("article.bd-article") || document.querySelector("main");
  // the column is the article's content box: its padding is the margin the text keeps
  const right = article.getBoundingClientRect().right - parseFloat(getComputedStyle(article).paddingRight)
    - parseFloat(getComputedStyle(article).borderRightWidth);
  const found = [];
  // inside a box that scrolls or clips sideways, an element is cut at the box's edge: it does not
  // stick out (the box itself is reported if it ends past the column or scrolls)
  const clipped = (e) => {
    for (let a = e.parentElement; a && a !== article; a = a.parentElement) {
      if (getComputedStyle(a).overflowX !== "visible") return true;
    }
    return false;
  };
  for (const e of article.querySelectorAll("*")) {
    if (e.closest("mjx-assistive-mml")) continue;
    const style = getComputedStyle(e);
    if (style.visibility === "hidden") continue;  // not drawn (a heading's # link until hovered)
    const scrollable = style.overflowX === "auto" || style.overflowX === "scroll";
    const scrolls = scrollable && e.scrollWidth > e.clientWidth + 1;
    const past = e.getBoundingClientRect().right - right;
    if (scrolls || (past > 2 && !clipped(e))) {
      found.push({tag: e.tagName.toLowerCase(), past: Math.round(past),
                  scroll: scrolls ? e.scrollWidth - e.clientWidth : 0,
                  text: (e.textContent || "").trim().slice(0, 70)});
    }
  }
  parent.postMessage(JSON.stringify(found), "*");  // to FRAME's page, which --dump-dom shows
}, 3000));
</script>"""

#: The page around the probed one: an iframe exactly ``width`` pixels wide (a headless window is
#: at least 500 px wide, so a phone's width must be a frame's), and the report the probe posts.
FRAME = """<!DOCTYPE html><html><body style="margin:0">
<iframe src="%(src)s" style="border:0;display:block;width:%(width)dpx;height:2000px"></iframe>
<script>
window.addEventListener("message", (event) => {
  const out = document.createElement("pre");
  out.id = "stddial-overflow";
  out.textContent = event.data;
  document.body.appendChild(out);
});
</script></body></html>"""

TIMEOUT_S = 120


def offenders(chromium: str, page: Path, width: int) -> list[dict]:
    """The elements of ``page`` past the column or scrolling sideways, outermost first."""
    probe_page = page.with_name(f".overflow-probe-{page.name}")
    probe_page.write_text(page.read_text().replace("</body>", PROBE + "</body>", 1))
    frame_page = page.with_name(f".overflow-frame-{page.name}")
    frame_page.write_text(FRAME % {"src": html.escape(probe_page.name), "width": width})
    try:
        with tempfile.TemporaryDirectory(prefix="stddial-chromium-") as profile:
            proc = subprocess.run(
                [
                    chromium,
                    *CHROMIUM_FLAGS,
                    f"--user-data-dir={profile}",
                    f"--window-size={max(width, 500) + 40},2100",
                    "--virtual-time-budget=15000",
                    "--dump-dom",
                    frame_page.resolve().as_uri(),
                ],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=TIMEOUT_S,
            )
    finally:
        probe_page.unlink(missing_ok=True)
        frame_page.unlink(missing_ok=True)
    match = re.search(r'<pre id="stddial-overflow">(.*?)</pre>', proc.stdout, re.S)
    if match is None:
        raise RuntimeError(f"the probe did not report on {page} (chromium exit {proc.returncode})")
    found = json.loads(html.unescape(match.group(1)))
    outermost: list[dict] = []
    for item in found:  # document order: an element comes before what it contains
        if not any(item["text"] and item["text"] in kept["text"] for kept in outermost):
            outermost.append(item)
    return outermost


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python tools/overflow.py", description=__doc__.splitlines()[0])
    parser.add_argument("--html", default="_build/html", type=Path, help="built site")
    parser.add_argument("--width", default=1280, type=int, help="window width in px")
    parser.add_argument("--chromium", default=None, help="Chromium binary")
    parser.add_argument(
        "--allow-scroll",
        action="store_true",
        help="list a box that scrolls sideways inside the column without failing (a phone's width, "
        "where an 80-character code line cannot fit); what sticks out of the column still fails",
    )
    args = parser.parse_args(argv)
    if not (args.html / "index.html").is_file():
        print(f"{args.html}/index.html not found: build the book first (make book)", file=sys.stderr)
        return 2
    chromium = chromium_path(args.chromium)
    bad = 0
    for page in find_pages(args.html):
        found = offenders(chromium, page, args.width)
        failing = [item for item in found if not (args.allow_scroll and item["past"] <= 2)]
        scrolling = len(found) - len(failing)
        print(
            f"{page.relative_to(args.html)}: {len(failing) or 'nothing'} past the column"
            + (f", {scrolling} scrolling inside it" if scrolling else "")
        )
        for item in found:
            print(f"    <{item['tag']}> {item['past']:+d} px, scrolls {item['scroll']} px: {item['text']!r}")
        bad += bool(failing)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
