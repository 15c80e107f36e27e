"""Write docs/report.png: the example report (results/report/report.html of a finished
`make example` run) as headless Chromium shows it at 1400 px.

Usage: python docs/screenshot.py [WORKDIR]   (default: the repository root)
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from _browser import render  # noqa: E402


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    workdir = Path(argv[0]) if argv else REPO
    page = workdir / "results/report/report.html"
    if not page.is_file():
        sys.exit(f"{page} does not exist: run `make example` (or snakemake) first")
    work = Path(tempfile.mkdtemp(prefix="radrank-shot-"))
    try:
        result = render(page, work, width=1400, height=1500)
        if result["requests"]:
            sys.exit(f"the page requested {result['requests']}")
        target = REPO / "docs/report.png"
        shutil.copyfile(result["screenshot"], target)
        print(f"wrote {target}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
