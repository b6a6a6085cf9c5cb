"""A submission's fate, decided from what happened while it was graded.

Every submission ends with exactly one fate; ``details`` says why in words. The order of
the checks is the order of precedence: a submission whose tests could not be checked is
"needs review" (its test points are withheld until a regrade with ``--force``), because
that is what the instructor must look at first, whatever else happened.
"""
from __future__ import annotations

import signal
from dataclasses import asdict, dataclass, field

GRADED = "graded"
TIMED_OUT = "timed out"
KILLED_FOR_MEMORY = "killed for memory"
# Its processes and threads reached Sandbox.max_processes: a fork bomb, or as good as one.
TOO_MANY_PROCESSES = "too many processes"
INVALID_NOTEBOOK = "invalid notebook"
NO_NOTEBOOK = "no notebook"
# The grader could not be sure (the test kernel could not finish, or an import was
# ambiguous): points are withheld, never given, and the details say why.
NEEDS_REVIEW = "needs review"
# The grader's own failure (not the student's): nbgrader could not grade it at all.
ERROR = "error"
FATES = (GRADED, TIMED_OUT, KILLED_FOR_MEMORY, TOO_MANY_PROCESSES, INVALID_NOTEBOOK,
         NO_NOTEBOOK, NEEDS_REVIEW, ERROR)

# bwrap exits 128 + the signal that ended the kernel.
CPU_LIMIT_STATUSES = {128 + signal.SIGXCPU, 128 + signal.SIGKILL, -signal.SIGXCPU,
                      -signal.SIGKILL}


@dataclass
class Outcome:
    student_id: str
    fate: str
    score: float | None = None
    max_score: float | None = None
    details: list[str] = field(default_factory=list)
    digest: str = ""
    seconds: float = 0.0
    # Seconds spent in each step of grading (autograde, feedback...).
    phases: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)


def decide(events: list[dict]) -> tuple[str, list[str]]:
    """The fate of a graded submission and the reasons, from what its run recorded."""
    details = []
    memory = wall = cpu = review = processes = False
    timeouts = []
    for e in events:
        kind = e["event"]
        if kind == "needs_review":
            review = True
            details.append(f"test points withheld: {e['reason']}")
        elif kind == "memory":
            memory = True
            details.append(f"kernel killed for memory: {e['used_mb']} MB > {e['limit_mb']} MB")
        elif kind == "processes":
            processes = True
            details.append(f"kernel killed at its process limit: {e['count']} processes "
                           f"and threads (limit {e['limit']})")
        elif kind == "memory_error":
            memory = True
            details.append("ran out of memory (MemoryError under the address-space limit)")
        elif kind == "wall":
            wall = True
            details.append(f"kernel killed after {e['limit_s']} s of wall time")
        elif kind == "cpu_share":
            wall = True
            details.append(f"kernel killed for keeping {e['cpus']:g} CPUs busy "
                           f"(limit {e['limit']:g})")
        elif kind == "timeout":
            timeouts.append(e.get("grade_id") or "a cell")
        elif kind == "died":
            details.append(f"kernel stopped ({e['where']}): {e['reason']}; later cells scored 0")
            if _status(e["reason"]) in CPU_LIMIT_STATUSES and not (memory or wall):
                cpu = True
        elif kind == "too_costly":
            details.append(f"an answer was too costly to check, and its test scored 0: {e['what']}")
        elif kind == "output_truncated":
            details.append(f"output over {e['limit_mb']:g} MB dropped")
    if timeouts:
        details.append("timed out: " + ", ".join(timeouts))
    if cpu:
        details.append("kernel stopped at the CPU-time limit")
    if review:
        return NEEDS_REVIEW, details
    if memory:
        return KILLED_FOR_MEMORY, details
    if processes:
        return TOO_MANY_PROCESSES, details
    if wall or timeouts or cpu:
        return TIMED_OUT, details
    return GRADED, details


def kill_reason(event: dict) -> str | None:
    """Why the watchdog killed a kernel, in words, for one of its events (else None)."""
    kind = event["event"]
    if kind == "memory":
        return f"killed for memory ({event['used_mb']} MB > {event['limit_mb']} MB)"
    if kind == "processes":
        return f"killed at its process limit ({event['limit']} processes and threads)"
    if kind == "wall":
        return f"killed after {event['limit_s']} s of wall time"
    if kind == "cpu_share":
        return f"killed for keeping {event['cpus']:g} CPUs busy"
    return None


def _status(reason: str) -> int | None:
    marker = "(status "
    if marker not in reason:
        return None
    try:
        return int(reason.split(marker, 1)[1].split(")", 1)[0])
    except ValueError:
        return None
