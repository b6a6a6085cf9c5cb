"""``course-grade``'s entry point: where the run grades on this machine's own pool, the
pool's fork server is started first (``fork_server.start``), so that it imports what the
workers grade with while the coordinator imports the same (about a CPU second each, side
by side on two cores: the first submission is graded about a second sooner). Then the
coordinator's own command line, ``autograder.coordinator.cli``, runs as it always did.
"""

from __future__ import annotations

import sys

# Runs that grade nothing on a local pool: help, the reports alone, a Dask cluster's.
NO_LOCAL_POOL = ("-h", "--help", "--report-only", "--scheduler")


def grades_on_a_local_pool(argv: list[str]) -> bool:
    """Whether the command line asks for grading on this machine's pool, as far as it can
    be told before it is parsed (an option given as ``--scheduler=ADDRESS`` included).
    A wrong guess costs a second of CPU or gains nothing: never a different run."""
    return not any(arg.split("=", 1)[0] in NO_LOCAL_POOL for arg in argv)


def main(argv: list[str] | None = None) -> int:
    try:
        if grades_on_a_local_pool(sys.argv[1:] if argv is None else argv):
            from autograder.coordinator import fork_server

            fork_server.start()
        from autograder.coordinator import cli
    except KeyboardInterrupt:  # Ctrl-C while it imports: a traceback said nothing useful
        print("\ncourse-grade: interrupted as it started; nothing was changed.", file=sys.stderr)
        return 130
    return cli.main(argv)
