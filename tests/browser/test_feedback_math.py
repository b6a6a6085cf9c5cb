"""A feedback page's math, typeset in Debian's chromium by Debian's MathJax (libjs-mathjax,
2.7.9, as the page's CDN 2.7.7 would): a student's TeX is math, and links, styles, classes
and names nothing (an outside attack drew a fake score over the real one with a shadow)."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]

MATHJAX = Path("/usr/share/javascript/mathjax/MathJax.js")
CDN = "https://cdnjs.cloudflare.com/ajax/libs/mathjax/2.7.7/latest.js"


def test_a_students_tex_on_a_feedback_page_is_only_math(page, tmp_path):
    from test_feedback_bounds import STUDENT_TEX, feedback_page

    assert MATHJAX.exists(), "libjs-mathjax is missing: run scripts/setup --system"
    html = feedback_page([nbformat.v4.new_markdown_cell(STUDENT_TEX)])
    assert CDN in html
    local = tmp_path / "page.html"
    local.write_text(html.replace(CDN, MATHJAX.as_uri()))
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.goto(local.as_uri())
    page.wait_for_function("document.querySelectorAll('.mjx-chtml').length >= 6", timeout=30_000)
    page.wait_for_timeout(500)  # the last typesetting passes
    typeset = page.locator(".mjx-chtml")
    assert [
        t for t in ("SHADOW", "LINK", "CURSOR", "NAV", "BOX") if t not in page.inner_text("body")
    ] == []
    assert typeset.locator("a").count() == 0
    styled = page.evaluate(
        "Array.from(document.querySelectorAll('.mjx-chtml [style]'))"
        ".map(e => e.getAttribute('style')).filter(s => /shadow|url|cursor|border/.test(s))"
    )
    assert styled == []
    assert typeset.locator("[class*=navbar]").count() == 0
    page.hover("text=CURSOR")
    assert not [url for url in requests if "evil.example" in url]
