"""The one way a student kernel starts: ``python -m autograder.kernel_entry -f CONN``.

Runs inside the sandbox, before any student code: applies the rlimits passed in
``COURSE_GRADE_LIMITS`` (JSON), drops root to ``COURSE_GRADE_UID`` when set (RLIMIT_NPROC
is not enforced for root), installs the integrity helper's audit hooks when
``autograder.audit`` exists (its log path is in ``COURSE_GRADE_AUDIT_LOG``), then hands over
to ipykernel. Anything this module cannot do is fatal: a kernel without its limits must
not run student code.
"""
from __future__ import annotations

import importlib.util
import json
import os
import resource
import sys

from autograder.context import AUDIT_LOG_ENV

LIMITS_ENV = "COURSE_GRADE_LIMITS"
UID_ENV = "COURSE_GRADE_UID"
MB = 1024 * 1024


def apply_limits(limits: dict) -> None:
    def cap(kind: int, value: int) -> None:
        if value > 0:
            resource.setrlimit(kind, (value, value))

    # The soft CPU limit sends SIGXCPU a little before the hard one's SIGKILL would.
    cpu = limits.get("cpu_seconds", 0)
    if cpu > 0:
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
    cap(resource.RLIMIT_AS, limits.get("address_space_mb", 0) * MB)
    cap(resource.RLIMIT_NPROC, limits.get("max_processes", 0))
    cap(resource.RLIMIT_FSIZE, limits.get("max_file_mb", 0) * MB)
    cap(resource.RLIMIT_CORE, 0)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def drop_root(uid: int) -> None:
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    if os.getuid() != uid or os.geteuid() != uid:
        raise SystemExit("kernel_entry: could not drop root")


def main() -> None:
    limits = json.loads(os.environ.pop(LIMITS_ENV, "{}"))
    apply_limits(limits)
    uid = os.environ.pop(UID_ENV, "")
    if uid:
        drop_root(int(uid))
    if limits.get("audit_hooks", True) and importlib.util.find_spec("autograder.audit"):
        from autograder import audit

        audit.install(os.environ.get(AUDIT_LOG_ENV, ""))
    # The instructor's pid means nothing in the sandbox's pid namespace; bwrap's
    # --die-with-parent already ends the kernel when the grader goes.
    os.environ.pop("JPY_PARENT_PID", None)
    from ipykernel import kernelapp

    sys.argv[0] = "ipykernel_launcher"
    kernelapp.launch_new_instance()


if __name__ == "__main__":
    main()
