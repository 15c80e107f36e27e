"""Headless Chromium for the report tests (and docs/screenshot.py): install, dump the DOM, screenshot,
and record every network request the page makes (Chromium's net log)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--hide-scrollbars", "--mute-audio")


def ensure_chromium() -> str:
    """Debian's chromium, installed with apt-get when missing (root; waits for the dpkg lock)."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise RuntimeError("chromium is not installed and cannot be installed here (needs root and apt-get): "
                           "apt-get install chromium")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    cmd = ["apt-get", "install", "-y", "-q", "-o", "DPkg::Lock::Timeout=600", "chromium"]
    if subprocess.run(cmd, env=env, capture_output=True).returncode != 0:
        subprocess.run(["apt-get", "update", "-q", "-o", "DPkg::Lock::Timeout=600"], env=env, capture_output=True)
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"apt-get install chromium failed:\n{proc.stderr[-2000:]}")
    return shutil.which("chromium")


def _run(args: list, work: Path, timeout: int = 120) -> subprocess.CompletedProcess:
    profile = work / "profile"
    profile.mkdir(parents=True, exist_ok=True)
    cmd = [ensure_chromium(), *FLAGS, f"--user-data-dir={profile}", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=work)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc


def page_requests(net_log: Path) -> list[str]:
    """URLs the page asked for, from Chromium's net log: every request job whose initiator is an
    origin (a file:// page's is "null"). The browser's own background requests (clock sync, account
    checks) carry the initiator "not an origin" and are not the page's doing."""
    text = net_log.read_text().rstrip()
    if not text.endswith("}"):  # the browser may exit before closing the log
        text = text.rstrip(",") + "]}"
    log = json.loads(text)
    start_job = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    urls = set()
    for event in log.get("events", []):
        params = event.get("params") or {}
        if event.get("type") == start_job and "url" in params and params.get("initiator") != "not an origin":
            urls.add(str(params.get("url")))
    return sorted(urls)


MEASURED = "rr-measured"  # the id of the element the measuring script writes its JSON result into


def render(page: Path, work: Path, width: int = 1400, height: int = 900, measure: str | None = None) -> dict:
    """Load ``page`` twice: the DOM after scripts ran, and a screenshot; both with a net log.

    ``measure``: a JavaScript expression evaluated in the page once it has loaded and laid out at ``width`` ×
    ``height`` (a third load, of a copy of the page with one more inline script that writes the expression's value
    as JSON into the DOM); its value is returned as "measured".

    Returns {"dom": str, "screenshot": Path, "requests": [every URL the page requested], "measured": value or None}.
    """
    work.mkdir(parents=True, exist_ok=True)
    url = page.resolve().as_uri()
    dom_log, shot_log = work / "dom.netlog.json", work / "shot.netlog.json"
    dom = _run([f"--log-net-log={dom_log}", "--virtual-time-budget=3000", "--dump-dom", url], work).stdout
    shot = work / "screenshot.png"
    _run([f"--log-net-log={shot_log}", f"--window-size={width},{height}", f"--screenshot={shot}", url], work)
    measured = None
    if measure is not None:
        copy = work / f"measured-{page.name}"
        probe = (f"<script>window.addEventListener('load',function(){{var out=document.createElement('pre');"
                 f"out.id='{MEASURED}';out.textContent=JSON.stringify(({measure}));document.body.appendChild(out)}});"
                 "</script>")
        copy.write_text(page.read_text(encoding="utf-8").replace("</body>", probe + "</body>", 1), encoding="utf-8")
        out = _run([f"--window-size={width},{height}", "--virtual-time-budget=3000", "--dump-dom",
                    copy.resolve().as_uri()], work).stdout
        import html
        import re

        found = re.search(rf'<pre id="{MEASURED}">(.*?)</pre>', out, re.S)
        if not found:
            raise RuntimeError(f"the measuring script wrote nothing into {copy}")
        measured = json.loads(html.unescape(found.group(1)))
    requests = sorted(set(page_requests(dom_log)) | set(page_requests(shot_log)))
    return {"dom": dom, "screenshot": shot, "requests": requests, "measured": measured}
