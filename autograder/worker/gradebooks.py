"""One SQLAlchemy engine per gradebook URL, and one schema validator for nbgrader's cell
metadata, in a grading process.

nbgrader opens a new ``Gradebook`` for nearly every step (five for autograde's set-up,
one per preprocessor, one for the feedback's grades), and each makes a new engine with
an empty cache of compiled SQL, so every query of every step was compiled again: about
a tenth of a CPU second per submission in a worker and in the coordinator. Sharing the
engine keeps what nbgrader does (its sessions, its commits, ``Gradebook.close``, which
only empties the engine's pool of connections) and keeps the compiled SQL.

A worker grades every job in the same folder, so its private gradebook has one URL and
its compiled SQL is kept from one submission to the next; nbgrader's ``Gradebook.close``
empties the engine's pool, so no connection outlives the file when the folder is emptied.

nbgrader checks each graded cell's metadata with ``jsonschema.validate``, which first
checks the schema itself against JSON Schema's metaschema, every call: about 0.2 CPU s a
submission. ``share_validators`` makes one validator per schema and raises the same
error (``best_match``) for a cell that does not fit.

A worker's private gradebook is scratch, thrown away with the worker and rebuilt from the
course's: ``scratch`` marks its URL, and its connections skip SQLite's durability
(``synchronous=OFF``, the rollback journal in memory). nbgrader commits after nearly every
grade it writes, about 60 times a submission, and each commit of a durable database
creates, syncs and deletes a journal file. The course's gradebook keeps SQLite's defaults.

Nothing a student controls reaches this: the URLs are the course's and the workers'
private gradebooks, and the schemas are nbgrader's. nbgrader has no setting for its
engine or its validator, so these wrap ``nbgrader.api.create_engine`` and the
``jsonschema`` that ``nbgrader.nbgraderformat.common`` calls, in this process; both are
idempotent.
"""

from __future__ import annotations

import functools
import json
import threading
import types
from collections import OrderedDict

from autograder.worker import limited_child

KEEP = 8  # engines kept (a process of the test suite grades many courses)
_ENGINES: OrderedDict = OrderedDict()
_LOCK = threading.Lock()
_SCRATCH: set[str] = set()  # URLs of gradebooks that are thrown away: no durability
SCRATCH_PRAGMAS = ("PRAGMA synchronous=OFF", "PRAGMA journal_mode=MEMORY")


def scratch(url: str) -> None:
    """Mark ``url`` a throwaway SQLite gradebook (a worker's private one)."""
    _SCRATCH.add(str(url))


def _without_durability(connection, _record) -> None:
    cursor = connection.cursor()
    for pragma in SCRATCH_PRAGMAS:
        cursor.execute(pragma)
    cursor.close()


def share_engines() -> None:
    import nbgrader.api as api

    quiet_autoflush_warnings()

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
            if str(url) in _SCRATCH and str(url).startswith("sqlite:"):
                from sqlalchemy import event

                event.listen(engine, "connect", _without_durability)
            while len(_ENGINES) > KEEP:
                _ENGINES.popitem(last=False)[1].dispose()
            return engine

    create_engine.shared = True
    api.create_engine = create_engine


def share_validators() -> None:
    import jsonschema
    import nbgrader.nbgraderformat.common as common

    if isinstance(common.jsonschema, types.SimpleNamespace):
        return

    @functools.lru_cache(maxsize=8)
    def validator(schema_text: str):
        schema = json.loads(schema_text)
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)  # once, as jsonschema.validate does on every call
        return cls(schema)

    def validate(instance, schema) -> None:
        error = jsonschema.exceptions.best_match(
            validator(json.dumps(schema, sort_keys=True)).iter_errors(instance)
        )
        if error is not None:
            raise error

    common.jsonschema = types.SimpleNamespace(validate=validate, shared=True)


def quiet_autoflush_warnings() -> None:
    """nbgrader's ``add_submission`` builds a submission's rows while SQLAlchemy autoflushes,
    which warns (SAWarning "... not in session, add operation along ... will not proceed")
    three times a submission; the rows are added a line later and committed. Only that
    warning is silenced, and only in grading processes."""
    import warnings

    from sqlalchemy.exc import SAWarning

    warnings.filterwarnings(
        "ignore",
        category=SAWarning,
        message=r"Object of type <Submitted\w+> not in session, add operation",
    )


def _in_forked_child() -> None:
    """In a child that ``limited_child`` forked: a fresh lock, and pools that forget the
    connections they hold for the worker (SQLAlchemy's way for a forked process: the child
    never uses, nor closes, a connection of its parent's)."""
    global _LOCK
    _LOCK = threading.Lock()
    for engine in _ENGINES.values():
        engine.dispose(close=False)


limited_child.in_child(_in_forked_child)
