"""What has been graded: one small JSON file per submission, written after its grades
are committed to the gradebook.

This is what makes grading idempotent and resumable. A run skips a submission whose
ledger entry has the same content hash; a run killed midway left no entry for the
submissions it had not finished, so the next run grades exactly those, and nbgrader's
forced autograde replaces (never adds to) their grade rows. A forced run first lists
every submission it will grade again (``to_regrade``) and strikes each off once graded:
one interrupted leaves the rest listed, and the next run, forced or not, grades them
(their entries are from before whatever the force was for, a new due date say). Each
entry and the list are written to a temporary file and renamed, so a kill never leaves
half of one.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

STATE_DIR = ".course-grade"


class Ledger:
    def __init__(self, course_root: Path, assignment: str):
        self.folder = Path(course_root) / STATE_DIR / assignment / "ledger"
        self.folder.mkdir(parents=True, exist_ok=True)

    def _path(self, student_id: str) -> Path:
        return self.folder / f"{student_id}.json"

    def get(self, student_id: str) -> dict | None:
        try:
            return json.loads(self._path(student_id).read_text(encoding="utf-8"))
        except (FileNotFoundError, json.JSONDecodeError):
            return None

    def put(self, entry: dict) -> None:
        path = self._path(entry["student_id"])
        tmp = path.with_suffix(".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(entry, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

    def to_regrade(self) -> set[str]:
        """The submissions a forced run meant to grade again and had not yet."""
        try:
            return set(json.loads(self._regrade_path().read_text(encoding="utf-8")))
        except (FileNotFoundError, json.JSONDecodeError, TypeError):
            return set()

    def set_to_regrade(self, students: set[str]) -> None:
        path = self._regrade_path()
        if not students:
            path.unlink(missing_ok=True)
            return
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(sorted(students)), encoding="utf-8")
        os.replace(tmp, path)

    def _regrade_path(self) -> Path:
        return self.folder.parent / "to-regrade.json"

    def add_note(self, student_id: str, note: str) -> None:
        """Something the instructor must know about a student that is no grade of theirs
        (a folder they forged in another's name): kept apart, shown in every report."""
        notes = self.notes().get(student_id, [])
        if note not in notes:
            path = self.folder.parent / "notes" / f"{student_id}.json"
            path.parent.mkdir(exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(notes + [note], indent=1), encoding="utf-8")
            os.replace(tmp, path)

    def notes(self) -> dict[str, list[str]]:
        out = {}
        for path in sorted((self.folder.parent / "notes").glob("*.json")):
            try:
                out[path.stem] = list(json.loads(path.read_text(encoding="utf-8")))
            except (json.JSONDecodeError, TypeError):
                continue
        return out

    def entries(self) -> list[dict]:
        out = []
        for path in sorted(self.folder.glob("*.json")):
            try:
                out.append(json.loads(path.read_text(encoding="utf-8")))
            except json.JSONDecodeError:
                continue
        return out
