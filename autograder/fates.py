"""A submission's fate, decided from what happened while it was graded.

Every submission ends with exactly one fate; ``details`` says why in words. The order of
the checks is the order of precedence: a submission whose tests could not be checked is
"needs review" (its test points are withheld until a regrade with ``--force``), because
that is what the instructor must look at first, whatever else happened.
"""

from __future__ import annotations

import signal
from dataclasses import asdict, dataclass, field
from enum import Enum

GRADED = "graded"
TIMED_OUT = "timed out"
KILLED_FOR_MEMORY = "killed for memory"
# Its processes and threads reached Sandbox.max_processes: a fork bomb, or as good as one.
TOO_MANY_PROCESSES = "too many processes"
INVALID_NOTEBOOK = "invalid notebook"
NO_NOTEBOOK = "no notebook"  # a submission came without the unit's notebook: no grade
# A student of the gradebook with no submission at all: 0, as nbgrader's own export says.
NOT_SUBMITTED = "not submitted"
# The grader could not be sure (the test kernel could not finish, or an import was
# ambiguous): points are withheld, never given, and the details say why.
NEEDS_REVIEW = "needs review"
# The grader's own failure (not the student's): nbgrader could not grade it at all.
ERROR = "error"
FATES = (
    GRADED,
    TIMED_OUT,
    KILLED_FOR_MEMORY,
    TOO_MANY_PROCESSES,
    INVALID_NOTEBOOK,
    NO_NOTEBOOK,
    NOT_SUBMITTED,
    NEEDS_REVIEW,
    ERROR,
)

# bwrap exits 128 + the signal that ended the kernel.
CPU_LIMIT_STATUSES = {128 + signal.SIGXCPU, 128 + signal.SIGKILL, -signal.SIGXCPU, -signal.SIGKILL}


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


class Kind(str, Enum):
    """What can happen to a submission while it is graded (an ``Event``'s kind)."""

    NEEDS_REVIEW = "needs_review"  # the test kernel could not finish: points withheld
    MEMORY = "memory"  # a kernel killed for memory
    PROCESSES = "processes"  # a kernel killed at its process limit
    MEMORY_ERROR = "memory_error"  # a MemoryError under the address-space limit
    WALL = "wall"  # a kernel killed after its wall time
    CPU_SHARE = "cpu_share"  # a kernel killed for keeping too many CPUs busy
    TIMEOUT = "timeout"  # a cell (or a test's call) ran out of time
    DIED = "died"  # the student's kernel stopped; later cells scored 0
    OUTPUT_TRUNCATED = "output_truncated"
    TOO_COSTLY = "too_costly"  # an answer refused as too costly to check
    FLOOD = "flood"  # a student's kernel cut off for a message too large
    NO_TEMPLATE = "no_template"  # a kernel (where: test, student) was started, not forked: why


@dataclass(frozen=True)
class Event:
    """One thing that happened to a submission, recorded by the kernels' watchdogs and
    the executor, read by ``decide``. Each kind uses the fields its comment names."""

    kind: Kind
    reason: str = ""  # NEEDS_REVIEW, DIED, FLOOD: why, in words; TOO_COSTLY: what;
    # OUTPUT_TRUNCATED: "outputs" where the count passed its limit, not the bytes, "lost"
    # where a cell's output ended without its idle, "display updates" past their rewrites
    where: str = ""  # DIED, OUTPUT_TRUNCATED "lost": the cell; TIMEOUT: the test cell or call
    used: float = 0.0  # MEMORY: MB; PROCESSES: processes and threads; CPU_SHARE: CPUs
    limit: float = 0.0  # the limit that was passed (MB, count, s, CPUs)
    exit_status: int | None = None  # DIED: the kernel's exit status, where it exited
    reused: bool = False  # NEEDS_REVIEW: on a template that had served before


def decide(events: list[Event]) -> tuple[str, list[str]]:
    """The fate of a graded submission and the reasons, from what its run recorded."""
    details = []
    memory = wall = cpu = review = processes = False
    timeouts = []
    for e in events:
        kind = e.kind
        if kind is Kind.NEEDS_REVIEW:
            review = True
            details.append(f"test points withheld: {e.reason}")
        elif kind is Kind.MEMORY:
            memory = True
            details.append(f"kernel killed for memory: {e.used:g} MB > {e.limit:g} MB")
        elif kind is Kind.PROCESSES:
            processes = True
            details.append(
                f"kernel killed at its process limit: {e.used:g} processes "
                f"and threads (limit {e.limit:g})"
            )
        elif kind is Kind.MEMORY_ERROR:
            memory = True
            details.append(
                "a cell raised MemoryError: out of memory at the address-space limit "
                "(or raised by the notebook's own code)"
            )
        elif kind is Kind.WALL:
            wall = True
            details.append(f"kernel killed after {e.limit:g} s of wall time")
        elif kind is Kind.CPU_SHARE:
            wall = True
            details.append(f"kernel killed for keeping {e.used:g} CPUs busy (limit {e.limit:g})")
        elif kind is Kind.TIMEOUT:
            timeouts.append(e.where or "a cell")
        elif kind is Kind.DIED:
            details.append(f"kernel stopped ({e.where}): {e.reason}; later cells scored 0")
            cpu = cpu or e.exit_status in CPU_LIMIT_STATUSES
        elif kind is Kind.FLOOD:
            details.append(f"kernel cut off: {e.reason}")
        elif kind is Kind.TOO_COSTLY:
            details.append(f"an answer was too costly to check, and its test scored 0: {e.reason}")
        elif kind is Kind.NO_TEMPLATE:
            details.append(
                f"its {e.where or 'test'} kernel was started without a template: {e.reason}"
            )
        elif kind is Kind.OUTPUT_TRUNCATED and e.reason == "outputs":
            details.append(f"outputs past the first {e.limit:,.0f} dropped")
        elif kind is Kind.OUTPUT_TRUNCATED and e.reason == "display updates":
            details.append(f"display updates past {e.limit:,.0f} outputs rewritten dropped")
        elif kind is Kind.OUTPUT_TRUNCATED and e.reason == "lost":
            details.append(f"output lost: the end of {e.where}'s output did not arrive")
        elif kind is Kind.OUTPUT_TRUNCATED:
            details.append(f"output over {e.limit:g} MB dropped")
    if timeouts:
        details.append("timed out: " + ", ".join(timeouts))
    cpu = cpu and not (memory or wall)
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


def kill_reason(event: Event) -> str | None:
    """Why the watchdog killed a kernel, in words, for one of its events (else None)."""
    kind = event.kind
    if kind is Kind.MEMORY:
        return f"killed for memory ({event.used:g} MB > {event.limit:g} MB)"
    if kind is Kind.PROCESSES:
        return f"killed at its process limit ({event.limit:g} processes and threads)"
    if kind is Kind.WALL:
        return f"killed after {event.limit:g} s of wall time"
    if kind is Kind.CPU_SHARE:
        return f"killed for keeping {event.used:g} CPUs busy"
    if kind is Kind.FLOOD:
        return f"cut off: {event.reason}"
    return None
