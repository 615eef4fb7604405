"""Take a PNG screenshot of every page of the built site with headless Chromium.

Usage::

    python tools/screenshots.py [--html _build/html] [--out _build/screenshots]
                                        [--width 1280] [--height 2000] [--only PAGE ...]

Every ``*.html`` page under ``--html`` is rendered, except the generated
``genindex`` and ``search`` pages and anything under ``_static`` or
``_sources``. The PNG of ``chapters/01_introduction.html`` is written to
``<out>/chapters__01_introduction.png``; ``--only chapters/01_introduction`` takes that page
alone. A page taller than ``--height`` is cut off: pass a larger height to see all of it.
Needs Debian's Chromium (``apt-get install chromium``); nothing is fetched from the network.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

DEFAULT_CHROMIUM = "/usr/bin/chromium"
SKIP_DIRS = frozenset({"_static", "_sources", ".ipynb_checkpoints"})
SKIP_PAGES = frozenset({"genindex", "search"})
TIMEOUT_S = 60

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
    "--hide-scrollbars",
    "--virtual-time-budget=8000",
)


def find_pages(html_dir: Path) -> list[Path]:
    """All HTML pages of the site worth a screenshot, in a stable order."""
    pages = []
    for root, dirs, files in os.walk(html_dir):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        for name in sorted(files):
            path = Path(root) / name
            if path.suffix != ".html":
                continue
            rel = path.relative_to(html_dir)
            if rel.with_suffix("").as_posix() in SKIP_PAGES:
                continue
            pages.append(path)
    return pages


def png_name(page: Path, html_dir: Path) -> str:
    rel = page.relative_to(html_dir).with_suffix("")
    return "__".join(rel.parts) + ".png"


def chromium_path(explicit: str | None = None) -> str:
    candidate = explicit or os.environ.get("CHROMIUM") or DEFAULT_CHROMIUM
    found = shutil.which(candidate) if not os.path.isabs(candidate) else candidate
    if not found or not os.access(found, os.X_OK):
        raise SystemExit(
            f"Chromium not found at {candidate}. Screenshots need Debian's Chromium: apt-get install chromium"
        )
    return found


def screenshot(chromium: str, page: Path, png: Path, width: int, height: int) -> None:
    """Render one page to ``png``; raise RuntimeError when Chromium fails."""
    with tempfile.TemporaryDirectory(prefix="stddial-chromium-") as profile:
        cmd = [
            chromium,
            *CHROMIUM_FLAGS,
            f"--user-data-dir={profile}",
            f"--screenshot={png}",
            f"--window-size={width},{height}",
            page.resolve().as_uri(),
        ]
        try:
            proc = subprocess.run(
                cmd,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=TIMEOUT_S,
            )
        except subprocess.TimeoutExpired as err:
            raise RuntimeError(f"chromium took over {TIMEOUT_S} s on {page}") from err
    if proc.returncode != 0 or not png.is_file() or png.stat().st_size == 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-10:])
        raise RuntimeError(f"chromium failed on {page} (exit {proc.returncode}):\n{tail}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python tools/screenshots.py",
        description="PNG screenshots of every page of the built book.",
    )
    parser.add_argument("--html", default="_build/html", type=Path, help="built site (default: _build/html)")
    parser.add_argument(
        "--out", default="_build/screenshots", type=Path, help="where the PNGs go (default: _build/screenshots)"
    )
    parser.add_argument("--width", default=1280, type=int)
    parser.add_argument("--height", default=2000, type=int)
    parser.add_argument("--chromium", default=None, help=f"Chromium binary (default: $CHROMIUM or {DEFAULT_CHROMIUM})")
    parser.add_argument(
        "--only",
        nargs="+",
        default=None,
        metavar="PAGE",
        help="only these pages, by their path in the site without .html (e.g. chapters/13_comparison)",
    )
    args = parser.parse_args(argv)

    html_dir: Path = args.html
    if not (html_dir / "index.html").is_file():
        print(f"{html_dir}/index.html not found: build the book first (make book)", file=sys.stderr)
        return 2
    chromium = chromium_path(args.chromium)
    pages = find_pages(html_dir)
    if args.only:
        wanted = {name.removesuffix(".html") for name in args.only}
        pages = [page for page in pages if page.relative_to(html_dir).with_suffix("").as_posix() in wanted]
        missing = wanted - {page.relative_to(html_dir).with_suffix("").as_posix() for page in pages}
        if missing:
            print(f"no such page in {html_dir}: {', '.join(sorted(missing))}", file=sys.stderr)
            return 2
    args.out.mkdir(parents=True, exist_ok=True)

    written, failed = [], []
    for page in pages:
        png = args.out / png_name(page, html_dir)
        png.unlink(missing_ok=True)
        try:
            screenshot(chromium, page, png, args.width, args.height)
        except RuntimeError as err:
            failed.append(str(err))
            print(f"FAILED {page}", file=sys.stderr)
            continue
        written.append(png)
        print(png)

    print(f"{len(written)} screenshots in {args.out}, {len(failed)} failed")
    for message in failed:
        print(message, file=sys.stderr)
    return 1 if failed or not written else 0


if __name__ == "__main__":
    sys.exit(main())
