"""The operator console in headless Chromium (Debian's), for the tests that drive it."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from playwright.sync_api import Page, sync_playwright

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@contextmanager
def console_page(gateway: str, api_key: str, width: int = 1400,
                 problems: list[str] | None = None) -> Iterator[Page]:
    """The gateway's console ``width`` px wide with ``api_key`` entered (none: empty), in a
    browser closed on exit. ``problems`` collects every dialog the page opened (a
    ``prompt()`` box, dismissed) and every script error."""
    assert CHROMIUM, "Debian's chromium is needed (.ci/run installs it)"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                    args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": width, "height": 900})
            if problems is not None:
                page.on("dialog", lambda d: (problems.append(f"{d.type}() box: {d.message}"),
                                             d.dismiss()))
                page.on("pageerror", lambda e: problems.append(f"script error: {e}"))
            page.goto(f"{gateway}/console")
            if api_key:
                enter_key(page, api_key)
            yield page
        finally:
            browser.close()


def enter_key(page: Page, api_key: str) -> None:
    page.fill("#api-key", api_key)
    page.dispatch_event("#api-key", "change")


def overflow(page: Page) -> tuple[int, int]:
    """(the page's scroll width, the window's inner width): no horizontal overflow when the
    first is at most the second."""
    width, inner = page.evaluate(
        "[document.scrollingElement.scrollWidth, window.innerWidth]")
    return int(width), int(inner)


def shot(page: Page, folder: Path, name: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / f"console-{name}.png"), full_page=True)
