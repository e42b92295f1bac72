"""Pages that fit their screen: the book's own stylesheet, and MathJax on every page.

- ``static/course.css``: code cells and their printed outputs wrap long lines inside the text
  column instead of scrolling sideways; tables and display equations wider than a phone's screen
  scroll inside themselves, so the page itself never becomes wider than the screen.
- MathJax is loaded on every page, not only on pages with math of their own: the sidebar and the
  page titles show chapter titles with math in them (chapter 03's) on every page.
"""

from __future__ import annotations

from pathlib import Path


def _add_static_path(app) -> None:
    app.config.html_static_path.append(str(Path(__file__).parent / "static"))


def setup(app):
    app.connect("builder-inited", _add_static_path)
    app.add_css_file("course.css")
    app.set_html_assets_policy(
        "always"
    )  # sphinx.ext.mathjax then adds MathJax to every page
    return {"parallel_read_safe": True, "parallel_write_safe": True}
