"""Outputs that carry scripts: HTML, JavaScript, SVG and markdown display data, and an
image whose metadata (written unquoted by nbconvert's template) is an event handler,
from an answer cell, into the instructor's feedback page."""

from tests.hostile._common import HONEST_SCORE, with_trick

WEAKNESS = 7
STUDENT_ID = "trick-script-in-outputs"
ANSWERS = with_trick("""
from IPython.display import HTML, SVG, Javascript, Markdown, display
display(HTML("<script>cgxss()</script><img src=x onerror='cgxss()'>"))
display(Javascript("cgxss()"))
display(SVG('<svg xmlns="http://www.w3.org/2000/svg"><script>cgxss()</script></svg>'))
display(Markdown("<script>cgxss()</script> [x](javascript:cgxss())"))
display({"text/html": "<body onload='cgxss()'>", "application/vnd.cgxss": "cgxss()"}, raw=True)
_png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
display({"image/png": _png}, raw=True,
        metadata={"image/png": {"width": "1 onerror=cgxss()", "height": "1 onload=cgxss()"},
                  "filenames": {"image/png": "javascript:cgxss()"}})
""")
EXPECTED_SCORE = HONEST_SCORE
EXPECTED_FATE = "graded"
