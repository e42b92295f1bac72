"""The book: it builds with warnings as errors, publishes only its pages, and each chapter page
works in a real browser (headless Chromium): no console errors, math typeset, figures
present, "Show solution" toggles, no hidden-test text visible.  Screenshots go to
test-artifacts/screenshots/<page>.png, and one per figure to test-artifacts/figures/<page>-NN.png
(with <page>.tsv: each file and its alt text).
"""

from __future__ import annotations

import functools
import http.server
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.helpers import (
    ROOT,
    chapter_ids,
    hidden_test_lines,
    missing_piece,
    solution_lines_of,
)

HTML = ROOT / "_build" / "html"
# one worker builds and checks the book
pytestmark = pytest.mark.xdist_group("book")
SHOTS = ROOT / "test-artifacts" / "screenshots"


# Session scope: xdist may hand this worker other modules' tests between these, and a
# module-scoped fixture would then be torn down and the book rebuilt several times.
@pytest.fixture(scope="session")
def built_book() -> Path:
    """Build the book exactly as `make book` does (pages from solutions, then Jupyter Book -W
    --all: a fresh build, so a stale or half-written _build/ cannot turn into a warning)."""
    subprocess.run(
        [sys.executable, "tools/book_pages.py"], cwd=ROOT, check=True
    )
    _jupyter_book_build()
    return HTML


def _jupyter_book_build(*extra: str, cwd: Path = ROOT) -> None:
    jb = Path(sys.executable).with_name("jupyter-book")
    proc = subprocess.run(
        [str(jb), "build", ".", "-W", "--keep-going", "--all", *extra],
        cwd=cwd,
        capture_output=True,
        text=True,
    )
    problems = [
        line
        for line in (proc.stdout + proc.stderr).splitlines()
        if "WARNING" in line or "ERROR" in line or "Traceback" in line
    ]
    assert proc.returncode == 0, (
        "book build failed (warnings are errors):\n"
        + "\n".join(problems[:20])
        + f"\n--- end of output ---\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    )


@pytest.fixture(scope="session")
def book_without_solutions(tmp_path_factory) -> Path:
    """The book as `make book SOLUTIONS=0` builds it, in a copy of the book's sources of its own
    (the pages are written there, so nothing else that builds the book can interleave)."""
    copy = tmp_path_factory.mktemp("book-without-solutions")
    for name in ("book", "notebooks", "results"):
        shutil.copytree(
            ROOT / name,
            copy / name,
            ignore=shutil.ignore_patterns("chapters", "__pycache__"),
        )
    for name in ("_config.yml", "_toc.yml"):
        shutil.copy2(ROOT / name, copy / name)
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "tools" / "book_pages.py"),
            "--no-solutions",
            "--out",
            str(copy / "book" / "chapters"),
        ],
        cwd=ROOT,
        check=True,
    )
    _jupyter_book_build(cwd=copy)
    return copy / "_build" / "html"


def test_book_without_solutions_shows_no_solution_line(
    book_without_solutions,
):
    import html as _html

    for cid in chapter_ids():
        page = book_without_solutions / "book" / "chapters" / f"{cid}.html"
        plain = _html.unescape(page.read_text(encoding="utf-8"))
        assert "NotImplementedError" in plain, (
            f"{cid}: the page shows no exercise stub"
        )
        leaked = [line for line in solution_lines_of(cid) if line in plain]
        assert not leaked, (
            f"{cid}: solution lines in the SOLUTIONS=0 build: {leaked[:3]}"
        )
    # Chapter pages, their sources and downloads (the contract page states formulas on purpose),
    # compared as whole lines.
    everything = set().union(
        *(
            _lines_of(p, p.read_text(encoding="utf-8", errors="replace"))
            for p in book_without_solutions.rglob("*")
            if p.suffix in {".html", ".ipynb", ".txt"}
            and ("chapters" in p.parts or "_downloads" in p.parts)
        )
    )
    for cid in chapter_ids():
        leaked = sorted(solution_lines_of(cid) & everything)
        assert not leaked, (
            f"solution lines of {cid} somewhere in the SOLUTIONS=0 build: {leaked[:3]}"
        )


@pytest.mark.parametrize("cid", chapter_ids())
def test_pages_without_solutions_show_no_output_the_solutions_made(cid):
    """SOLUTIONS=0: no visible test says "passed" under a stub, and no cell that used an answer
    (directly or through another cell) shows what the answer computed; outputs that owe nothing
    to an answer (stored results, worked examples) stay."""
    import nbformat

    sys.path.insert(0, str(ROOT / "tools"))
    from book_pages import answer_outputs, page_from_solution

    source = nbformat.read(
        ROOT / "solutions" / cid / f"{cid}.ipynb", as_version=4
    )
    page = page_from_solution(source, solutions=False)
    texts = [
        str(c.get("outputs")) for c in page.cells if c.cell_type == "code"
    ]
    assert not any("\N{CHECK MARK}" in t for t in texts), (
        f"{cid}: a visible test shows its pass without solutions"
    )
    made = answer_outputs(source)
    assert made and all(
        not source.cells[i].metadata.get("nbgrader", {}).get("solution")
        or i in made
        for i in range(len(source.cells))
        if source.cells[i].cell_type == "code"
    )
    kept = [
        c for c in page.cells if c.cell_type == "code" and c.get("outputs")
    ]
    assert kept, (
        f"{cid}: the page without solutions lost every output, those of the stored results too"
    )


def test_chapter_pages_offer_the_student_notebook(built_book):
    """The download at the top of each page is the student release, shipped with the book."""
    for cid in chapter_ids():
        html = (built_book / "book" / "chapters" / f"{cid}.html").read_text(
            encoding="utf-8"
        )
        assert re.search(
            rf'class="reference download internal"[^>]*href="[^"]*_downloads/\w+/{cid}.ipynb"',
            html,
        ), f"{cid}: no download link to the student notebook"
        shipped = list((built_book / "_downloads").glob(f"*/{cid}.ipynb"))
        assert len(shipped) == 1, (
            f"{cid}: the notebook is not shipped with the book ({shipped})"
        )
        assert (
            shipped[0].read_bytes()
            == (ROOT / "notebooks" / cid / f"{cid}.ipynb").read_bytes()
        ), f"{cid}: the shipped notebook is not the student release"
        # The theme's own download menu would hand out the page's source, solutions included.
        assert "btn-download-source-button" not in html, (
            f"{cid}: the theme offers the page's source for download"
        )


def test_book_publishes_only_toc_pages(built_book):
    pages = {
        p.relative_to(built_book).as_posix()
        for p in built_book.rglob("*.html")
    }
    for forbidden in ("solutions/", "autograde/", "notebooks/", "tests/"):
        assert not [p for p in pages if p.startswith(forbidden)], (
            f"{forbidden} leaked into the HTML"
        )
    for cid in chapter_ids():
        assert f"book/chapters/{cid}.html" in pages, (
            f"chapter {cid} missing from the book (listed in _toc.yml?)"
        )


def test_book_has_no_hidden_tests_or_markers(built_book):
    hidden = hidden_test_lines()
    for page in built_book.rglob("*"):
        if (
            page.suffix not in {".html", ".ipynb", ".txt", ".js", ".md"}
            or "_static" in page.parts
        ):
            continue
        text = page.read_text(encoding="utf-8", errors="replace")
        for marker in (
            "BEGIN HIDDEN TESTS",
            "END HIDDEN TESTS",
            "### BEGIN SOLUTION",
            "### END SOLUTION",
        ):
            assert marker not in text, (
                f"{page.relative_to(built_book)} contains the nbgrader marker {marker!r}"
            )
        shown = _lines_of(page, text)
        for cid, lines in hidden.items():
            leaked = sorted(lines & shown)
            assert not leaked, (
                f"{page.relative_to(built_book)} shows hidden tests of {cid}: {leaked[:3]}"
            )


def _lines_of(page: Path, text: str) -> set[str]:
    """The stripped lines a reader could see in a built file: notebook cell sources and outputs,
    or the text of a page without its tags.  Compared as whole lines, as the release check does:
    a short hidden line (``mine.double()``) may be part of a longer visible one."""
    import html as _html
    import json

    if page.suffix == ".ipynb":
        nb = json.loads(text)
        parts = []
        for cell in nb.get("cells", []):
            parts.append("".join(cell.get("source", "")))
            for out in cell.get("outputs", []):
                parts.append(
                    "".join(out.get("text", ""))
                    + "".join(out.get("traceback", []))
                )
                parts += [
                    "".join(v)
                    for k, v in out.get("data", {}).items()
                    if k.startswith("text/")
                ]
        text = "\n".join(parts)
    else:
        text = _html.unescape(re.sub(r"<[^>]+>", "", text))
    return {line.strip() for line in text.splitlines()}


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest output readable
        pass


@pytest.fixture(scope="session")
def server(built_book):
    handler = functools.partial(_QuietHandler, directory=str(built_book))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


@pytest.fixture(scope="session")
def browser():
    exe = _chromium()
    if exe is None:
        missing_piece(
            "Chromium (the browser checks of the book's pages)",
            "run 'sudo apt-get install -y chromium', or tools/ensure_chromium.sh as root",
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=exe,
            headless=True,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
        )
        yield b
        b.close()


@pytest.mark.browser
@pytest.mark.parametrize("cid", chapter_ids())
def test_chapter_page_in_browser(cid, server, browser):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page.on(
        "console",
        lambda m: (
            errors.append(f"console {m.type}: {m.text}")
            if m.type == "error"
            else None
        ),
    )
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    page.on(
        "requestfailed", lambda r: errors.append(f"request failed: {r.url}")
    )
    page.on(
        "response",
        lambda r: (
            errors.append(f"HTTP {r.status}: {r.url}")
            if r.status >= 400
            else None
        ),
    )
    page.goto(f"{server}/book/chapters/{cid}.html", wait_until="networkidle")

    # Math: MathJax 3 replaces TeX with <mjx-container>; wait until it has finished.
    page.wait_for_function(
        "window.MathJax && MathJax.startup && MathJax.startup.promise",
        timeout=30_000,
    )
    page.evaluate("MathJax.startup.promise")
    typeset = page.locator("mjx-container").count()
    assert typeset > 0, "no typeset math on the page"
    assert page.locator("mjx-merror").count() == 0, (
        "MathJax reported a TeX error"
    )
    raw_tex = page.evaluate(
        "Array.from(document.querySelectorAll('.math')).filter(e => !e.querySelector('mjx-container')).length"
    )
    assert raw_tex == 0, f"{raw_tex} math elements were left untypeset"

    # Figures: every stored image output is present and decoded.
    images = page.locator("article img")
    assert images.count() > 0, "no figures on the page"
    broken = page.evaluate(
        "Array.from(document.querySelectorAll('article img')).filter(i => !(i.complete && i.naturalWidth > 0)).length"
    )
    assert broken == 0, f"{broken} figures failed to load"

    # Solutions are folded behind a toggle that opens.
    toggles = page.locator("details.hide summary", has_text="Show solution")
    assert toggles.count() > 0, "no 'Show solution' toggle"
    toggles.first.click()
    assert page.locator("details.hide[open]").count() > 0, (
        "the 'Show solution' toggle did not open"
    )

    # No hidden-test text in what a reader can see (after opening every toggle).
    page.evaluate(
        "document.querySelectorAll('details').forEach(d => d.open = true)"
    )
    visible_text = page.inner_text("article")
    # whole lines, as the release check compares them: a short hidden line such as
    # `mine.double()` can be part of a longer visible one without anything leaking
    visible_lines = {line.strip() for line in visible_text.splitlines()}
    leaked = sorted(hidden_test_lines()[cid] & visible_lines)
    assert not leaked, f"hidden test text visible on the page: {leaked[:3]}"

    SHOTS.mkdir(parents=True, exist_ok=True)
    page.evaluate(
        "document.querySelectorAll('details').forEach(d => d.open = false)"
    )
    page.screenshot(path=str(SHOTS / f"{cid}.png"), full_page=True)
    # One picture per figure as the reader sees it (figures/<chapter>-NN.png), with an index of
    # their alt texts, so a change to any figure can be reviewed without building the book.
    figures = SHOTS.parent / "figures"
    figures.mkdir(exist_ok=True)
    index = []
    for n, img in enumerate(page.locator("article img").all(), start=1):
        if not img.is_visible():  # inside a closed toggle
            continue
        name = f"{cid}-{n:02d}.png"
        img.screenshot(path=str(figures / name))
        index.append(f"{name}\t{(img.get_attribute('alt') or '').strip()}")
    (figures / f"{cid}.tsv").write_text("\n".join(index) + "\n")
    page.close()
    assert not errors, "browser errors:\n" + "\n".join(errors)


def _axe_script() -> Path | None:
    cache = Path(
        os.environ.get(
            "COURSE_CACHE", Path.home() / ".cache" / "attention-course"
        )
    )
    path = cache / "axe" / "node_modules" / "axe-core" / "axe.min.js"
    return path if path.is_file() else None


def _book_pages(built_book: Path) -> list[str]:
    return sorted(
        p.relative_to(built_book).as_posix()
        for p in (built_book / "book").rglob("*.html")
    )


@pytest.mark.browser
@pytest.mark.parametrize("mode", ["light", "dark"])
def test_pages_are_accessible(mode, built_book, server, browser):
    """axe-core's WCAG 2 A/AA rules on every page of the book, in light and dark mode, and alt
    text on every figure (not the image's file name, which is what a figure gets by default)."""
    axe = _axe_script()
    if axe is None:
        missing_piece(
            "axe-core (the accessibility check)",
            "run 'bash tools/ensure_chromium.sh' (needs npm)",
        )
    context = browser.new_context(color_scheme=mode)
    context.add_init_script(
        f"localStorage.setItem('mode', '{mode}'); localStorage.setItem('theme', '{mode}');"
    )
    problems = []
    run = (
        "async () => (await axe.run(document, {runOnly: ['wcag2a', 'wcag2aa']})).violations"
        ".map(v => `${v.id} (${v.impact}, ${v.nodes.length}x): ${v.nodes[0].target.join(' ')}`)"
    )

    def load(page, rel):
        page.goto(f"{server}/{rel}", wait_until="networkidle")
        assert (
            page.evaluate("document.documentElement.dataset.theme") == mode
        ), f"{rel}: not in {mode} mode"
        page.add_script_tag(path=str(axe))
        page.add_style_tag(
            content="*, *::before, *::after { transition: none !important; }"
        )
        page.evaluate("document.fonts.ready")
        page.wait_for_timeout(300)

    for rel in _book_pages(built_book):
        page = context.new_page()
        load(page, rel)
        # Let the theme settle (fonts, colour transitions) before measuring contrast, and measure
        # again while violations remain: only one seen every time counts (a half-switched theme is
        # not the page; under load, as in CI with a busy neighbour, settling can take seconds).
        # One that outlasts that is measured once more on a fresh load of the page: a stylesheet
        # that failed to load under load is not the page either; a real problem is there again.
        violations = page.evaluate(run)
        for wait_ms in (1000, 3000, None):
            if not violations:
                break
            if wait_ms is None:
                load(page, rel)
            else:
                page.wait_for_timeout(wait_ms)
            violations = sorted(set(violations) & set(page.evaluate(run)))
        problems += [f"{rel}: {v}" for v in violations]
        unnamed = page.evaluate(
            "Array.from(document.querySelectorAll('article img')).map(i => i.getAttribute('alt') || '')"
            ".filter(a => !a.trim() || /\\.(png|jpe?g|svg)$/i.test(a.trim())).length"
        )
        if unnamed:
            problems.append(
                f"{rel}: {unnamed} figure(s) without alt text (set the cell's metadata "
                "mystnb.image.alt in the solution notebook)"
            )
        page.close()
    context.close()
    assert not problems, (
        f"accessibility problems in {mode} mode:\n" + "\n".join(problems)
    )


# What may not be wider than its box: code cells and printed outputs at a laptop's width (they
# wrap inside the text column), and the page itself on a phone (wide tables and equations scroll
# inside themselves).  Each entry: (what, CSS selector).
_MUST_FIT = (
    (
        "code or output",
        ".bd-article div.highlight pre, .bd-article div.cell_output pre",
    ),
)


@pytest.mark.browser
def test_pages_fit_the_column_and_the_screen(built_book, server, browser):
    """At 1280 px no code block or printed output is wider than the text column (nothing scrolls
    sideways) and the navigation's titles are typeset (chapter 03's holds math); at 390 px no page
    is wider than the screen."""
    measure = """sel => Array.from(document.querySelectorAll(sel))
        .filter(e => e.offsetParent !== null && e.scrollWidth > e.clientWidth + 1)
        .map(e => `${e.scrollWidth - e.clientWidth}px too wide: ${e.textContent.trim().split('\\n')[0].slice(0, 60)}`)"""
    problems = []
    for width in (1280, 390):
        page = browser.new_page(viewport={"width": width, "height": 900})
        for rel in _book_pages(built_book):
            page.goto(f"{server}/{rel}", wait_until="networkidle")
            page.evaluate(
                "document.querySelectorAll('details').forEach(d => d.open = true)"
            )
            page.wait_for_function(
                "window.MathJax && MathJax.startup && MathJax.startup.promise",
                timeout=30_000,
            )
            page.evaluate("MathJax.startup.promise")
            if width == 1280:
                raw = page.evaluate(
                    "Array.from(document.querySelectorAll('nav a'))"
                    ".filter(a => a.textContent.includes('\\\\(')).length"
                )
                if raw:
                    problems.append(
                        f"{rel}: {raw} link(s) in the navigation show raw TeX (MathJax not loaded?)"
                    )
                for what, selector in _MUST_FIT:
                    problems += [
                        f"{rel} at {width} px, {what}: {p}"
                        for p in page.evaluate(measure, selector)[:3]
                    ]
            else:
                over = page.evaluate(
                    "document.documentElement.scrollWidth - window.innerWidth"
                )
                if over > 1:
                    culprits = page.evaluate(
                        """() => Array.from(document.querySelectorAll('.bd-article *'))
                           .filter(e => e.getBoundingClientRect().right > window.innerWidth + 1
                                        && e.children.length === 0)
                           .slice(0, 3).map(e => e.tagName + ': ' + e.textContent.trim().slice(0, 40))"""
                    )
                    problems.append(
                        f"{rel} at {width} px: the page is {over}px wider than the screen ({culprits})"
                    )
        page.close()
    assert not problems, "pages wider than they may be:\n" + "\n".join(
        problems
    )
