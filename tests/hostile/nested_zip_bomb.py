"""A 2 kB entry that is a zip of zips, each of which expands a hundredfold: a bomb for an
extractor that opens archives inside archives."""

import io
import zipfile

from tests.submissions_gpu_tensors import SOLUTIONS, TOTAL

WEAKNESS = 6
STUDENT_ID = "trick-nested-zip-bomb"


def _bomb(levels: int = 4) -> bytes:
    data = b"\0" * 1_000_000
    name = "zeros.bin"
    for level in range(levels):
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
            for copy in range(10):
                zf.writestr(f"{copy}-{name}", data)
        data, name = buffer.getvalue(), f"level{level}.zip"
    return data


def place(inbox):
    inbox.zip(f"gpu_tensors_{STUDENT_ID}_attempt_2024-03-01_extra.zip", _bomb())
    inbox.zip(
        f"gpu_tensors_{STUDENT_ID}_attempt_2024-03-01_gpu_tensors.ipynb", inbox.notebook(SOLUTIONS)
    )


# The inner archive is refused unopened; the notebook beside it is graded.
EXPECTED = {STUDENT_ID: (TOTAL, "graded")}
