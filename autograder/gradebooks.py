"""One SQLAlchemy engine per gradebook URL in a grading process.

nbgrader opens a new ``Gradebook`` for nearly every step (five for autograde's set-up,
one per preprocessor, one for the feedback's grades), and each makes a new engine with
an empty cache of compiled SQL, so every query of every step was compiled again: about
a tenth of a CPU second per submission in a worker and in the coordinator. Sharing the
engine keeps what nbgrader does (its sessions, its commits, ``Gradebook.close``, which
only empties the engine's pool of connections) and keeps the compiled SQL.

Nothing a student controls reaches this: the URLs are the course's and the workers'
private gradebooks. nbgrader has no setting for its engine, so ``share_engines`` wraps
``nbgrader.api.create_engine`` in this process; it is idempotent.
"""
from __future__ import annotations

import threading
from collections import OrderedDict

KEEP = 8  # engines kept (a process of the test suite grades many courses)
_ENGINES: OrderedDict = OrderedDict()
_LOCK = threading.Lock()


def share_engines() -> None:
    import nbgrader.api as api

    if getattr(api.create_engine, "shared", False):
        return
    make = api.create_engine

    def create_engine(url, **options):
        key = (str(url), tuple(sorted(options.items())))
        with _LOCK:
            if key in _ENGINES:
                _ENGINES.move_to_end(key)
                return _ENGINES[key]
            engine = _ENGINES[key] = make(url, **options)
            while len(_ENGINES) > KEEP:
                _ENGINES.popitem(last=False)[1].dispose()
            return engine

    create_engine.shared = True
    api.create_engine = create_engine
