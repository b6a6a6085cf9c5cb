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
    from tests.autograder.test_feedback_bounds import STUDENT_TEX, feedback_page

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


# A student's TeX that paints a rule 3000 px wide and high around where it stands, taking no
# room (\smash, \rlap): an outside attack moved a header-coloured rule and a fake score over
# the page's real score with \raise and \kern, lengths that MathJax's Safe does not bound.
COVER = r"$\smash{\kern-1500px\rlap{\color{red}{\rule[-1500px]{3000px}{3000px}}}}$"
STUDENT_BOXES = ".text_cell_render, .input_area, .output_area, .output_subarea"


def test_a_students_math_paints_only_within_its_own_cell(page, tmp_path):
    """Wherever a student's TeX stands (markdown, a raw cell of any format, a text/latex or a
    text/html output), what it draws is seen, and hit, only inside that cell's or output's
    own box: the page's score heading and the cells around it show what the grader wrote."""
    from tests.autograder.test_feedback_bounds import feedback_page

    before = nbformat.v4.new_code_cell("before = 1")
    shown = nbformat.v4.new_code_cell(
        "show()",
        outputs=[
            nbformat.v4.new_output("display_data", data={"text/latex": COVER}),
            nbformat.v4.new_output("display_data", data={"text/html": f"<div>{COVER}</div>"}),
        ],
    )
    after = nbformat.v4.new_code_cell("after = 2")
    raw = [  # nbconvert's page wrote a raw cell outside every box (attack 49)
        nbformat.v4.new_raw_cell(f"Mine: {COVER}", metadata={"raw_mimetype": mime} if mime else {})
        for mime in ("", "text/html", "text/latex", "text/markdown")
    ]
    cells = [before, *raw, nbformat.v4.new_markdown_cell(f"Mine: {COVER}"), shown, after]
    local = tmp_path / "page.html"
    local.write_text(feedback_page(cells).replace(CDN, MATHJAX.as_uri()))
    page.set_viewport_size({"width": 1200, "height": 1600})
    page.goto(local.as_uri())
    page.wait_for_function("document.querySelectorAll('.mjx-chtml').length >= 3", timeout=30_000)
    page.wait_for_timeout(500)  # the last typesetting passes
    # Each grader's box (the score heading, the cells' own code) sampled on a grid: the topmost
    # thing at every point is that box's own, never a student's box that painted over it.
    intruders = page.evaluate(
        """(students) => {
            const own = [document.querySelector('.panel-heading'),
                         ...Array.from(document.querySelectorAll('.input_area')).filter(
                             e => /before|after/.test(e.textContent))];
            const found = [];
            for (const box of own) {
                const r = box.getBoundingClientRect();
                for (let i = 1; i < 10; i++) for (let j = 1; j < 5; j++) {
                    const x = r.left + r.width * i / 10, y = r.top + r.height * j / 5;
                    const hit = document.elementFromPoint(x, y);
                    const holder = hit && hit.closest(students);
                    if (!hit || !box.contains(hit) && holder !== box) {
                        found.push([box.className, hit && hit.outerHTML.slice(0, 80)]);
                    }
                }
            }
            return [own.length, found];
        }""",
        STUDENT_BOXES,
    )
    assert intruders[0] == 3  # the heading and the two cells' code were found
    assert intruders[1] == []
