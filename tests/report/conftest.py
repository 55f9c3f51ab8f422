"""Headless Chromium for the report's browser tests: Debian's `chromium` package (/usr/bin/chromium, or FAB_CHROMIUM),
driven by Playwright, which never downloads a browser of its own here. Where it is absent the tests skip with the
reason, as in a user's clone; CI installs it (.ci/run) and sets FAB_REQUIRE_BROWSER=1, which turns the skip into a
failure."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--disable-default-apps", "--disable-extensions",
]
"""Chromium's own background traffic is switched off, so that every request a test sees is the page's."""


def chromium_path() -> Path | None:
    found = os.environ.get("FAB_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    return Path(found) if Path(found).is_file() else None


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    path = chromium_path()
    reason = None
    if path is None:
        reason = "no Chromium: install Debian's package (apt-get install chromium) or set FAB_CHROMIUM"
    else:
        try:
            from playwright.sync_api import sync_playwright
        except ImportError:
            reason = "Playwright is not installed (requirements-dev.txt)"
    if reason:
        if os.environ.get("FAB_REQUIRE_BROWSER") == "1":
            pytest.fail(f"{reason}; FAB_REQUIRE_BROWSER=1 forbids skipping the browser tests")
        pytest.skip(reason)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(path), args=CHROMIUM_FLAGS)
        yield launched
        launched.close()


@dataclass
class OpenedPage:
    """A page opened from disk, with everything it logged and asked for while it loaded and was used."""

    page: Any
    console: list[tuple[str, str]] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)

    def text(self, selector: str) -> str:
        return self.page.locator(selector).inner_text()


@pytest.fixture
def open_page(browser):
    contexts = []

    def opener(path: Path) -> OpenedPage:
        context = browser.new_context(viewport={"width": 1400, "height": 900})
        contexts.append(context)
        page = context.new_page()
        opened = OpenedPage(page)
        page.on("console", lambda message: opened.console.append((message.type, message.text)))
        page.on("pageerror", lambda error: opened.console.append(("pageerror", str(error))))
        page.on("request", lambda request: opened.requests.append(request.url))
        page.goto(path.as_uri())
        page.wait_for_load_state("load")
        return opened

    yield opener
    for context in contexts:
        context.close()
