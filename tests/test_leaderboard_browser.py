"""The built site in a real headless Chromium, served over HTTP on 127.0.0.1.

Needs Debian's ``chromium`` and ``chromium-driver`` packages and the ``selenium`` package (pointed
at /usr/bin/chromedriver, so nothing is downloaded). Screenshots land in the pytest tmp dir and in
``test-artifacts/`` at the repository root for a person to look at.
"""

from __future__ import annotations

import functools
import http.server
import json
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from fixtures.leaderboard import factory as F

from leaderboard.site import build_site

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parent.parent
ARTIFACTS = REPO / "test-artifacts"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
if not (CHROMIUM and CHROMEDRIVER):
    pytest.skip("needs Debian's chromium and chromium-driver packages (apt-get install -y chromium chromium-driver)",
                allow_module_level=True)


class _Handler(http.server.SimpleHTTPRequestHandler):
    requests: list[tuple[str, int]]

    def log_request(self, code="-", size="-"):
        self.requests.append((self.path, int(code) if str(code).isdigit() else 0))

    def log_message(self, format, *args):  # noqa: A002 - keep test output clean
        pass


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[tuple[str, Path, list]]:
    root = tmp_path_factory.mktemp("browser")
    data = F.build_board(root)
    site = root / "site"
    build_site(data, site)
    requests: list[tuple[str, int]] = []
    handler = type("Handler", (_Handler,), {"requests": requests})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", data, requests
    finally:
        server.shutdown()
        server.server_close()


def _driver(tmp_path: Path, javascript: bool = True):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run", "--disable-sync", "--disable-extensions",
                 "--window-size=1300,1000", f"--user-data-dir={tmp_path / ('profile-js' if javascript else 'profile')}"):
        opts.add_argument(flag)
    if not javascript:
        opts.add_experimental_option("prefs", {"profile.managed_default_content_settings.javascript": 2})
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)


def _rows(driver) -> list[str]:
    from selenium.webdriver.common.by import By

    return [r.get_attribute("data-entry") for r in driver.find_elements(By.CSS_SELECTOR, "#ranking tbody tr")]


def _screenshot(driver, tmp_path: Path, name: str, width: int = 1300) -> Path:
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(width, min(max(height, 800), 4000))
    shot = tmp_path / name
    driver.save_screenshot(str(shot))
    ARTIFACTS.mkdir(exist_ok=True)
    shutil.copy(shot, ARTIFACTS / name)
    return shot


def _console_errors(driver) -> list[dict]:
    return [e for e in driver.get_log("browser") if e.get("level") in ("SEVERE", "ERROR")]


def test_ranking_sorting_navigation_and_console(served, tmp_path):
    from selenium.webdriver.common.by import By

    base, data, requests = served
    index = json.loads((data / "index.json").read_text())
    expected = [e["entry"] for e in sorted((e for e in index["entries"] if e["gpu"] == "H100"),
                                           key=lambda e: (e["rank"] is None, e["rank"] or 0))]
    driver = _driver(tmp_path)
    errors: list[dict] = []
    try:
        driver.get(f"{base}/index.html")
        assert driver.title.startswith("Overall · H100")
        assert _rows(driver) == expected == ["beta", "alpha", "gamma"]
        name_cell = driver.find_element(By.CSS_SELECTOR, '#ranking tr[data-entry="beta"] td.name a')
        assert name_cell.text == F.HOSTILE_NAME  # shown as text, not run as markup
        assert driver.execute_script("return window.__xss === undefined && !document.querySelector('td script')")

        headers = {h.text.strip(" ↕▲▼"): h for h in driver.find_elements(By.CSS_SELECTOR, "#ranking thead th")}
        kernels_btn = headers["Kernels"].find_element(By.TAG_NAME, "button")
        kernels_btn.click()  # numbers sort descending first: 4, 3, 2 kernels with results
        assert _rows(driver) == ["alpha", "beta", "gamma"]
        assert headers["Kernels"].get_attribute("aria-sort") == "descending"
        assert headers["Full-deck geomean"].get_attribute("aria-sort") == "none"
        kernels_btn.click()
        assert _rows(driver) == ["gamma", "beta", "alpha"]
        assert headers["Kernels"].get_attribute("aria-sort") == "ascending"
        headers["#"].find_element(By.TAG_NAME, "button").click()  # back to the ranking
        assert _rows(driver) == expected
        headers["Full-deck geomean"].find_element(By.TAG_NAME, "button").click()
        assert _rows(driver) == ["gamma", "beta", "alpha"]  # the excluded entry's raw score is the highest
        driver.get(f"{base}/index.html")
        _screenshot(driver, tmp_path, "leaderboard.png")
        errors += _console_errors(driver)

        driver.find_element(By.CSS_SELECTOR, '#ranking tr[data-entry="alpha"] td.name a').click()
        assert driver.current_url.endswith("/entries/alpha__H100.html")
        assert driver.find_element(By.TAG_NAME, "h1").text == "Alpha Model"
        verdicts = [e.text for e in driver.find_elements(By.CSS_SELECTOR, "#problems tbody td:nth-child(2)")]
        assert verdicts == ["correct", "correct", "incorrect", "missing", "correct", "missing"]
        source = driver.find_element(By.ID, "src-level_2_problem_1_sample_0")
        assert source.get_attribute("open") is None
        driver.find_element(By.CSS_SELECTOR, 'a[href="#src-level_2_problem_1_sample_0"]').click()
        assert source.get_attribute("open") is not None
        assert "class ModelNew" in source.find_element(By.TAG_NAME, "code").text
        _screenshot(driver, tmp_path, "leaderboard-entry.png")
        errors += _console_errors(driver)

        driver.find_element(By.LINK_TEXT, "L1 · 1_ReLU").click()
        assert driver.current_url.endswith("/problems/level1_1.html")
        assert driver.find_element(By.TAG_NAME, "h1").text == "1_ReLU"
        errors += _console_errors(driver)

        driver.find_element(By.LINK_TEXT, "Ranking").click()
        driver.find_element(By.LINK_TEXT, "A100").click()
        assert driver.current_url.endswith("/gpu/A100/index.html")
        assert _rows(driver) == ["alpha"]
        driver.find_element(By.LINK_TEXT, "Problems").click()
        driver.find_element(By.LINK_TEXT, "2_Add_Tanh").click()
        assert "No entry has a correct kernel" in driver.find_element(By.TAG_NAME, "main").text
        driver.find_element(By.LINK_TEXT, "How to submit").click()
        assert driver.find_element(By.TAG_NAME, "h1").text == "How to submit"
        errors += _console_errors(driver)
    finally:
        driver.quit()
    assert errors == []
    assert requests and all(status in (200, 304) for _, status in requests), requests
    assert (ARTIFACTS / "leaderboard.png").stat().st_size > 10_000


def test_ranking_is_readable_with_javascript_off(served, tmp_path):
    from selenium.webdriver.common.by import By

    base, _, _ = served
    driver = _driver(tmp_path, javascript=False)
    try:
        driver.get(f"{base}/gpu/H100/level2.html")
        assert _rows(driver) == ["alpha", "beta", "gamma"]
        assert driver.find_elements(By.CSS_SELECTOR, "#ranking th button") == []  # not enhanced: no JS ran
        first = driver.find_element(By.CSS_SELECTOR, "#ranking tbody tr").text
        assert "Alpha Model" in first and "2.00×" in first
        driver.find_element(By.LINK_TEXT, "A100").click()  # the GPU selector is a plain link
        assert _rows(driver) == ["alpha"]
    finally:
        driver.quit()


@pytest.mark.parametrize("width", [1400, 420])
def test_ranking_at_desktop_and_phone_width(served, tmp_path, width):
    """At 420 px the rank, name and headline columns fit without sideways scrolling; at 1400 px all do."""
    from selenium.webdriver.common.by import By

    base, _, _ = served
    driver = _driver(tmp_path)
    try:
        driver.set_window_size(width, 1000)
        driver.get(f"{base}/index.html")
        inner = driver.execute_script("return window.innerWidth")
        assert abs(inner - width) <= 20, inner  # the viewport really is that narrow
        page_w = driver.execute_script("return document.documentElement.scrollWidth")
        wrap = driver.find_element(By.CSS_SELECTOR, ".table-wrap")
        wrap_scroll, wrap_client = driver.execute_script(
            "return [arguments[0].scrollWidth, arguments[0].clientWidth]", wrap)
        assert page_w <= inner and wrap_scroll <= wrap_client, (page_w, inner, wrap_scroll, wrap_client)
        row = driver.find_element(By.CSS_SELECTOR, '#ranking tr[data-entry="alpha"]')
        for sel in ("td.rank", "td.name", "td.primary"):
            cell = row.find_element(By.CSS_SELECTOR, sel)
            right = driver.execute_script("return arguments[0].getBoundingClientRect().right", cell)
            assert cell.is_displayed() and right <= inner, (sel, right, inner)
        assert row.find_element(By.CSS_SELECTOR, "td.primary").text == f"{4 ** (1 / 6):.2f}×"
        model = row.find_elements(By.CSS_SELECTOR, "td.opt")[0]
        assert model.is_displayed() == (width == 1400)  # secondary columns only where there is room
        links = driver.find_elements(By.CSS_SELECTOR, ".downloads a")
        assert [a.text for a in links] == ["CSV", "JSON"]
        _screenshot(driver, tmp_path, f"leaderboard-{width}.png", width=width)
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def demo_served(tmp_path_factory) -> Iterator[str]:
    """The committed demo board (examples/demo-board), built as a visitor gets it."""
    site = tmp_path_factory.mktemp("demo") / "site"
    build_site(REPO / "examples" / "demo-board" / "data", site)
    handler = type("Handler", (_Handler,), {"requests": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("width", [1400, 420])
def test_the_demo_board_as_a_visitor_sees_it(demo_served, tmp_path, width):
    """Every GPU and scope link can be reached at both widths (four levels: the scope bar wraps at 420 px),
    and no entry shows as stale (flagged for a problem changed since evaluation) or waits for evaluation."""
    from selenium.webdriver.common.by import By

    driver = _driver(tmp_path)
    try:
        driver.set_window_size(width, 1000)
        driver.get(f"{demo_served}/index.html")
        inner = driver.execute_script("return window.innerWidth")
        assert abs(inner - width) <= 20, inner
        assert driver.execute_script("return document.documentElement.scrollWidth") <= inner
        links = driver.find_elements(By.CSS_SELECTOR, ".seg a")
        assert [a.text for a in links][-5:] == ["Overall", "Level 1", "Level 2", "Level 3", "Level 4"]
        for a in links:
            box = driver.execute_script("const r = arguments[0].getBoundingClientRect(); return [r.left, r.right]", a)
            assert a.is_displayed() and 0 <= box[0] and box[1] <= inner, (a.text, box, inner)
        assert _rows(driver) == ["worked_solutions_cuda", "worked_solutions_triton"]
        statuses = [r.get_attribute("class") for r in driver.find_elements(By.CSS_SELECTOR, "#ranking tbody tr")]
        assert statuses == ["clean", "clean"]  # neither flagged (e.g. a problem changed since evaluation) nor excluded
        assert "Awaiting evaluation" not in driver.find_element(By.TAG_NAME, "main").text
        _screenshot(driver, tmp_path, f"demo-board-{width}.png", width=width)
        assert _console_errors(driver) == []
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def level4_served(tmp_path_factory) -> Iterator[str]:
    """A board on a stand-in official set with a level 4 (tests/fixtures/level4.py): entries on the overall,
    two of them on the level-4 board as well."""
    from fixtures.level4 import board, config, pin_official, write_official

    from kernelbench.problems import load_board_problems
    from kernelbench.problems.identity import MANIFEST_ENV
    from leaderboard.aggregate import aggregate

    root = tmp_path_factory.mktemp("level4")
    folder = write_official(root)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(MANIFEST_ENV, str(pin_official(folder, root / "manifest.json")))
        board(root, folder)
        aggregate(load_board_problems("kernelbench", folder), config(root))
    build_site(root / "data", root / "site")
    handler = type("Handler", (_Handler,), {"requests": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                             functools.partial(handler, directory=str(root / "site")))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("width", [1400, 420])
def test_the_level_4_board_as_a_visitor_sees_it(level4_served, tmp_path, width):
    """Level 4 is reached from the overall, says it is a board of its own, lists only its entrants (with
    rank, name and headline readable at 420 px) and names who did not attempt it."""
    from selenium.webdriver.common.by import By

    driver = _driver(tmp_path)
    try:
        driver.set_window_size(width, 1000)
        driver.get(f"{level4_served}/index.html")
        inner = driver.execute_script("return window.innerWidth")
        assert abs(inner - width) <= 20, inner
        assert _rows(driver) == ["beta", "alpha", "gamma"]
        also = driver.find_element(By.CSS_SELECTOR, "p.also a")
        assert also.text == "Level 4 (Hugging Face models)"
        tab = driver.find_element(By.LINK_TEXT, "Level 4 (Hugging Face models) · own board")
        box = driver.execute_script("const r = arguments[0].getBoundingClientRect(); return [r.left, r.right]", tab)
        assert tab.is_displayed() and 0 <= box[0] and box[1] <= inner, (box, inner)
        _screenshot(driver, tmp_path, f"level4-overall-{width}.png", width=width)

        also.click()
        assert driver.current_url.endswith("/gpu/H100/level4.html")
        assert driver.find_element(By.ID, "ranking-title").text.startswith(
            "Level 4 (Hugging Face models), not in the overall score on H100")
        note = driver.find_element(By.ID, "separate-note")
        assert note.is_displayed() and "A board of its own, not in the overall score." in note.text
        assert "Not attempted (no level-4 kernel, so not listed): Beta." in note.text
        assert "No baseline file has level-4 times" in note.text
        assert driver.execute_script("return document.documentElement.scrollWidth") <= inner
        assert _rows(driver) == ["gamma", "alpha"]
        row = driver.find_element(By.CSS_SELECTOR, '#ranking tr[data-entry="alpha"]')
        for sel in ("td.rank", "td.name", "td.primary"):
            cell = row.find_element(By.CSS_SELECTOR, sel)
            right = driver.execute_script("return arguments[0].getBoundingClientRect().right", cell)
            assert cell.is_displayed() and right <= inner, (sel, right, inner)
        assert row.find_element(By.CSS_SELECTOR, "td.rank").text == "2"
        assert row.find_element(By.CSS_SELECTOR, "td.primary").text == f"{2 ** 0.5:.2f}×"
        assert [a.text for a in driver.find_elements(By.CSS_SELECTOR, ".downloads a")] == ["CSV", "JSON"]
        _screenshot(driver, tmp_path, f"level4-board-{width}.png", width=width)
        assert _console_errors(driver) == []
    finally:
        driver.quit()
