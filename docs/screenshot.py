"""Write docs/report.png: a page of the example report (by default its demo_cxr findings page,
results/report/demo_cxr_findings.html of a finished `make example` run: the leaderboard with its tiers and the
first figures) as headless Chromium shows it at 1400 px; with --section, scrolled to that element.

Usage: python docs/screenshot.py [WORKDIR] [--page report.html] [--section appendix] [--out docs/x.png]
(WORKDIR defaults to the repository root). docs/ holds report.png (the page) and report-appendix.png
(`--page report.html --section appendix --out docs/report-appendix.png`).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from _browser import render  # noqa: E402

PAGE = "demo_cxr_findings.html"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workdir", nargs="?", default=str(REPO))
    parser.add_argument("--page", default=PAGE, help=f"a page in results/report/ (default {PAGE}; the index: "
                                                     "report.html)")
    parser.add_argument("--section", help="the id of an element to scroll to (e.g. appendix)")
    parser.add_argument("--out", default=str(REPO / "docs/report.png"), help="the PNG written")
    args = parser.parse_args(argv)
    page = Path(args.workdir) / "results/report" / args.page
    if not page.is_file():
        sys.exit(f"{page} does not exist: run `make example` (or snakemake) first")
    work = Path(tempfile.mkdtemp(prefix="radrank-shot-"))
    try:
        if args.section:  # the whole page down to 1,500 px below the section's top, cut there
            top = render(page, work, width=1400, height=1500,
                         measure=f"document.getElementById({args.section!r}).getBoundingClientRect().top")
            top = int(top["measured"])
            result = render(page, work, width=1400, height=top + 1500)
            from PIL import Image

            Image.open(result["screenshot"]).crop((0, top, 1400, top + 1500)).save(result["screenshot"])
        else:
            result = render(page, work, width=1400, height=1500)
        if result["requests"]:
            sys.exit(f"the page requested {result['requests']}")
        target = Path(args.out)
        shutil.copyfile(result["screenshot"], target)
        print(f"wrote {target}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
