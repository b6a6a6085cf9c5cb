"""The integrity review of one graded submission: flags, and passes to revoke.

``review(ctx)`` is called by the pipeline after nbgrader's autograde of a submission
(see ``autograder.context``). It combines three independent looks:

1. ``tamper_scan``: a static read of the submitted notebook (flags only);
2. the kernel's audit log (``autograder.audit``): what the kernel tried and was denied,
   and whether the log itself is whole (flags only);
3. the clean room (``autograder.cleanroom``): the trusted tests rerun, in a kernel that
   never ran student code, on the answers the student's kernel recorded as plain data.
   A test cell keeps its points only if both nbgrader's run and the clean room gave
   them; every other pass goes into ``zero_cells``, with a flag.

The clean room runs only when nbgrader's run gave some points, so a blank or broken
submission costs nothing more; in the pipeline its kernel stays warm from one
submission to the next (``cleanroom.CleanRoom``).
"""
from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import nbformat

from autograder import cleanroom, tamper_scan
from autograder.context import GradingContext, Review

MAX_LOG_BYTES = 300 * 1024 * 1024
SHOWN_PER_KIND = 3
RECORD_KINDS = {"cell", "value", "call", "full"}


def review(ctx: GradingContext) -> Review:
    result = Review()
    source_nb = nbformat.read(ctx.source_nb, as_version=4)
    submitted_nb = _read(ctx.submitted_nb)
    autograded_nb = _read(ctx.autograded_nb)
    if submitted_nb is not None:
        result.flags.extend(tamper_scan.scan_notebook(submitted_nb, source_nb))
    result.flags.extend(audit_flags(ctx.audit_log, kernel_ran=autograded_nb is not None))

    kernel_scores = cleanroom.kernel_scores(autograded_nb) if autograded_nb else {}
    earned = {g for g, s in kernel_scores.items() if s > 0}
    if not earned:
        return result
    if not Path(ctx.audit_log).is_file():
        clean = cleanroom.CleanRoomResult(problem="the kernel's answer record is missing")
    else:
        clean = cleanroom.run(source_nb, autograded_nb, Path(ctx.audit_log),
                              ctx.launch_kernel, scratch_dir=ctx.scratch_dir,
                              cell_timeout=ctx.cell_timeout, room=ctx.clean_room)
    for grade_id in sorted(earned):
        if clean.scores.get(grade_id, 0.0) < kernel_scores[grade_id] - 1e-9:
            result.zero_cells.add(grade_id)
    if clean.problem:
        result.flags.append(f"the clean-room check could not run ({clean.problem}); "
                            "its passes are revoked")
    elif result.zero_cells:
        shown = ", ".join(f"'{g}' ({clean.messages.get(g, 'no pass')})"
                          for g in sorted(result.zero_cells)[:SHOWN_PER_KIND])
        more = len(result.zero_cells) - SHOWN_PER_KIND
        result.flags.append(
            "passed in the student's kernel but not on its recorded answers, so the pass "
            f"is revoked: {shown}" + (f" and {more} more" if more > 0 else ""))
    return result


def audit_flags(log_path: Path, kernel_ran: bool = True) -> list[str]:
    """Flags from the audit log: denied actions, grouped, and a log that is not whole."""
    path = Path(log_path)
    if not path.is_file():
        return ["the kernel's audit log is missing"] if kernel_ran else []
    if path.stat().st_size > MAX_LOG_BYTES:
        return ["the kernel's audit log is larger than any honest notebook makes"]
    by_kind: dict[str, list[str]] = defaultdict(list)
    garbled = installs = 0
    with open(path, "rb") as f:
        for number, raw in enumerate(f):
            try:
                entry = json.loads(raw)
                kind = entry["t"]
            except (ValueError, TypeError, KeyError):
                garbled += 1
                continue
            if kind in RECORD_KINDS:
                continue
            if kind != "audit":
                garbled += 1
            elif entry.get("event") == "install":
                installs += 1
            elif entry.get("denied"):
                why = str(entry.get("why", ""))
                subject, _, detail = why.partition(": ")
                by_kind[subject].append(detail)
    flags = []
    if kernel_ran and installs == 0:
        flags.append("the kernel's audit log has no start entry (deleted or rewritten?)")
    if garbled:
        flags.append(f"the kernel's audit log has {garbled} garbled line(s)")
    for subject, details in by_kind.items():
        shown = sorted({d for d in details if d})[:SHOWN_PER_KIND]
        flags.append(f"{subject} (denied, {len(details)}x)" + (
            ": " + ", ".join(shown) if shown else ""))
    return flags


def _read(path: Path):
    try:
        return nbformat.read(path, as_version=4)
    except Exception:  # noqa: BLE001 - an unreadable notebook has its own fate already
        return None
