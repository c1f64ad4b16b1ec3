"""The browser the page tests rely on: Debian's Chromium, driven by Playwright, on a local page."""

from __future__ import annotations

import pathlib

from tests.browser import async_page, file_url, sync_page

PAGE = """<!doctype html><html><body>
<button id="go" onclick="document.getElementById('out').textContent = 'clicked ' + (1 + 1)">go</button>
<p id="out">waiting</p></body></html>"""


def test_sync_page_runs_scripts_and_clicks(tmp_path: pathlib.Path) -> None:
    page_file = tmp_path / 'page.html'
    page_file.write_text(PAGE)
    with sync_page() as page:
        page.goto(file_url(page_file))
        assert page.text_content('#out') == 'waiting'
        page.click('#go')
        assert page.text_content('#out') == 'clicked 2'
        page.screenshot(path=str(tmp_path / 'shot.png'))
    assert (tmp_path / 'shot.png').read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'


async def test_async_page_runs_inside_an_event_loop(tmp_path: pathlib.Path) -> None:
    page_file = tmp_path / 'page.html'
    page_file.write_text(PAGE)
    async with async_page() as page:
        await page.goto(file_url(page_file))
        await page.click('#go')
        assert await page.text_content('#out') == 'clicked 2'
