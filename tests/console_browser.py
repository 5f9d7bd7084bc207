"""The operator console in headless Chromium (Debian's), for the tests that drive it."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from playwright.sync_api import Page, sync_playwright

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@contextmanager
def console_page(gateway: str, api_key: str) -> Iterator[Page]:
    """The gateway's console with ``api_key`` entered, in a browser closed on exit."""
    assert CHROMIUM, "Debian's chromium is needed (.ci/run installs it)"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                    args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(f"{gateway}/console")
            page.fill("#api-key", api_key)
            page.dispatch_event("#api-key", "change")
            yield page
        finally:
            browser.close()


def shot(page: Page, folder: Path, name: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / f"console-{name}.png"), full_page=True)
