"""The feedback page's work is bounded: markup whose rendering or sanitizing grows with the
square of its size is shown as a note (autograder.worker.feedback.BoundedMarkup), and an honest
notebook's markup is left as it is."""

from __future__ import annotations

import copy

import nbformat
import pytest
from units import UNITS, release

from autograder.worker.feedback import BoundedMarkup


def _bounded(nb):
    return BoundedMarkup().preprocess(copy.deepcopy(nb), {})[0]


@pytest.mark.parametrize("unit", UNITS)
def test_an_honest_notebooks_markup_is_shown_whole(unit):
    nb = nbformat.read(release(unit), as_version=4)
    assert _bounded(nb) == nb


@pytest.mark.parametrize(
    "text",
    [
        "_a " * 10_000 + "x" + " a_" * 10_000,  # emphasis: mistune's time grows as its square
        "*a " * 3_000 + "x" + " a*" * 3_000,
        "<b>" * 20_000 + "deep" + "</b>" * 20_000,  # nesting: the sanitizer's time grows so
    ],
)
def test_markup_past_the_bound_is_a_note_in_a_cell_or_an_output(text):
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_markdown_cell("An honest *answer*, with `code`."),
            nbformat.v4.new_markdown_cell(text),
            nbformat.v4.new_code_cell(
                "display(Markdown(text))",
                outputs=[nbformat.v4.new_output("display_data", data={"text/markdown": text})],
            ),
        ]
    )
    out = _bounded(nb)
    assert out.cells[0].source == "An honest *answer*, with `code`."
    assert "more markup than the feedback page shows" in out.cells[1].source
    data = out.cells[2].outputs[0].data
    assert "text/markdown" not in data and "more markup" in data["text/plain"]


def test_the_bound_is_for_the_whole_notebook_not_each_cell():
    cells = [nbformat.v4.new_markdown_cell("_a " * 100 + "x" + " a_" * 100) for _ in range(30)]
    out = _bounded(nbformat.v4.new_notebook(cells=cells))
    noted = [c for c in out.cells if "more markup" in c.source]
    assert noted and len(noted) < len(cells)  # the first 20 (4,000 delimiters) are shown


PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


@pytest.mark.parametrize("with_image", [False, True])
def test_the_feedback_exporter_makes_the_page_nbconvert_makes(with_image):
    """FeedbackExporter skips nbconvert's BeautifulSoup pass on a page without an image;
    the page must still be nbconvert's, and an image must still get its alt text."""
    from bs4 import BeautifulSoup
    from nbconvert.exporters import HTMLExporter
    from traitlets.config import Config

    from autograder.worker.feedback import FeedbackExporter

    nb = nbformat.read(release(UNITS[0]), as_version=4)
    # A graded notebook's, from its kernel's kernel_info reply (execute.py)
    nb.metadata.language_info = {"name": "python", "pygments_lexer": "ipython3"}
    nb.cells[1].outputs = [nbformat.v4.new_output("stream", text="printed\n")]
    if with_image:
        nb.cells[1].outputs.append(nbformat.v4.new_output("display_data", data={"image/png": PNG}))
    config = Config({"HTMLExporter": {"template_name": "classic", "sanitize_html": True}})
    ours, _ = FeedbackExporter(config=config).from_notebook_node(copy.deepcopy(nb))
    theirs, _ = HTMLExporter(config=config).from_notebook_node(copy.deepcopy(nb))
    assert ("<img" in ours) is with_image
    assert str(BeautifulSoup(ours, features="html.parser")) == theirs
    if with_image:
        assert f'alt="{FeedbackExporter.NO_ALT}"' in ours


def test_highlighting_is_nbconverts_for_the_course_language_the_second_time_too():
    from nbconvert.filters.highlight import Highlight2HTML

    from autograder.worker.feedback import BoundedHighlight

    ours, theirs = BoundedHighlight(), Highlight2HTML(pygments_lexer="ipython3")
    sources = ["x = torch.ones(3)", "y = 2\n", "", "%timeit f(x)\n!ls\n"]
    for _ in range(2):  # the second time from the memo
        for source in sources:
            assert ours(source) == theirs(source)


# A cell of spaces took the systemd lexer time that grows with its cube: 183 s at 4,000
# (attack 28); and of dotted names, the Python lexer's with its square (3 s at 20,000).
SLOW_FOR_SYSTEMD = " " * 4000 + "x"
SLOW_FOR_PYTHON = "a" + ".a" * 10_000


def test_a_students_choice_of_lexer_is_never_read():
    """The notebook's language and a cell's ``magics_language`` are the student's to write:
    every code cell is highlighted as the course's Python, whatever they say."""
    from nbconvert.filters.highlight import Highlight2HTML

    from autograder.worker.feedback import BoundedHighlight

    ours, theirs = BoundedHighlight(), Highlight2HTML(pygments_lexer="ipython3")
    for language, metadata in [("systemd", None), (None, {"magics_language": "systemd"})]:
        assert ours(SLOW_FOR_SYSTEMD, language, metadata) == theirs(SLOW_FOR_SYSTEMD)


def _text(html: str) -> str:
    from bs4 import BeautifulSoup

    return BeautifulSoup(html, features="html.parser").get_text()


def test_highlighting_past_the_pages_budget_shows_the_rest_as_plain_text():
    from IPython.lib.lexers import IPython3Lexer
    from pygments.formatters import HtmlFormatter

    from autograder.worker.feedback import HighlightBudget, bounded_highlight

    budget = HighlightBudget(0.05)
    html, whole = bounded_highlight(SLOW_FOR_PYTHON, IPython3Lexer(), HtmlFormatter(), budget)
    assert not whole and budget.left <= 0
    assert _text(html).strip() == SLOW_FOR_PYTHON  # all of it, escaped
    later, whole = bounded_highlight("x = 1", IPython3Lexer(), HtmlFormatter(), budget)
    assert not whole and "x = 1" in later and '<span class="n">' not in later
    kept, whole = bounded_highlight("x = 1", IPython3Lexer(), HtmlFormatter(), HighlightBudget())
    assert whole and '<span class="n">x</span>' in kept


def test_a_cut_off_cell_is_not_remembered():
    from autograder.worker.feedback import BoundedHighlight, HighlightBudget

    source = "x = 1  # cut off"
    plain = BoundedHighlight(HighlightBudget(0))(source)
    assert '<span class="n">' not in plain
    assert '<span class="n">x</span>' in BoundedHighlight()(source)


def test_fenced_code_is_highlighted_only_in_the_course_language():
    from nbconvert.exporters import HTMLExporter
    from traitlets.config import Config

    from autograder.worker.feedback import FeedbackExporter

    markdown = "```python\nx = 1\n```\n\n```systemd\n" + SLOW_FOR_SYSTEMD + "\n```\n"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(markdown)])
    config = Config({"HTMLExporter": {"template_name": "classic"}})
    ours, _ = FeedbackExporter(config=config).from_notebook_node(copy.deepcopy(nb))
    theirs, _ = HTMLExporter(config=config).from_notebook_node(
        nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("```python\nx = 1\n```")])
    )
    python = theirs[theirs.index('<div class="highlight">') :].split("</div>")[0]
    assert python in ours  # the python fence as nbconvert shows it
    assert '<pre><code class="language-systemd">' + SLOW_FOR_SYSTEMD in ours  # not lexed


def test_remembered_sanitizing_is_nbconverts():
    """The cleaned markup a page reuses is what nbconvert's bleach passes make of it, the
    second time too, and the preprocessor's settings are part of the key."""
    from nbconvert.filters.strings import clean_html
    from nbconvert.preprocessors.sanitize import SanitizeHTML

    from autograder.worker.feedback import RememberedSanitizeHTML, remembered_clean_html

    markup = [
        '<p onclick="steal()">hi <script>alert(1)</script><a href="javascript:x">a</a></p>',
        "<b>bold</b> <img src=x onerror=alert(1)>",
        "plain text",
    ]
    ours, theirs = RememberedSanitizeHTML(), SanitizeHTML()
    for _ in range(2):
        for html in markup:
            assert remembered_clean_html(html) == clean_html(html)
            assert ours.sanitize_html_tags(html) == theirs.sanitize_html_tags(html)
    cleaned = remembered_clean_html(markup[0])
    assert "<script" not in cleaned and "javascript:" not in cleaned and "<p onclick" not in cleaned
    stripping = RememberedSanitizeHTML(strip=True)
    assert (
        stripping.sanitize_html_tags(markup[0])
        == SanitizeHTML(strip=True).sanitize_html_tags(markup[0])
        != ours.sanitize_html_tags(markup[0])
    )


def test_big_markup_is_cleaned_but_not_remembered():
    """A student's big output is cleaned like any other and never held by the memo."""
    from nbconvert.filters.strings import clean_html

    from autograder.worker.feedback import _CLEANED, remembered_clean_html

    big = "<p onclick='x()'>" + "y" * (_CLEANED.MAX_CHARS + 1) + "</p>"
    assert remembered_clean_html(big) == clean_html(big)
    assert big not in _CLEANED.entries


FAKE_BAR = (
    '<div class="navbar navbar-default navbar-fixed-top" id="toc"><span class="label '
    'label-success" id="score">Score: 30.0 / 30.0, fake bar in {where}</span></div>'
)


def test_a_feedback_pages_markdown_is_html_and_a_students_script_is_not():
    """nbgrader's feedback page through the course's config (``configure_feedback``): an
    instructor's markdown heading, paragraph, <sup> and code are real elements, while a
    student's <script>, event handler and javascript: link in a markdown cell are not."""
    from bs4 import BeautifulSoup

    html = feedback_page(
        [
            nbformat.v4.new_markdown_cell(
                "## Question 2: moving tensors\n\nA GPU does 10<sup>12</sup>"
                " operations a second; call `x.to('cuda')`."
            ),
            nbformat.v4.new_markdown_cell(
                'My answer <script>alert("owned")</script>'
                '<b onclick="steal()">bold</b> [link](javascript:steal())'
                '<img src=x onerror="steal()"><iframe src="javascript:steal()">'
                "</iframe>"
            ),
            # The page's own classes and ids, to draw a "staff" bar over the real score.
            nbformat.v4.new_markdown_cell(FAKE_BAR.format(where="markdown")),
            # Headings named as the page's own anchors: a test cell's grade id, and "top".
            nbformat.v4.new_markdown_cell("### test_q2_mb\n\n### top\n\n### comment-q1"),
            nbformat.v4.new_code_cell(
                "display(HTML(bar))",
                outputs=[
                    nbformat.v4.new_output(
                        "display_data", data={"text/html": FAKE_BAR.format(where="output")}
                    )
                ],
            ),
        ]
    )
    page = BeautifulSoup(html, features="html.parser")
    heading = page.find("h2", id=lambda i: i and i.startswith("Question-2"))
    assert heading is not None and "Question 2: moving tensors" in heading.get_text()
    assert page.find("sup", string="12") is not None
    assert page.find("code", string="x.to('cuda')") is not None
    assert any("A GPU does" in p.get_text() for p in page.find_all("p"))
    assert "&lt;h2" not in html and "&lt;p&gt;" not in html
    body = page.find("body")
    assert not [s for s in body.find_all("script") if "owned" in s.get_text()]
    assert "alert" in body.get_text()  # escaped, shown as the text the student wrote
    assert not body.find_all(attrs={"onclick": True}) and not body.find_all(["img", "iframe"])
    assert not [a for a in body.find_all("a") if "javascript" in (a.get("href") or "")]
    # A student's markup keeps no class or id: the inlined Bootstrap styles nothing of theirs
    # (an outside attack's fixed bar read "Score: 30.0 / 30.0" over the real 28).
    for where in ("markdown", "output"):
        fake = body.find(string=lambda t, w=where: t and f"fake bar in {w}" in t)
        assert fake is not None, where
        span, div = fake.parent, fake.parent.parent  # the student's own two elements
        assert (span.name, div.name) == ("span", "div"), where
        for element in (span, div):
            assert not element.get("class") and not element.get("id"), (where, element.name)
    # No heading of the student's takes an anchor of the page: its tests' links, "(Top)".
    for taken in ("test_q2_mb", "top", "comment-q1"):
        assert body.find(id=taken) is None, taken
    # Markdown's own anchors stay: the heading's id and its anchor link.
    assert heading.find("a", class_="anchor-link") is not None


ANSI_CASES = [
    "plain text & <tags>",
    "\x1b[31mred\x1b[0m and \x1b[1;32mbold green\x1b[m done",
    "\x1b[38;5;200mcube\x1b[48;5;240mgrey\x1b[38;2;1;2;3mrgb\x1b[38;2;300;0;0mbad\x1b[39;49mx",
    "\x1b[38;5mshort\x1b[48mshorter\x1b[38;9;1mwrong\x1b[1;4;7;21;24;27mflags",
    "\x1b[5;90;101mbright\x1b[22mx\x1b[2Kerased\x1b[99;abcmjunk\x1b[;mempty",
    "\x1b[1;31mbold red is bright\x1b[0m\n\x1b[",
]


def test_ansi_escapes_become_the_html_nbconvert_makes():
    import random

    from nbconvert.filters.ansi import ansi2html as theirs

    from autograder.worker.feedback import ansi2html

    parts = ["\x1b[", "m", ";", "1", "2", "5", "38", "48", "31", "0", "a", "<", "\n", "K"]
    rng = random.Random(29)
    fuzzed = ["".join(rng.choice(parts) for _ in range(60)) for _ in range(300)]
    for text in ANSI_CASES + fuzzed:
        try:
            expected = theirs(text)
        except IndexError:  # nbconvert's fails on a 38 or 48 with no code after it
            assert isinstance(ansi2html(text), str)  # ours shows the page
            continue
        assert ansi2html(text) == expected, repr(text)
    assert ansi2html("\x1b[31mred\x1b[38mstill red") == ansi2html("\x1b[31mred") + (
        '<span class="ansi-red-fg">still red</span>'
    )


@pytest.mark.timeout(60)
def test_a_stream_of_many_escapes_or_one_of_many_codes_is_converted_in_one_pass():
    """nbconvert's took 60 s for attack 29's 330,000 escapes (it copied the rest of the
    text after each) and grows with the square of one escape's codes; ours is linear: a
    minute of pytest's timeout is many times what either takes here."""
    from autograder.worker.feedback import ansi2html

    many = "\x1b[m" * 330_000 + "a" * 990_000
    assert ansi2html(many) == "a" * 990_000
    codes = "\x1b[" + "1;" * 300_000 + "31mx"
    assert ansi2html(codes) == '<span class="ansi-red-intense-fg ansi-bold">x</span>'


def test_a_markdown_table_of_pipes_past_the_bound_is_a_note():
    """A table of pipes renders a tag for each character without a ``<`` in its source
    (attack 29: 4.7 MB held a worker 181 s and 4.2 GB): past the page's markdown or its
    rendered tags, a cell is a note; an honest cell beside it is shown."""
    from traitlets.config import Config

    from autograder.worker.feedback import FeedbackExporter

    def table(rows):
        return "|a" * 100 + "\n" + "|-" * 100 + "\n" + ("|" * 101 + "\n") * rows

    honest = "An honest *answer*, with a table:\n\n| x | y |\n|---|---|\n| 1 | 2 |\n"
    big = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_markdown_cell(honest), nbformat.v4.new_markdown_cell(table(2100))]
    )
    out = _bounded(big)  # 212,000 characters of markdown: past the page's source bound
    assert out.cells[0].source == honest and "more markup" in out.cells[1].source
    small = nbformat.v4.new_notebook(  # within the source bound, past the rendered tags
        cells=[nbformat.v4.new_markdown_cell(honest), nbformat.v4.new_markdown_cell(table(300))]
    )
    assert _bounded(small) == small
    config = Config({"HTMLExporter": {"template_name": "classic"}})
    page, _ = FeedbackExporter(config=config).from_notebook_node(copy.deepcopy(small))
    assert "<td>1</td>" in page and page.count("<td") < FeedbackExporter.MAX_RENDERED_TAGS
    assert "more markup than the feedback page shows" in page


def _page(cells, **config):
    from traitlets.config import Config

    from autograder.worker.feedback import FeedbackExporter

    nb = nbformat.v4.new_notebook(cells=cells)
    exporter = FeedbackExporter(config=Config({"HTMLExporter": {"template_name": "classic"}}))
    return exporter.from_notebook_node(nb)[0]


def test_markdown_is_remembered_across_pages_as_nbconvert_renders_it(monkeypatch):
    """A class's pages share the instructor's markdown: rendered once, the same markup on
    every later page, as nbconvert's own exporter renders it."""
    from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath

    from autograder.worker.feedback import FeedbackExporter

    monkeypatch.setattr(FeedbackExporter, "rendered", type(FeedbackExporter.rendered)())
    text = "## The race\n\nA *copy* costs `40` ticks:\n\n```python\nx = torch.ones(3)\n```\n"
    cell = nbformat.v4.new_markdown_cell(text)
    first = _page([copy.deepcopy(cell)])
    assert len(FeedbackExporter.rendered.entries) == 1
    again = _page([copy.deepcopy(cell)])
    assert again == first
    theirs = MarkdownWithMath(
        renderer=IPythonRenderer(escape=False, anchor_link_text="\u00b6")
    ).render(text)
    assert list(FeedbackExporter.rendered.entries.values()) == [theirs]


def test_markdown_cut_short_or_with_attachments_is_not_remembered(monkeypatch):
    from autograder.worker.feedback import FeedbackExporter, HighlightBudget

    monkeypatch.setattr(FeedbackExporter, "rendered", type(FeedbackExporter.rendered)())
    fenced = "```python\nx = 1\n```\n"
    # Every page's budget spent at once.
    monkeypatch.setattr(HighlightBudget.__init__, "__defaults__", (0.0,))
    cut = _page([nbformat.v4.new_markdown_cell(fenced)])
    assert '<span class="n">x</span>' not in cut and not FeedbackExporter.rendered.entries
    monkeypatch.setattr(HighlightBudget.__init__, "__defaults__", (HighlightBudget.SECONDS,))
    attached = nbformat.v4.new_markdown_cell("![a](attachment:a.png)")
    attached.attachments = {"a.png": {"image/png": "iVBORw0KGgo="}}
    _page([attached])
    assert not FeedbackExporter.rendered.entries
    whole = _page([nbformat.v4.new_markdown_cell(fenced)])
    assert '<span class="n">x</span>' in whole and len(FeedbackExporter.rendered.entries) == 1


# A student's TeX that a page's MathJax would otherwise honour: a shadow with no bound on
# its offsets (an outside attack drew "Score: 30.0 / 30.0" over a real 0), a file: link, a
# cursor fetched from anywhere, the page's own class, and a box's style.
STUDENT_TEX = (
    r"Mine: $x^2$ $\style{text-shadow: red 0px -300px 0px}{\text{SHADOW}}$"
    r" $\href{file:///etc/passwd}{\text{LINK}}$"
    r" $\style{cursor:url(https://evil.example/c.png),auto}{\text{CURSOR}}$"
    r" $\class{navbar-fixed-top}{\text{NAV}}$"
    r" $\bbox[red,5px,border:2px solid red; text-shadow: red 0 -300px 0]{\text{BOX}}$"
)


def feedback_page(cells) -> str:
    """A feedback page of ``cells``, as a worker makes it (``configure_feedback``)."""
    from traitlets.config import Config

    from autograder.worker.feedback import (
        FeedbackExporter,
        RememberedSanitizeHTML,
        configure_feedback,
    )

    config = Config()
    configure_feedback(config)
    nb, _ = RememberedSanitizeHTML(config=config).preprocess(
        nbformat.v4.new_notebook(cells=cells), {}
    )
    exporter = FeedbackExporter(
        config=Config({"HTMLExporter": config.GenerateFeedback.HTMLExporter})
    )
    html, _ = exporter.from_notebook_node(
        nb,
        resources={
            "nbgrader": {"notebook": "gpu_tensors", "score": 0, "max_score": 30, "late_penalty": 0}
        },
    )
    return html


def test_the_pages_mathjax_lets_a_students_tex_link_style_class_or_name_nothing():
    """The strict Safe settings are a MathJax config block of the page's head, after
    nbconvert's (MathJax reads every such block before it loads its Safe extension);
    tests/browser/test_feedback_math.py typesets a page with them."""
    html = feedback_page([nbformat.v4.new_markdown_cell(STUDENT_TEX)])
    head = html[: html.index("</head>")]
    configs = head.split('<script type="text/x-mathjax-config">')[1:]
    assert len(configs) == 2 and "init_mathjax" in configs[0]  # nbconvert's, then ours
    strict = configs[1][: configs[1].index("</script>")]
    for setting in ('URLs: "none"', 'classes: "none"', 'cssIDs: "none"', 'styles: "none"'):
        assert setting in strict, setting
    assert 'require: "none"' in strict and 'fontsize: "safe"' in strict
    assert head.index("mathjax/2.7.7/latest.js") < head.index(strict)


LINKS = (
    "[share](//evil.example/x) [root](/etc/passwd) [peer](../../s000/gpu_tensors/gpu_tensors.html)"
    " [web](https://docs.pytorch.org/) [here](#top) [mail](mailto:ta@example.org)"
    ' <abbr title="Score: 30.0 / 30.0">GPU</abbr> <a href="//evil.example/h" title="t">out</a>'
    ' <a href="http://[evil">bad</a>'  # a URL urllib cannot split: the page is still made
)


def test_a_students_links_are_absolute_web_links_or_this_pages_and_carry_no_title():
    """A feedback page is opened from disk, where ``//host/x``, ``/etc/passwd`` or
    ``../s000/...`` are ``file:`` URLs (a network share's on Windows; an outside attack):
    only http(s), mailto and ``#...`` links keep their target, in markdown, an HTML output
    and a markdown output alike (attack 51's went through nbconvert's own clean_html); a ``title`` (the browser draws it outside the student's box) never stays."""
    import re

    html = feedback_page(
        [
            nbformat.v4.new_markdown_cell(LINKS),
            nbformat.v4.new_code_cell(
                "x",
                outputs=[
                    nbformat.v4.new_output("display_data", data={"text/html": LINKS}),
                    nbformat.v4.new_output("display_data", data={"text/markdown": LINKS}),
                ],
            ),
        ]
    )
    body = html[html.index("<main") :]
    hrefs = re.findall(r'href="([^"]*)"', body)
    assert sorted(set(hrefs)) == ["#top", "https://docs.pytorch.org/", "mailto:ta@example.org"]
    assert "title=" not in body
    # the words stay, from the markdown cell, the HTML output and the markdown output
    assert body.count(">share<") == 2 and body.count(">out<") == 3 and body.count(">bad<") == 3


def test_a_run_of_brackets_makes_a_whole_page_within_the_feedback_childs_limits():
    """Markdown of nothing but "[" passes every markup bound (no "<", "*" or "_"); the page
    is still made in the child a worker makes it in, within its CPU limit (nbconvert's
    strip_files_prefix took 111 CPU s on 100,000 of them: the student got the plain page)."""
    from autograder.worker import limited_child

    text = "[" * 60_000 + "x"

    def page() -> tuple[bool, str]:
        html = feedback_page(
            [
                nbformat.v4.new_markdown_cell(text),
                nbformat.v4.new_code_cell(
                    "x",
                    outputs=[nbformat.v4.new_output("display_data", data={"text/markdown": text})],
                ),
            ]
        )
        return html.count(text) == 2, ""

    ended = limited_child.run(page)
    assert ended.ok and not ended.stopped, ended
