"""A real headless Chromium for tests of pages and HTML reports.

Chromium comes from Debian's `chromium` package; nothing here downloads a browser. When it is
missing, the first test that needs it installs it with apt-get (the suite's own set-up, so a fresh
machine needs nothing but the README's test command). If it still cannot be had, the test fails:
a page nobody looked at is not a passing test.

Playwright's Python package drives it through `executable_path`. Use `sync_page()` from plain
tests and `async_page()` from asyncio tests (Playwright's sync API refuses to run inside a loop).
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import shutil
import subprocess
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

CHROMIUM = '/usr/bin/chromium'

# As root on a closed network: no sandbox, and no background connections to outside hosts.
CHROMIUM_ARGS = [
    '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage',
]


def ensure_chromium() -> str:
    """The path of Debian's Chromium, installed on first use; fails the test when it cannot be had."""
    if os.access(CHROMIUM, os.X_OK):
        return CHROMIUM
    if os.geteuid() == 0 and shutil.which('apt-get'):
        env = {**os.environ, 'DEBIAN_FRONTEND': 'noninteractive'}
        subprocess.run(['apt-get', 'update', '-q'], env=env, check=False, capture_output=True)
        subprocess.run(['apt-get', 'install', '-y', '-q', 'chromium'], env=env, check=False, capture_output=True)
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"{CHROMIUM} is missing and could not be installed: apt-get install chromium")
    return CHROMIUM


def _launch_options() -> dict[str, Any]:
    # Playwright's launch() gives every browser a fresh, empty profile of its own.
    return {'executable_path': ensure_chromium(), 'headless': True, 'args': list(CHROMIUM_ARGS)}


@contextlib.contextmanager
def sync_page(*, width: int = 1280, height: int = 900) -> Iterator[Any]:
    """A fresh page in a fresh headless Chromium (Playwright's sync API)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(**_launch_options())
        try:
            page = browser.new_page(viewport={'width': width, 'height': height})
            yield page
        finally:
            browser.close()


@contextlib.asynccontextmanager
async def async_page(*, width: int = 1280, height: int = 900) -> AsyncIterator[Any]:
    """A fresh page in a fresh headless Chromium (Playwright's async API)."""
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(**_launch_options())
        try:
            page = await browser.new_page(viewport={'width': width, 'height': height})
            yield page
        finally:
            await browser.close()


def file_url(path: pathlib.Path) -> str:
    return path.resolve().as_uri()


class OpenedFile:
    """A self-contained page opened from a file, with its script errors and network requests
    recorded: `check_clean` asserts it raised none and fetched nothing but files."""

    def __init__(self, page: Any, path: pathlib.Path) -> None:
        self.page, self.errors, self.requests = page, [], []
        page.on("pageerror", lambda exc: self.errors.append(str(exc)))
        page.on("request", lambda request: self.requests.append(request.url))
        page.goto(file_url(path))

    def check_clean(self) -> None:
        assert self.errors == []
        assert [url for url in self.requests if not url.startswith("file:")] == []
