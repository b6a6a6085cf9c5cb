"""Feedback without the hidden tests, and without anything a browser would run.

nbgrader's autograde puts every test cell back from the gradebook, hidden tests and all,
and ``generate_feedback`` renders them (nbgrader issues 917, 1363). A traceback is no
better: IPython prints the failing line and its neighbours. ``HideHiddenTests`` runs
inside ``generate_feedback`` (added through ``GenerateFeedback.preprocessors``) and, in
every cell that holds a hidden-test region, removes the region's source and reduces the
outputs to pass, or fail with the exception's name and message.

Everything else in the page is the student's: markdown, HTML outputs, SVG, JavaScript,
widget state. An instructor who opens the page from the Jupyter server would run any
script in it with the server's origin. So the page is sanitized with nbconvert's own
parts (bleach): the ``SanitizeHTML`` preprocessor keeps only safe output types and
cleans HTML outputs and markdown sources; ``BoundedMarkup`` keeps that work bounded;
``SafeOutputMetadata`` keeps of outputs' metadata only an image's size (templates write
it unquoted); ``HTMLExporter.sanitize_html`` cleans outputs
as the classic template renders them; and the ``feedback_sanitized`` template (nbgrader's
feedback page, whose markdown block skips that step) cleans every markdown cell after
rendering, since markdown makes ``javascript:`` links out of plain text. No scripts, no
event handlers, no ``javascript:`` URLs survive. ``configure_feedback`` sets all of this,
nested under ``GenerateFeedback`` so nbgrader's other pages keep their own templates.
"""

from __future__ import annotations

import re
import time
import urllib.parse
from collections import deque
from html import escape
from pathlib import Path

import bleach
import markupsafe
import mistune
import pygments
from bs4 import BeautifulSoup
from jinja2 import BytecodeCache, pass_context
from nbconvert.exporters import HTMLExporter, TemplateExporter
from nbconvert.filters.ansi import _ANSI_RE, _get_extended_color, _htmlconverter, strip_ansi
from nbconvert.filters.highlight import Highlight2HTML
from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath
from nbconvert.filters.strings import clean_html
from nbconvert.filters.widgetsdatatypefilter import WidgetsDataTypeFilter
from nbconvert.preprocessors import Preprocessor
from nbconvert.preprocessors.sanitize import SanitizeHTML
from nbformat import NotebookNode
from nbgrader.preprocessors import ClearHiddenTests
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name
from pygments.token import Token
from traitlets import List

from autograder import hints

HIDDEN_NOTE = "# (hidden tests: their code is not shown)"
# A hidden test's message that does not end with the instructor's own words.
QUOTES_NOTE = "(its message quotes values, which a hidden test does not show)"


class BoundedMarkup(Preprocessor):
    """Keeps the work of rendering and sanitizing a page bounded, whatever the notebook holds.

    Two costs grow with the square of what a student can write:
    - the HTML sanitizer (bleach, html5lib) with how deeply formatting tags nest: a markdown
      cell of 300,000 nested ``<b>`` tags would keep one page busy for hours;
    - nbconvert's markdown renderer (mistune) with the emphasis delimiters of a markdown
      text: ``"_a " * 10000 + "x" + " a_" * 10000`` took 94 s, with no tag at all.
    A notebook may show ``MAX_TAGS`` tags in all (markdown cells, HTML, markdown and SVG
    outputs) and ``MAX_EMPHASIS`` ``*`` and ``_`` in its markdown (about a second of
    rendering at worst; the exercises' own markdown has about 200); a cell or output past
    that is shown as a note instead (the notebook itself still holds it).
    """

    enabled = True
    MAX_TAGS = 10_000
    MAX_EMPHASIS = 4_000
    # Markdown makes tags of text with no "<" (a table of pipes, one cell a character, took
    # 181 s and 4.2 GB of a worker to render and clean: attack 29), and mistune renders
    # about 130 KB a second of it: a page renders at most this much markdown (the course's
    # own markdown is under 30,000 characters a notebook); the tags it renders to are
    # bounded apart (``FeedbackExporter.MAX_RENDERED_TAGS``).
    MAX_MARKDOWN = 200_000
    MARKUP = ("text/html", "text/markdown", "image/svg+xml")

    def preprocess(self, nb, resources):
        self._tags, self._emphasis = self.MAX_TAGS, self.MAX_EMPHASIS
        self._markdown = self.MAX_MARKDOWN
        return super().preprocess(nb, resources)

    def _allows(self, text, markdown: bool) -> bool:
        text = str(text)
        tags = text.count("<")
        emphasis = text.count("*") + text.count("_") if markdown else 0
        size = len(text) if markdown else 0
        if tags > self._tags or emphasis > self._emphasis or size > self._markdown:
            return False
        self._tags -= tags
        self._emphasis -= emphasis
        self._markdown -= size
        return True

    def preprocess_cell(self, cell, resources, cell_index):
        if cell.cell_type in ("markdown", "raw") and not self._allows(
            cell.source, markdown=cell.cell_type == "markdown"
        ):
            cell.source = (
                f"*(This {cell.cell_type} cell, {len(cell.source):,} characters, has "
                "more markup than the feedback page shows; see the notebook.)*"
            )
            cell.pop("attachments", None)
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            for mime in [m for m in self.MARKUP if m in data]:
                if not self._allows(data[mime], markdown=mime == "text/markdown"):
                    del data[mime]
                    data.setdefault(
                        "text/plain",
                        "(output with more markup than the feedback page shows; see the notebook)",
                    )
        return cell, resources


class SafeOutputMetadata(Preprocessor):
    """Keeps of each output's metadata only an image's whole-number width and height.

    nbconvert's templates write ``width={{ width | escape_html }}`` without quotes, so a
    width of "1 onerror=..." would become an event handler; a ``filenames`` entry would
    choose an image's address. Neither is the student's to set in the instructor's page.
    """

    enabled = True

    def preprocess_cell(self, cell, resources, cell_index):
        for output in cell.get("outputs", []):
            if "metadata" not in output:
                continue
            kept = {}
            for mime, meta in dict(output.metadata).items():
                if mime.startswith("image/") and isinstance(meta, dict):
                    sizes = {
                        k: v
                        for k, v in meta.items()
                        if k in ("width", "height")
                        and isinstance(v, int)
                        and not isinstance(v, bool)
                    }
                    if sizes:
                        kept[mime] = sizes
            output.metadata = NotebookNode(kept)
        return cell, resources


def _without_escapes(output: NotebookNode) -> NotebookNode:
    if "text" in output:
        output.text = strip_ansi(str(output.text))
    if output.get("output_type") == "error":
        output.evalue = strip_ansi(str(output.get("evalue", "")))
        output.traceback = [strip_ansi(str(line)) for line in output.get("traceback", [])]
    return output


class HideHiddenTests(ClearHiddenTests):
    """Removes hidden-test source and reduces those cells' outputs to pass/fail + message."""

    # The HTML exporter hands every preprocessor its display_data_priority; taking it as
    # config (as nbgrader's GetGrades does) keeps traitlets from warning of it each page.
    display_data_priority = List(list(ClearHiddenTests.display_data_priority.default())).tag(
        config=True
    )

    def preprocess_cell(self, cell, resources, cell_index):
        # Hidden tests are only ever in the assignment's test cells (their metadata is the
        # source's: the import refuses a cell that claims to be one). A student's own cell
        # that writes the markers is shown as written, not as a test that passed (attack 49).
        nbgrader = cell.get("metadata", {}).get("nbgrader", {})
        is_test = bool(nbgrader.get("grade") and nbgrader.get("grade_id")) and not nbgrader.get(
            "solution"
        )
        if cell.cell_type != "code" or not is_test:
            return cell, resources
        if self.begin_test_delimeter not in cell.source:
            # A visible test's message may quote a student's exception, whose escapes
            # could colour text to hide it ("...raised ValueError: <white> Tests passed."):
            # the grader's cells are shown without any (its kernel's tracebacks have none).
            cell.outputs = [_without_escapes(output) for output in cell.get("outputs", [])]
            return cell, resources
        self._hide_region(cell)
        grade_id = nbgrader.get("grade_id", "")
        cell.outputs = self._verdict(cell.get("outputs", []), *self._words(resources, grade_id))
        return cell, resources

    def _words(self, resources, grade_id: str) -> tuple[set[str], set[tuple], set[str]]:
        """The instructor's texts, f-strings and hints this cell's message may be written
        with: the trusted source's (the worker's copy of the course), never the student's
        notebook's."""
        from nbgrader.coursedir import CourseDirectory  # its root: the cwd unless configured

        root = CourseDirectory(config=self.config).root
        assignment = (resources.get("nbgrader") or {}).get("assignment")
        if not root or not assignment:
            return set(), set(), set()
        folder = Path(root) / "source" / str(assignment)
        words, templates, pairs = (
            hints.words_of(folder),
            hints.templates_of(folder),
            hints.hints_of(folder),
        )
        return (
            words.get(grade_id, set()) | words.get("", set()),
            templates.get(grade_id, set()) | templates.get("", set()),
            pairs.get(grade_id, set()) | pairs.get("", set()),
        )

    def _hide_region(self, cell: NotebookNode) -> None:
        source = cell.source
        try:
            self._remove_hidden_test_region(cell)
        except RuntimeError:
            # An unterminated region (a tampered cell): hide everything after its start.
            cell.source = source.split(self.begin_test_delimeter, 1)[0].rsplit("\n", 1)[0]
        cell.source = (cell.source.rstrip() + "\n" + HIDDEN_NOTE).lstrip("\n")

    @staticmethod
    def _verdict(outputs: list, words: set[str], templates: set[tuple], pairs: set[str]) -> list:
        """Passed, or failed with the exception's name and what of its message is the
        instructor's own text, each value it quotes shown as "..." (``autograder.hints``):
        a message may quote what the student's function returned, and with it the hidden
        test's inputs (attack 45)."""
        errors = [o for o in outputs if o.get("output_type") == "error"]
        if not errors:
            return [NotebookNode(output_type="stream", name="stdout", text="Tests passed.\n")]
        first = errors[0]
        ename, evalue = str(first.get("ename", "Error")), str(first.get("evalue", ""))
        said = hints.shown(evalue, words, templates, pairs) or ""
        if not said and evalue.strip():
            said = QUOTES_NOTE
        message = f"{ename}: {said}".rstrip(": ")
        return [
            NotebookNode(
                output_type="error",
                ename=ename,
                evalue=said,
                traceback=[f"Test failed. {message}"],
            )
        ]


TEMPLATES = Path(__file__).parent / "templates"


class _CompiledTemplates(BytecodeCache):
    """Compiled templates, kept for the life of the process. nbgrader makes a new exporter,
    so a new Jinja environment, for every page, and compiling its templates again was a
    quarter of a page's time. Jinja keys each entry by the template's file and checks it
    against the source's checksum, so a changed template is compiled again."""

    def __init__(self):
        self.entries: dict[str, bytes] = {}

    def load_bytecode(self, bucket):
        if bucket.key in self.entries:
            bucket.bytecode_from_string(self.entries[bucket.key])

    def dump_bytecode(self, bucket):
        self.entries[bucket.key] = bucket.bytecode_to_string()


class _Memo:
    """Results of a pure function of strings, kept in this process: a class's pages share
    most of their markup (the instructor's cells). Dropped whole at ``LIMIT`` entries;
    text over ``MAX_CHARS`` is never kept (a student's big outputs would hold gigabytes)."""

    LIMIT = 4096
    MAX_CHARS = 20_000

    def __init__(self):
        self.entries: dict = {}

    def get(self, key, make, chars: int):
        if chars > self.MAX_CHARS:
            return make()
        value = self.entries.get(key)
        if value is None:
            value = make()
            self.keep(key, value, chars)
        return value

    def find(self, key):
        return self.entries.get(key)

    def keep(self, key, value, chars: int) -> None:
        if chars <= self.MAX_CHARS:
            if len(self.entries) >= self.LIMIT:
                self.entries.clear()
            self.entries[key] = value


_CLEANED = _Memo()


# What a markdown cell renders to (mistune's headings with their ids and anchor links,
# paragraphs, code, tables, sub/superscripts...), and nothing that runs or loads: no
# script, no style, no event handler, no image or frame. nbconvert's ``clean_html`` keeps
# only bleach's short inline list, so every heading and paragraph of a page was shown as
# escaped tags. Links keep bleach's safe protocols (no ``javascript:``).
MARKDOWN_TAGS = sorted(
    {
        *bleach.ALLOWED_TAGS,
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "p",
        "br",
        "hr",
        "sup",
        "sub",
        "pre",
        "code",
        "span",
        "div",
        "table",
        "thead",
        "tbody",
        "tr",
        "th",
        "td",
        "del",
        "s",
        "dl",
        "dt",
        "dd",
        "kbd",
        "details",
        "summary",
    }
)
HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
# The feedback page's own anchors: "#top", its table of contents, each graded cell's grade
# id (snake case) and "comment-<grade id>". A student's "### test_q5_warmup" took the
# contents' link to that test (an outside attack); markdown's own heading ids have capitals
# or hyphens ("Question-2:-moving-tensors").
PAGE_IDS = frozenset({"top", "toc", "notebook", "notebook-container"})
GRADE_ID_SHAPE = re.compile(r"[a-z0-9_]+")


def markdown_class_or_id(tag: str, name: str, value: str) -> bool:
    """The classes and ids markdown itself writes, and no other: a heading's id (its
    anchor), a heading's ``anchor-link``, a code block's ``language-*``. The page inlines
    Bootstrap, so a student's ``class="navbar-fixed-top"`` drew a bar over the real score
    with one of their own (an outside attack), and an ``id`` could stand for the page's."""
    if name == "id":  # never one of the page's own anchors: its "(Top)" and test links
        return tag in HEADINGS and not (
            value in PAGE_IDS or value.startswith("comment-") or GRADE_ID_SHAPE.fullmatch(value)
        )
    if name == "class":
        return all(c == "anchor-link" or c.startswith("language-") for c in value.split())
    return False


def absolute_link(tag: str, name: str, value: str) -> bool:
    """A link's ``href`` only where it says where it goes on its own: an absolute http(s)
    or mailto URL, or a place on this page (``#...``). A page opened from disk resolves any
    other (``//host/x``, ``/etc/passwd``, ``../s000/...``) to a ``file:`` URL, a network
    share's on Windows (an outside attack). A ``title`` is drawn by the browser outside the
    student's box, so none is kept."""
    if name != "href":
        return markdown_class_or_id(tag, name, value)  # bleach asks only this for an <a>
    if value.startswith("#"):
        return True
    try:
        url = urllib.parse.urlsplit(value)
    except ValueError:  # "http://[x": no target can be told, so none is kept
        return False
    scheme = url.scheme.lower()
    if scheme == "mailto":
        return bool(url.path)
    return scheme in ("http", "https") and bool(url.netloc)


MARKDOWN_ATTRIBUTES = {
    "*": markdown_class_or_id,
    "a": absolute_link,
    "th": ["align"],
    "td": ["align"],
}


def clean_markdown_html(element) -> str:
    """A rendered markdown cell, cleaned by bleach with ``MARKDOWN_TAGS``: markdown's own
    HTML stays, anything else a student wrote is escaped."""
    text = element.decode() if isinstance(element, bytes) else str(element)
    return _CLEANED.get(
        ("markdown", text),
        lambda: bleach.clean(text, tags=MARKDOWN_TAGS, attributes=MARKDOWN_ATTRIBUTES),
        len(text),
    )


def remembered_clean_html(element):
    """nbconvert's ``clean_html`` filter (bleach, fixed settings), remembered."""
    if not isinstance(element, str):
        return clean_html(element)
    return _CLEANED.get(element, lambda: clean_html(element), len(element))


class RememberedSanitizeHTML(SanitizeHTML):
    """nbconvert's ``SanitizeHTML`` preprocessor, its bleach pass remembered: the key is
    the markup and every setting the pass reads."""

    def sanitize_html_tags(self, html_str):
        key = (
            html_str,
            repr((self.tags, self.attributes, self.strip, self.strip_comments, self.styles)),
        )
        return _CLEANED.get(
            key,
            lambda: super(RememberedSanitizeHTML, self).sanitize_html_tags(html_str),
            len(html_str),
        )


class HighlightBudget:
    """Seconds of code highlighting one page may spend (thread CPU time). pygments' lexers
    take time that grows with the square of some sources (the Python lexer: 3 s for
    ``"a" + ".a" * 10000``), and far worse in lexers a student could once pick (an
    outside attack's cell, 4,000 spaces for the systemd lexer, held a grading worker
    183 s, about 6 hours at 20,000). The course's own pages take about 0.5 s the first
    time, and nothing once their cells are remembered."""

    SECONDS = 3.0

    def __init__(self, seconds: float = SECONDS) -> None:
        self.left = seconds


def bounded_highlight(source: str, lexer, formatter, budget: HighlightBudget) -> tuple[str, bool]:
    """``pygments.highlight(source, lexer, formatter)``, but once the page's budget is spent
    the rest of the source is plain text (still all shown, escaped): (html, whole)."""
    text = lexer._preprocess_lexer_input(source)  # what get_tokens lexes (its newlines)
    tokens: list = []
    end = 0
    started = time.thread_time()
    whole = budget.left > 0
    if whole:
        for count, (index, kind, value) in enumerate(lexer.get_tokens_unprocessed(text)):
            tokens.append((kind, value))
            end = index + len(value)
            if count % 32 == 31 and time.thread_time() - started > budget.left:
                whole = end >= len(text)
                break
    budget.left -= time.thread_time() - started
    if end < len(text):
        tokens.append((Token.Text, text[end:]))
    return pygments.format(tokens, formatter), whole


class BoundedHighlight(Highlight2HTML):
    """nbconvert's code highlighting with the course's lexer, within the page's budget, and
    remembered in this process: most code cells of a class (the instructor's, the tests)
    are the same on every page, and pygments' lexer and formatter were a third of a
    page's time.

    The notebook's language and a cell's ``magics_language`` are the student's to write,
    and chose among some 500 lexers: neither is read. Every code cell is highlighted as
    nbconvert highlights the course's kernels' language (IPython 3); the same page as
    nbconvert's for every notebook the course's kernels write. A cell cut off by the
    budget is not remembered."""

    LANGUAGE = "ipython3"
    memo = _Memo()

    def __init__(self, budget: HighlightBudget | None = None, **kw) -> None:
        super().__init__(**kw)
        self.budget = budget or HighlightBudget()

    def __call__(self, source, language=None, metadata=None):
        source = str(source) or " "  # nbconvert's: pygments needs a character
        key = (source, repr(sorted(self.extra_formatter_options.items())))
        found = self.memo.find(key)
        if found is not None:
            return found
        from IPython.lib.lexers import IPython3Lexer

        formatter = HtmlFormatter(
            cssclass=escape(f" highlight hl-{self.LANGUAGE}"), **self.extra_formatter_options
        )
        html, whole = bounded_highlight(source, IPython3Lexer(), formatter, self.budget)
        if whole:
            self.memo.keep(key, html, len(source))
        return html


# Fenced code in markdown is highlighted only for these names of the course's language
# (as nbconvert does, within the page's budget); any other is shown as plain code.
FENCE_LANGUAGES = frozenset({"python", "python3", "py", "py3", "ipython", "ipython3"})


class BoundedRenderer(IPythonRenderer):
    """nbconvert's markdown renderer, whose fenced code blocks named a lexer of the
    student's choosing: only the course's language is highlighted, within the budget."""

    def __init__(self, budget: HighlightBudget, **kw) -> None:
        super().__init__(**kw)
        self.budget = budget
        self.cut = False  # whether the budget cut a block short (the markup is then not kept)

    def block_code(self, code: str, info: str | None = None) -> str:
        words = (info or "").strip().split(maxsplit=1)
        language = words[0] if words else ""
        if language.startswith("mermaid"):
            return super().block_code(code, info)  # a diagram's text, not lexed
        if language.lower() not in FENCE_LANGUAGES:
            return mistune.HTMLRenderer.block_code(self, code, info)  # escaped, not lexed
        lexer = get_lexer_by_name(language, **self.lexer_options)
        html, whole = bounded_highlight(code, lexer, HtmlFormatter(), self.budget)
        self.cut = self.cut or not whole
        return html


def ansi2html(text: str) -> str:
    """nbconvert's ``ansi2html`` (the same HTML), in time that grows with the text: its own
    copied the rest of the text after every escape, and popped each code of an escape
    from the front of a list, so a 2 MB stream of ``\\x1b[m`` held a worker 60 s on one
    page (attack 29), and one escape of many codes would hold it for hours."""
    text = str(markupsafe.escape(text))
    state = {"fg": None, "bg": None, "bold": False, "underline": False, "inverse": False}
    out: list[str] = []
    position = 0
    for match in _ANSI_RE.finditer(text):
        _chunk(out, text[position : match.start()], state)
        position = match.end()
        if match.group(2) == "m":
            try:  # an empty code is code 0
                codes = deque(int(n) if n else 0 for n in match.group(1).split(";"))
            except ValueError:
                continue  # an invalid color: nbconvert keeps the codes it had (none left)
            _apply(codes, state)
    _chunk(out, text[position:], state)
    return "".join(out)


def _chunk(out: list[str], chunk: str, state: dict) -> None:
    if chunk:
        fg = state["fg"]
        start, end = _htmlconverter(
            fg + 8 if state["bold"] and fg in range(8) else fg,
            state["bg"],
            state["bold"],
            state["underline"],
            state["inverse"],
        )
        out += (start, chunk, end)


_SETS = {1: ("bold", True), 4: ("underline", True), 5: ("bold", True), 7: ("inverse", True)}
_SETS.update({21: ("bold", False), 22: ("bold", False), 24: ("underline", False)})
_SETS.update({27: ("inverse", False), 39: ("fg", None), 49: ("bg", None)})


def _apply(codes: deque, state: dict) -> None:
    """nbconvert's loop over an escape's codes (``_ansi2anything``), reading from a deque."""
    while codes:
        n = codes.popleft()
        if n == 0:
            state.update(fg=None, bg=None, bold=False, underline=False, inverse=False)
        elif n in _SETS:
            state[_SETS[n][0]] = _SETS[n][1]
        elif 30 <= n <= 37:
            state["fg"] = n - 30
        elif n in (38, 48):
            try:
                color = _extended_color(codes)
            except ValueError:
                codes.clear()
                continue
            state["fg" if n == 38 else "bg"] = color
        elif 40 <= n <= 47:
            state["bg"] = n - 40
        elif 90 <= n <= 97:
            state["fg"] = n - 90 + 8
        elif 100 <= n <= 107:
            state["bg"] = n - 100 + 8


def _extended_color(codes: deque):
    """nbconvert's ``_get_extended_color``, given at most the four codes it reads; a code
    38 or 48 with none after it is invalid (nbconvert's raised IndexError: no page)."""
    taken = [codes.popleft() for _ in range(min(4, len(codes)))]
    if not taken:
        raise ValueError("no color after 38 or 48")
    kind = taken[0]
    used = 4 if kind == 2 and len(taken) >= 4 else 2 if kind == 5 and len(taken) >= 2 else 1
    for n in reversed(taken[used:]):
        codes.appendleft(n)
    return _get_extended_color(taken[:used])


class FeedbackExporter(HTMLExporter):
    """nbconvert's HTML exporter for feedback pages, made cheaper in two ways that leave
    the page as nbconvert would make it:

    - compiled templates, highlighted code (``BoundedHighlight``) and cleaned markup
      (``remembered_clean_html``) are kept between pages;
    - ``HTMLExporter.from_notebook_node`` parses every page it made with BeautifulSoup, to
      give images without alt text a default one and JupyterLab-template cells a tab
      stop: a quarter of a grading worker's own time. This classic-based page has no
      JupyterLab cells, so only a page with an image is parsed, for its alt text. The
      rest is that method's own set-up of the code and data-type filters.
    """

    compiled = _CompiledTemplates()
    NO_ALT = "No description has been provided for this image"  # nbconvert's words

    def _create_environment(self):
        environment = super()._create_environment()
        environment.bytecode_cache = self.compiled
        return environment

    # Tags all of a page's markdown may render to (the course's pages: under 400); past it
    # a cell is a note: the sanitizer's time and memory grow with the tags it parses.
    MAX_RENDERED_TAGS = 20_000
    TOO_MUCH_MARKUP = (
        "<p><em>(This markdown has more markup than the feedback page shows; "
        "see the notebook.)</em></p>"
    )

    @pass_context
    def markdown2html(self, context, source):
        """nbconvert's ``HTMLExporter.markdown2html``, with ``BoundedRenderer`` and the
        page's budget of rendered tags."""
        html = self._render_markdown(context, source)
        tags = html.count("<")
        if tags > self._tags_left:
            return self.TOO_MUCH_MARKUP
        self._tags_left -= tags
        return html

    # Markdown rendered on an earlier page: a class's pages share the instructor's cells.
    rendered = _Memo()

    def _render_markdown(self, context, source):
        cell = context.get("cell", {})
        attachments = cell.get("attachments", {})
        key = None
        # The markup is a function of the source and these settings alone where the cell
        # has no attachments and no image is embedded (the only use of the page's path).
        if not attachments and not self.embed_images:
            key = (
                source,
                self.anchor_link_text,
                self.exclude_anchor_links,
                repr(sorted(self.lexer_options.items())),
            )
            found = self.rendered.find(key)
            if found is not None:
                return found
        renderer = BoundedRenderer(
            self._budget,
            escape=False,
            attachments=attachments,
            embed_images=self.embed_images,
            path=context.get("resources", {}).get("metadata", {}).get("path", ""),
            anchor_link_text=self.anchor_link_text,
            exclude_anchor_links=self.exclude_anchor_links,
            **self.lexer_options,
        )
        html = MarkdownWithMath(renderer=renderer).render(source)
        if key is not None and not renderer.cut:
            self.rendered.keep(key, html, len(source))
        return html

    def from_notebook_node(self, nb, resources=None, **kw):
        self._budget = HighlightBudget()  # one page's
        self._tags_left = self.MAX_RENDERED_TAGS
        highlight_code = BoundedHighlight(self._budget, parent=self)
        resources = self._init_resources(resources)
        filter_data_type = WidgetsDataTypeFilter(
            notebook_metadata=self._nb_metadata, parent=self, resources=resources
        )
        self.register_filter("highlight_code", highlight_code)
        self.register_filter("ansi2html", ansi2html)
        self.register_filter("filter_data_type", filter_data_type)
        self.register_filter("clean_html", remembered_clean_html)
        self.register_filter("clean_markdown_html", clean_markdown_html)
        html, resources = TemplateExporter.from_notebook_node(self, nb, resources, **kw)
        if "<img" not in html:
            return html, resources
        soup = BeautifulSoup(html, features="html.parser")
        for image in soup.select("img:not([alt])"):
            image.attrs["alt"] = self.NO_ALT
        return str(soup), resources


def configure_feedback(config) -> None:
    """Make nbgrader's generate_feedback hide hidden tests and sanitize the page."""
    import nbgrader
    from nbgrader.converters import GenerateFeedback
    from nbgrader.preprocessors import GetGrades

    from autograder.notebook_rows import GetGradesFromOneRead

    # nbgrader's own steps, its GetGrades reading a page's grades and comments at once.
    defaults = [
        GetGradesFromOneRead if p is GetGrades else p
        for p in GenerateFeedback.class_traits()["preprocessors"].default()
    ]
    config.GenerateFeedback.preprocessors = [
        HideHiddenTests,
        BoundedMarkup,
        SafeOutputMetadata,
        RememberedSanitizeHTML,
        *defaults,
    ]
    config.SanitizeHTML.enabled = True
    # Markdown sources may hold the HTML markdown allows (an instructor's <sup>); the same
    # list as the rendered page's, so what survives one pass survives the other.
    config.SanitizeHTML.tags = list(MARKDOWN_TAGS)
    config.SanitizeHTML.attributes = dict(MARKDOWN_ATTRIBUTES)
    formgrader = Path(nbgrader.__file__).parent / "server_extensions" / "formgrader"
    config.GenerateFeedback.exporter_class = FeedbackExporter
    exporter = config.GenerateFeedback.HTMLExporter
    exporter.template_name = "feedback_sanitized"
    exporter.extra_template_basedirs = [str(TEMPLATES), str(formgrader / "templates")]
    # Where "feedback/index.html.j2" (which ours extends) and nbgrader's CSS are found.
    exporter.extra_template_paths = [
        str(formgrader / "templates"),
        str(formgrader / "static" / "node_modules" / "bootstrap" / "dist" / "css"),
    ]
    exporter.sanitize_html = True


def warm(config, source: Path) -> float:
    """Make a page of the instructor's notebook in this process, once, and return its CPU
    seconds. Pages are made in forked children (``worker.feedback_in_child``) whose caches
    die with them: this fills the parent's, which every child starts with, with compiled
    templates and the instructor's cells (markdown, and test cells as feedback shows them).
    The solutions are cleared first with nbgrader's ``ClearSolutions``, as in a student's
    copy; nothing of any student's is ever kept here."""
    import nbformat
    import nbgrader.converters as converters
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.preprocessors import ClearSolutions, GetGrades

    start = time.process_time()
    app = converters.GenerateFeedback(coursedir=CourseDirectory(config=config), config=config)
    exporter = app.exporter_class(parent=app, config=app.config)
    for preprocessor in app.preprocessors:
        if not issubclass(preprocessor, GetGrades):  # no submission, no grades
            exporter.register_preprocessor(preprocessor)
    nb = nbformat.read(source, as_version=nbformat.NO_CONVERT)
    # The assignment too: hidden cells' verdicts then read the source's words here, once.
    resources = {
        "nbgrader": {
            "notebook": source.stem,
            "assignment": source.parent.name,
            "score": 0,
            "max_score": 0,
        }
    }
    resources["nbgrader"]["late_penalty"] = 0
    nb, resources = ClearSolutions(parent=app).preprocess(nb, resources)
    for cell in nb.cells:  # what GetGrades gives a page from the gradebook
        if cell.metadata.get("nbgrader"):
            cell.metadata.nbgrader.update(comment=None, score=0)
    exporter.from_notebook_node(nb, resources)
    return time.process_time() - start
