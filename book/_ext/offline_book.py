"""Make the built book work offline and load without browser console errors.

- MathJax 3 is served from the book itself: it comes from the PyPI package
  ``django-static-mathjax`` (MathJax's own distribution files, nothing Django-specific),
  whose ``es5`` folder is copied into ``_static/mathjax``.
- sphinx-thebe (always loaded by Jupyter Book 1.x) injects its inline configuration script
  twice under Sphinx 7, which throws "Identifier 'THEBE_JS_URL' has already been declared";
  duplicate scripts are dropped from each page.
- pydata-sphinx-theme logs "Got invalid theme mode" when no default mode is set; it is set
  to "auto" (follow the reader's system setting).
"""

from __future__ import annotations

import shutil
from pathlib import Path


def _mathjax_dir() -> Path:
    try:
        import mathjax  # provided by django-static-mathjax
    except ImportError as exc:  # a set-up error, reported clearly
        raise RuntimeError(
            "MathJax is missing: install the book's dependencies with `make venv` "
            "(or `pip install django-static-mathjax`)"
        ) from exc
    return Path(mathjax.__file__).parent / "static" / "mathjax" / "es5"


def _copy_mathjax(app, exception) -> None:
    if exception is None and app.builder.format == "html":
        target = Path(app.outdir) / "_static" / "mathjax"
        if not (target / "tex-chtml.js").exists():
            shutil.copytree(_mathjax_dir(), target, dirs_exist_ok=True)


def _script_key(script) -> tuple:
    if isinstance(script, str):
        return (script, "")
    fields = vars(
        script
    )  # Sphinx's _JavaScript: filename (None or "" for inline code) + attributes
    return (
        str(fields.get("filename") or ""),
        fields.get("attributes", {}).get("body", ""),
    )


def _tidy_page(app, pagename, templatename, context, doctree) -> None:
    scripts = context.get("script_files")
    if scripts:
        seen, unique = set(), []
        for script in scripts:
            key = _script_key(script)
            if key not in seen:
                seen.add(key)
                unique.append(script)
        scripts[:] = unique
    if not context.get("default_mode"):
        context["default_mode"] = "auto"


def setup(app):
    app.config.mathjax_path = "mathjax/tex-chtml.js"  # relative to _static
    app.connect("build-finished", _copy_mathjax)
    app.connect(
        "html-page-context", _tidy_page, priority=100
    )  # first: the event stops at the first handler that returns a template
    return {"parallel_read_safe": True, "parallel_write_safe": True}
