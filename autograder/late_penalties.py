"""nbgrader's AssignLatePenalties, refusing a penalty that is not a number of points.

Contract: the penalty nbgrader would record for a number the course's plugin returns
(negative: 0; more than the score: the score; ``None``: no penalty, as nbgrader reads it).
Anything else, NaN, an infinity, a string, raises ``LatePenaltyError`` naming the plugin and
what it gave. nbgrader compares the value with 0 and the score only: NaN passes both, is
stored as NULL, and was read back as no penalty at all, so a late submission went to every
export with full marks (outside attack 77: a blank spreadsheet cell of extensions). Raised,
the submission's grading fails and it is withheld with that reason, as for a plugin that
raises.

Used by course-grade's workers (``Autograde.autograde_preprocessors``, ``config.py``) and by
the coordinator (``grade._save_grades``). Plain nbgrader keeps its own class.
"""

from __future__ import annotations

import math
import numbers

from nbgrader.preprocessors import AssignLatePenalties


class LatePenaltyError(ValueError):
    pass


class CheckedLatePenalties(AssignLatePenalties):
    def _check_late_penalty(self, notebook, penalty):
        if isinstance(penalty, bool) or not (
            isinstance(penalty, numbers.Real) and math.isfinite(penalty)
        ):
            plugin = type(self.plugin_inst)
            raise LatePenaltyError(
                f"the late-penalty plugin {plugin.__module__}.{plugin.__qualname__} gave "
                f"{repr(penalty)[:80]} for a late submission: not a number of points, so its "
                "score after the penalty is unknown; fix the plugin and grade again"
            )
        return super()._check_late_penalty(notebook, float(penalty))
