"""Swaps its sockets' folder contents for links, hoping root will chown or chmod through
them, and leaves a world-writable link to a file outside the course."""

from tests.hostile._common import HONEST_SCORE, with_trick

WEAKNESS = 1
STUDENT_ID = "trick-chmod-bait"
ANSWERS = with_trick("""
import glob, os
for sock in glob.glob("/tmp/cg-*/k*/s/*") + glob.glob("/tmp/*/k*/s/*"):
    try:
        os.rename(sock, sock + ".old")
        os.symlink("@SENTINEL@", sock)
    except OSError:
        pass
for folder in glob.glob("/tmp/cg-*/k*/s") + [os.getcwd()]:
    try:
        os.symlink("@SENTINEL@", os.path.join(folder, "bait"))
    except OSError:
        pass
""")
# Whatever happened to its own sockets, the grader connected before the notebook ran and
# never reconnects; it changes the mode or owner of no path the kernel could reach.
EXPECTED_SCORE = HONEST_SCORE
EXPECTED_FATE = "graded"
