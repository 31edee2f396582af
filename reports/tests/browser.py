"""Headless Chromium with the network blocked: the rendered DOM, a screenshot, and every URL
the page tried to fetch (from Chromium's net log).

Chromium is Debian's ``chromium`` package; the tests skip without it on a developer's
machine and fail without it in CI (``CI`` set), where it is part of the setup.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from fixtures.ci import require

# Chromium's own services, which it may call at start whatever the flags; a report never
# names them, so a request to them is not the page's.
BROWSER_HOSTS = ("google.com", "googleapis.com", "gstatic.com", "gvt1.com", "googleusercontent.com")
LOCAL_SCHEMES = ("file:", "data:", "chrome:", "chrome-extension:", "about:", "blob:")
TIMEOUT = 120


@dataclass
class Page:
    dom: str
    requested: list[str]  # URLs other than the file itself and the browser's own services


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    require("headless Chromium is not installed (Debian package: chromium)")
    raise AssertionError("unreachable: require() fails or skips")


def _flags(profile: Path, net_log: Path) -> list[str]:
    return [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        # No network: every proxied request goes to a closed port, every name fails.
        "--proxy-server=127.0.0.1:9",
        "--proxy-bypass-list=<-loopback>",
        "--host-resolver-rules=MAP * ~NOTFOUND",
        f"--log-net-log={net_log}",
    ]


def _requested(net_log: Path) -> list[str]:
    try:
        data = json.loads(net_log.read_text())
    except (OSError, ValueError):
        # Chromium may leave the log's closing brackets out when it exits fast.
        text = net_log.read_text().rstrip().rstrip(",")
        data = json.loads(text + "]}")
    urls = set()
    for event in data.get("events", []):
        url = (event.get("params") or {}).get("url")
        if not isinstance(url, str) or url.startswith(LOCAL_SCHEMES):
            continue
        host = url.split("/")[2] if "//" in url else url
        if any(host == h or host.endswith("." + h) for h in BROWSER_HOSTS):
            continue
        urls.add(url)
    return sorted(urls)


def load(path: Path, *, screenshot: Path | None = None, size: str = "1400,2400") -> Page:
    """Load `path` from file:// with the network blocked; the DOM after rendering, and what
    the page tried to fetch. With `screenshot`, also a PNG of the window."""
    binary = chromium()
    with tempfile.TemporaryDirectory(prefix="logfork-chromium-") as tmp:
        profile, net_log = Path(tmp) / "profile", Path(tmp) / "net.json"
        url = path.resolve().as_uri()
        proc = subprocess.run(
            [binary, *_flags(profile, net_log), "--dump-dom", url],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        requested = _requested(net_log)
        if screenshot is not None:
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            shot = subprocess.run(
                [
                    binary,
                    *_flags(Path(tmp) / "profile2", Path(tmp) / "net2.json"),
                    f"--screenshot={screenshot}",
                    f"--window-size={size}",
                    "--hide-scrollbars",
                    url,
                ],
                capture_output=True,
                text=True,
                timeout=TIMEOUT,
                check=False,
            )
            assert shot.returncode == 0 and screenshot.is_file(), shot.stderr[-2000:]
        return Page(proc.stdout, requested)
