"""GET /graph/{group_id}: the group as one offline page, behind the API key, working in headless Chromium."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from conftest import Api, keyed_api_config  # same folder (pytest prepend import mode)
from mnemobus.shared.config import ApiSettings
from mnemobus.kernel.headless import Browser

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "graphio"))
from graph_support import build_josh  # noqa: E402  (the graphio tests' own helpers)

pytestmark = pytest.mark.anyio
GROUP = "user_josh"
#: where the screenshots go when asked to refresh the committed ones (tests/artefacts); else each test's tmp_path,
#: so `make test` leaves the tree clean
REFRESH = "MNEMOBUS_TEST_ARTEFACTS"
READY = "document.documentElement.dataset.ready"


@pytest.fixture
def api_config() -> ApiSettings:
    return keyed_api_config()


@pytest.fixture
def artefacts(tmp_path: Path) -> Path:
    """The folder a test's screenshots go to: `MNEMOBUS_TEST_ARTEFACTS=tests/artefacts` refreshes the committed ones."""
    chosen = os.environ.get(REFRESH)
    return Path(chosen) if chosen else tmp_path


@pytest.fixture
async def josh_api(api: Api) -> Api:
    await build_josh(api.store, GROUP)  # type: ignore[arg-type]
    return api


def page_url(api: Api) -> str:
    return f"{str(api.http.base_url).rstrip('/')}/graph/{GROUP}"


async def in_browser(api: Api, work: Any) -> Any:
    """Open the group's page in a fresh headless Chromium (the key sent as a header) and run `work(browser)`."""
    url = page_url(api)

    def drive() -> Any:
        with Browser() as browser:
            browser.open(url, headers=api.auth, ready=READY)
            return work(browser)

    return await anyio.to_thread.run_sync(drive)


def click_entity(browser: Browser, name: str) -> None:
    index = browser.evaluate(f"[...document.querySelectorAll('#nodes circle')].findIndex(c => c.textContent === "
                             f"{json.dumps(name)})")
    assert index >= 0, f"no entity {name} on the page"
    browser.click(f'circle[data-i="{index}"]')


def fact_shown(browser: Browser, text: str) -> bool:
    """Whether the fact's edge is drawn (found through the page's own data, by the fact's words)."""
    return bool(browser.evaluate(
        f"(() => {{ const i = JSON.parse(document.getElementById('data').textContent).facts.findIndex("
        f"f => f[3] === {json.dumps(text)}); const l = document.querySelector(`line[data-f=\"${{i}}\"]`);"
        " return i >= 0 && getComputedStyle(l).display !== 'none'; })()"))


def set_date(browser: Browser, day: str) -> None:
    browser.evaluate(f"(() => {{ const d = document.getElementById('asof'); d.value = {json.dumps(day)};"
                     " d.dispatchEvent(new Event('input')); })()")


async def test_graph_page_without_the_api_key_is_401(josh_api: Api) -> None:
    r = await josh_api.http.get(f"/graph/{GROUP}")
    assert r.status_code == 401


async def test_graph_page_of_a_group_holding_nothing_is_404(josh_api: Api) -> None:
    r = await josh_api.http.get("/graph/user_nobody", headers=josh_api.auth)
    assert (r.status_code, r.json()["detail"]) == (404, "group 'user_nobody' holds nothing")


async def test_graph_page_is_one_file_that_allows_no_network(josh_api: Api) -> None:
    r = await josh_api.http.get(f"/graph/{GROUP}", headers=josh_api.auth)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert "default-src 'none'" in r.headers["content-security-policy"] and r.headers["cache-control"] == "no-store"
    assert "src=" not in r.text and "href=" not in r.text  # nothing loaded from anywhere


async def test_page_in_chromium_holds_every_entity_of_the_group(josh_api: Api, artefacts: Path) -> None:
    def names(browser: Browser) -> list[str]:
        browser.screenshot(artefacts / "graph-page-loaded.png")
        return browser.evaluate("[...document.querySelectorAll('#nodes circle')].map(c => c.textContent)")

    assert sorted(await in_browser(josh_api, names)) == [
        "Acme", "Anna", "Berlin", "Josh", "Max", "Paris", "dog", "nurse"]


async def test_clicking_an_entity_lists_its_facts_with_the_turns_they_came_from(josh_api: Api, artefacts: Path) -> None:
    def clicked(browser: Browser) -> str:
        click_entity(browser, "Josh")
        text = browser.wait_for("document.getElementById('facts').innerText.includes('Josh lives in Berlin') &&"
                                " document.getElementById('facts').innerText")
        browser.screenshot(artefacts / "graph-page-josh.png")
        return str(text)

    text = await in_browser(josh_api, clicked)
    assert "Josh lives in Berlin\nfrom 2025-04-01\nJosh (user), 2025-05-01: I moved to Berlin last month." in text


async def test_time_control_hides_a_fact_ended_before_the_chosen_date(josh_api: Api, artefacts: Path) -> None:
    def shown_on(browser: Browser) -> list[bool]:
        seen = []
        for day in ("2025-03-15", "2025-04-02"):  # the job at Acme ended on 2025-04-01
            set_date(browser, day)
            seen.append(fact_shown(browser, "Josh works at Acme"))
        browser.screenshot(artefacts / "graph-page-2025-04-02.png")
        return seen

    assert await in_browser(josh_api, shown_on) == [True, False]


async def test_search_box_finds_an_entity_by_part_of_its_name(josh_api: Api) -> None:
    def search(browser: Browser) -> list[str]:
        browser.evaluate("(() => { const s = document.getElementById('search'); s.value = 'ber';"
                         " s.dispatchEvent(new Event('input')); })()")
        return browser.evaluate("[...document.querySelectorAll('#nodes circle.hit')].map(c => c.textContent)")

    assert await in_browser(josh_api, search) == ["Berlin"]


async def test_page_in_chromium_asks_the_network_for_nothing_but_itself(josh_api: Api) -> None:
    def requests(browser: Browser) -> list[str]:
        click_entity(browser, "Anna")
        browser.wait_for("document.getElementById('facts').innerText.includes('Anna lives in Paris')")
        return [u for u in browser.requested() if not u.startswith("data:")]

    assert await in_browser(josh_api, requests) == [page_url(josh_api)]
