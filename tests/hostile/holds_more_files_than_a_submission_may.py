"""The right notebook beside 1,001 empty files, which pass every byte limit: nbgrader's own
steps globbed the submission's folder once for every file (8,000 files held a grading
worker 77 s, 20,000 files 490 s, outside every limit of the kernels'), and in an LMS
download one student's 20,000 files used up the download's entries, so that each
classmate after them was left ungraded (attack 38). By the folder import, the exchange
and a download."""

from tests.submissions_gpu_tensors import SOLUTIONS, TOTAL

WEAKNESS = 6
STUDENT_ID = "trick-many-files"
NEIGHBOUR = "many-files-neighbour"
FLOOD = {f"n{i}.txt": b"" for i in range(1_001)}
FULL = {f"n{i}.txt": b"" for i in range(999)}  # with the notebook, the most a submission holds


def place(inbox):
    nb = inbox.notebook(SOLUTIONS)
    inbox.folder(f"{STUDENT_ID}-folder", files={"gpu_tensors.ipynb": nb, **FLOOD})
    inbox.exchange(
        f"{STUDENT_ID}-exchange+gpu_tensors+2024-03-01 10:00:00.000000 UTC+many",
        {"gpu_tensors.ipynb": nb, **FLOOD},
    )
    stamp = "attempt_2024-03-01-10-00-00"
    inbox.zip(f"gpu_tensors_{STUDENT_ID}-zip_{stamp}_gpu_tensors.ipynb", nb)
    for name in FLOOD:
        inbox.zip(f"gpu_tensors_{STUDENT_ID}-zip_{stamp}_{name}", b"")
    inbox.zip(f"gpu_tensors_{NEIGHBOUR}_{stamp}_gpu_tensors.ipynb", nb)
    # Exactly as many as a submission may hold, beside which nbgrader writes its own
    # timestamp.txt (one too many to grade, in outside attack 39).
    inbox.zip(f"gpu_tensors_{STUDENT_ID}-full-zip_{stamp}_gpu_tensors.ipynb", nb)
    for name in FULL:
        inbox.zip(f"gpu_tensors_{STUDENT_ID}-full-zip_{stamp}_{name}", b"")
    inbox.exchange(
        f"{STUDENT_ID}-full-exchange+gpu_tensors+2024-03-01 10:00:00.000000 UTC+full",
        {"gpu_tensors.ipynb": nb, **FULL},
    )


# More names than c.SubmissionLimits.max_files (1,000): not graded, and the report says
# why (an invalid notebook); the classmate after them in the download is graded as ever.
EXPECTED = {
    f"{STUDENT_ID}-folder": (None, "invalid notebook"),
    f"{STUDENT_ID}-exchange": (None, "invalid notebook"),
    f"{STUDENT_ID}-zip": (None, "invalid notebook"),
    NEIGHBOUR: (TOTAL, "graded"),
    f"{STUDENT_ID}-full-zip": (TOTAL, "graded"),
    f"{STUDENT_ID}-full-exchange": (TOTAL, "graded"),
}
