"""The rendered book, opened page by page in Debian's chromium (through selenium).

`make book` builds `_build/html`; `make test` then runs this file with KAFKA_EDU_BOOK_HTML pointing
at it. Run alone, the file builds the book into a temporary directory first. The pages are
served over HTTP, as a reader's `python -m http.server -d _build/html` would. Checked: no console
error on any page, every figure loaded and laid out with a non-zero size, every internal link
and every page of `_toc.yml` reachable, the search page finding "TimingWheel", and one
screenshot per part of the book in `screenshots/` beside the HTML.
"""
from __future__ import annotations

import fnmatch
import functools
import importlib.util
import os
import subprocess
import sys
import threading
from html.parser import HTMLParser
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

import pytest
import yaml

from external import CHROMEDRIVER, CHROMIUM, require, require_chromium

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--window-size=1280,900"]
NOT_PAGES = ("_static/", "_sources/", "_images/")


@pytest.fixture(scope="module")
def book(tmp_path_factory) -> Path:
    """The HTML root: `$KAFKA_EDU_BOOK_HTML`, or a fresh build in a temporary directory."""
    built = os.environ.get("KAFKA_EDU_BOOK_HTML")
    if built:
        html = Path(built).resolve()
        assert (html / "index.html").is_file(), f"KAFKA_EDU_BOOK_HTML={built} holds no built book"
        return html
    out = tmp_path_factory.mktemp("book")
    build = subprocess.run([str(Path(sys.executable).with_name("jupyter-book")), "build", "--all", "-W", "-n",
                            "--keep-going", "--path-output", str(out), str(ROOT)],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    return out / "_build" / "html"


@pytest.fixture(scope="module")
def site(book):
    """The book served on a free loopback port; yields its base URL."""
    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(book)))
    thread = threading.Thread(target=server.serve_forever, name="book-http", daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    require_chromium()
    require(importlib.util.find_spec("selenium") is not None, "selenium (pip install -e '.[dev]')")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in CHROMIUM_FLAGS + [f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}"]:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


def pages(book: Path) -> list[str]:
    """Every HTML page of the book, relative to its root."""
    found = (p.relative_to(book).as_posix() for p in book.rglob("*.html"))
    return sorted(p for p in found if not p.startswith(NOT_PAGES))


def toc_parts() -> list[tuple[str, list[str]]]:
    """(caption, pages in order) per part of `_toc.yml`, globs expanded as jupyter-book does."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    sources = sorted(p.relative_to(ROOT).with_suffix("").as_posix()
                     for pattern in ("book/**/*.ipynb", "book/**/*.md") for p in ROOT.glob(pattern))
    parts = [("intro", [toc["root"]])]
    for part in toc["parts"]:
        entries = []
        for chapter in part["chapters"]:
            if "glob" in chapter:
                entries += [s for s in sources if fnmatch.fnmatch(s, chapter["glob"])]
            else:
                entries.append(chapter["file"].removesuffix(".ipynb").removesuffix(".md"))
        parts.append((part["caption"], entries))
    return parts


def load(driver, url: str) -> None:
    driver.get(url)
    driver.execute_script("return document.readyState")   # get() returns once the load event fired


BAD_FIGURES = """
const bad = [];
const content = document.querySelector('article.bd-article') || document.body;
for (const img of content.querySelectorAll('img')) {
  const r = img.getBoundingClientRect();
  if (!img.complete || img.naturalWidth === 0 || r.width === 0 || r.height === 0)
    bad.push(`img ${img.getAttribute('src')}: ${r.width}x${r.height}, natural ${img.naturalWidth}`);
}
for (const svg of content.querySelectorAll('svg:not(svg svg)')) {   // icons (Font Awesome) are no figures
  const r = svg.getBoundingClientRect();
  if ((r.width === 0 || r.height === 0) && !svg.matches('.svg-inline--fa'))
    bad.push(`inline svg ${svg.id || svg.getAttribute('class') || ''}: ${r.width}x${r.height}`);
}
return bad;
"""


def test_every_page_has_no_console_error_and_visible_figures(book, site, browser):
    problems, figures = [], 0
    for page in pages(book):
        load(browser, site + page)
        for entry in browser.get_log("browser"):
            if entry["level"] == "SEVERE":
                problems.append(f"{page}: console: {entry['message']}")
        problems += [f"{page}: {bad}" for bad in browser.execute_script(BAD_FIGURES)]
        figures += browser.execute_script("return document.querySelectorAll('article.bd-article img').length")
    assert not problems, "\n".join(problems)
    assert figures > 50, f"only {figures} figures in the whole book"


class _Anchors(HTMLParser):
    """The ids a page defines and the hrefs/srcs it points to."""

    def __init__(self):
        super().__init__()
        self.ids, self.targets = set(), []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        if tag == "a" and attrs.get("name"):
            self.ids.add(attrs["name"])
        if tag == "a" and attrs.get("href"):
            self.targets.append(attrs["href"])
        if tag == "img" and attrs.get("src"):
            self.targets.append(attrs["src"])


def test_internal_links_resolve(book):
    parsed = {}

    def anchors(page: str) -> _Anchors:
        if page not in parsed:
            parsed[page] = _Anchors()
            parsed[page].feed((book / page).read_text(encoding="utf-8"))
        return parsed[page]

    broken, checked = [], 0
    for page in pages(book):
        for target in anchors(page).targets:
            parts = urlsplit(urljoin("http://book/" + page, target))
            if parts.netloc != "book" or target.startswith(("http:", "https:", "mailto:")):
                continue
            path = unquote(parts.path).lstrip("/") or "index.html"
            if path.endswith("/"):
                path += "index.html"
            checked += 1
            if not (book / path).is_file():
                broken.append(f"{page}: {target} (no {path})")
            elif parts.fragment and path.endswith(".html") and parts.fragment not in anchors(path).ids:
                broken.append(f"{page}: {target} (no id {parts.fragment!r} in {path})")
    assert not broken, "\n".join(broken)
    assert checked > 1000


def test_the_table_of_contents_reaches_every_page(book, site, browser):
    from selenium.webdriver.common.by import By

    load(browser, site + "book/intro.html")
    listed = {urlsplit(a.get_attribute("href")).path.lstrip("/")
              for a in browser.find_elements(By.CSS_SELECTOR, "nav.bd-docs-nav a")}
    captions = [c.text for c in browser.find_elements(By.CSS_SELECTOR, "nav.bd-docs-nav p.caption")]
    missing = []
    for caption, entries in toc_parts():
        if caption != "intro" and caption not in captions:
            missing.append(f"part {caption!r} not in the sidebar {captions}")
        for entry in entries:
            if not (book / f"{entry}.html").is_file():
                missing.append(f"{entry}: not built")
            elif caption != "intro" and f"{entry}.html" not in listed:
                missing.append(f"{entry}: not in the sidebar")
    assert not missing, "\n".join(missing)


def test_search_finds_timing_wheel(site, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    load(browser, site + "search.html?q=TimingWheel")
    results = WebDriverWait(browser, 20).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, "#search-results ul.search li a"))
    assert any("0401_timing_wheel" in a.get_attribute("href") for a in results), \
        [a.get_attribute("href") for a in results]


def test_screenshot_of_the_first_page_of_each_part(book, site, browser):
    from selenium.webdriver.common.by import By

    shots = book.parent / "screenshots"
    shots.mkdir(exist_ok=True)
    for number, (_caption, entries) in enumerate(toc_parts()):
        load(browser, site + f"{entries[0]}.html")
        title = browser.find_element(By.CSS_SELECTOR, "article.bd-article h1").text
        assert title, entries[0]
        png = shots / f"{number}_{Path(entries[0]).name}.png"
        browser.save_screenshot(str(png))
        assert png.stat().st_size > 10_000, f"{png} looks blank"
