"""Open report.html in headless Chromium (the Debian `chromium` package) through Playwright, for the
browser test, the benchmark and the gallery's screenshots. Playwright drives the system's Chromium:
it never downloads a browser of its own (the tests' machines have no network but the registries).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from typing import Any

from scalestack.errors import UserError

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def chromium_path() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def why_not() -> str | None:
    """None when a report can be opened in headless Chromium here, else the reason."""
    if chromium_path() is None:
        return "chromium is not installed (make test installs it as root)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (pip install -e '.[test]')"
    return None


@contextlib.contextmanager
def browser_page(width: int = 1280, height: int = 900) -> Iterator[tuple[Any, list[str]]]:
    """A fresh headless Chromium page, and the list its console errors and page errors go to."""
    reason = why_not()
    if reason:
        raise UserError(reason)
    from playwright.sync_api import sync_playwright

    errors: list[str] = []
    with sync_playwright() as p:  # launch() gives the browser a fresh, temporary profile
        browser = p.chromium.launch(executable_path=chromium_path(), args=ARGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.on("console", lambda m: errors.append(f"console.{m.type}: {m.text}") if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
            page.route("http*://**", lambda route: (errors.append(f"fetched {route.request.url}"), route.abort()))
            yield page, errors
        finally:
            browser.close()


def open_report(page: Any, path: str, timeout_ms: int = 60000) -> dict[str, Any]:
    """Load report.html and wait for the timeline's first paint; returns its facts (lanes drawn,
    intervals, first-paint time in ms since navigation start)."""
    page.goto("file://" + os.path.abspath(path))
    if not page.evaluate("() => !!document.getElementById('sst-tl')"):
        raise UserError(f"{path} has no timeline")
    page.wait_for_function("() => window.scalestackTimeline && (window.scalestackTimeline.firstPaintMs !== null"
                           " || window.scalestackTimeline.error)", timeout=timeout_ms)
    return page.evaluate("""() => { const t = window.scalestackTimeline;
        return {error: t.error, lanes: t.lanes(), drawnLanes: t.drawnLanes(), intervals: t.intervals(),
                painted: t.paintedColumns(), firstPaintMs: t.firstPaintMs, range: t.visibleRange()}; }""")
