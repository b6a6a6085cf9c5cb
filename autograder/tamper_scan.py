"""A static read of a submitted notebook for ways to tamper with grading.

Nothing here decides a grade: the clean room does that (``autograder.cleanroom``). This
names what a person should look at: code that reaches into IPython, rebinds builtins,
patches the comparison functions tests use, defines values that lie when compared,
walks frames or the garbage collector, names the grading files, uses the network, or a
notebook whose test cells or metadata were changed. Each flag says what and where, e.g.
``patches IPython's showtraceback (cell 'q1_answer')``.

Cells are parsed with Python's ``ast`` after IPython's own transforms (so ``%timeit``
becomes the ordinary call it is), not with regular expressions; strings are looked at
too, because ``getattr(get_ipython(), "showtraceback")`` needs no attribute syntax.
"""
from __future__ import annotations

import ast

from autograder.cleanroom import _nbgrader, _parse

IPYTHON_HOOKS = {
    "showtraceback", "_showtraceback", "showsyntaxerror", "_showsyntaxerror",
    "input_transformers_cleanup", "input_transformers_post", "input_transformer_manager",
    "ast_transformers", "run_cell", "run_cell_async", "_run_cell", "run_ast_nodes",
    "run_code", "transform_cell", "transform_ast", "set_custom_exc", "custom_exceptions",
    "CustomTB", "InteractiveTB", "SyntaxTB", "should_run_async", "user_ns_hidden",
    "displayhook", "display_pub", "excepthook", "register_post_execute",
}
EVENT_HOOKS = {"pre_run_cell", "post_run_cell", "pre_execute", "post_execute"}
# Builtins a test leans on: shadowing one in the notebook's namespace changes the tests.
TEST_BUILTINS = {
    "isinstance", "issubclass", "type", "abs", "round", "float", "int", "bool", "complex",
    "len", "all", "any", "repr", "str", "getattr", "hasattr", "callable", "id", "hash",
    "AssertionError", "Exception", "BaseException", "TypeError", "ValueError",
    "RuntimeError", "NotImplementedError", "exec", "eval", "compile", "__import__",
    "globals", "vars", "object", "setattr", "print", "range", "zip", "sorted", "iter",
    "next", "open",
}
LYING_DUNDERS = {
    "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__bool__", "__float__",
    "__int__", "__index__", "__round__", "__abs__", "__len__", "__hash__", "__complex__",
    "__instancecheck__", "__subclasscheck__", "__torch_function__", "__torch_dispatch__",
    "__array__", "__array_ufunc__", "__array_function__", "__getattribute__", "__class__",
}
VALUE_BASES = {"float", "int", "str", "bool", "complex", "tuple", "list", "dict", "type",
               "Tensor", "dtype", "device", "Size", "ndarray", "Parameter"}
FRAME_ATTRS = {"settrace", "setprofile", "_getframe", "f_back", "f_globals", "f_locals",
               "f_lineno", "f_trace", "tb_frame", "tb_next", "gi_frame", "cr_frame",
               "get_referrers", "get_referents", "get_objects", "_current_frames",
               "addaudithook"}
HIDDEN_EXITS = {("atexit", "register"): "registers an exit hook (atexit.register)",
                ("signal", "signal"): "installs a signal handler (signal.signal)",
                ("threading", "settrace"): "installs a trace function (threading.settrace)"}
# sys.<list or dict>.<method>(...) calls that change how code is imported or run.
SYS_MUTATORS = {"modules", "meta_path", "path_hooks", "path_importer_cache"}
MUTATING_METHODS = {"insert", "append", "extend", "pop", "update", "clear", "remove",
                    "setdefault", "__setitem__"}
RISKY_MODULES = {"ctypes": "loads ctypes (raw memory access)",
                 "socket": "uses the network (socket)", "urllib": "uses the network (urllib)",
                 "requests": "uses the network (requests)", "http": "uses the network (http)",
                 "ftplib": "uses the network (ftplib)", "smtplib": "uses the network (smtplib)",
                 "builtins": "imports builtins", "gc": "imports gc",
                 "inspect": "inspects frames (inspect)", "sqlite3": "opens databases (sqlite3)",
                 "nbgrader": "imports nbgrader", "IPython": "imports IPython's internals",
                 "ipykernel": "imports ipykernel's internals",
                 "marshal": "loads code objects (marshal)", "pickle": "unpickles data",
                 "dill": "unpickles data", "subprocess": "starts programs (subprocess)"}
GRADING_WORDS = ("gradebook", "source/", "/source", "autograded", "submitted/", "release/",
                 "nbgrader_config", ".db", "exchange")


def scan_notebook(submitted_nb, source_nb=None) -> list[str]:
    """Flags for one submitted notebook; ``source_nb`` adds the test-cell checks."""
    flags: list[str] = []
    for index, cell in enumerate(submitted_nb.cells):
        if cell.cell_type != "code":
            continue
        where = _nbgrader(cell).get("grade_id") or f"cell {index + 1}"
        for what in scan_code(cell.source):
            flags.append(f"{what} ({_quote(where)})")
    if source_nb is not None:
        flags.extend(compare_structure(submitted_nb, source_nb))
    return list(dict.fromkeys(flags))


def _quote(where: str) -> str:
    return where if where.startswith("cell ") else f"cell '{where}'"


def scan_code(source: str) -> list[str]:
    tree = _parse(source)
    if tree is None:
        return []
    finder = _Finder()
    finder.visit(tree)
    return list(dict.fromkeys(finder.found))


class _Finder(ast.NodeVisitor):
    def __init__(self):
        self.found: list[str] = []
        # local name -> the module (or IPython shell) it is bound to
        self.modules: dict[str, str] = {"get_ipython()": "get_ipython()"}
        self.depth = 0  # inside a function or class body

    def flag(self, what: str) -> None:
        self.found.append(what)

    # -- imports ---------------------------------------------------------------------
    def visit_Import(self, node):
        for alias in node.names:
            self.modules[(alias.asname or alias.name).split(".")[0]] = alias.name
            self._risky(alias.name)

    def visit_ImportFrom(self, node):
        module = node.module or ""
        self._risky(module)
        for alias in node.names:
            name = alias.asname or alias.name
            self.modules[name] = f"{module}.{alias.name}"
            if module == "builtins" or alias.name in IPYTHON_HOOKS:
                self.flag(f"imports {alias.name} from {module}")
            if self.depth == 0 and name in TEST_BUILTINS:
                self.flag(f"rebinds the builtin {name}")

    def _risky(self, module: str) -> None:
        top = module.split(".")[0]
        if top in RISKY_MODULES and module != "IPython.display":
            self.flag(RISKY_MODULES[top])

    # -- bindings ----------------------------------------------------------------------
    def visit_FunctionDef(self, node):
        self._binds(node.name)
        self._nested(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node):
        self._binds(node.name)
        bases = {_last_name(b) for b in node.bases} | {
            _last_name(k.value) for k in node.keywords if k.arg == "metaclass"}
        if bases & VALUE_BASES:
            self.flag(f"subclasses {sorted(bases & VALUE_BASES)[0]} in class {node.name}")
        overridden = sorted(
            {n.name for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
             and n.name in LYING_DUNDERS}
            | {t.id for n in node.body if isinstance(n, ast.Assign) for t in n.targets
               if isinstance(t, ast.Name) and t.id in LYING_DUNDERS})
        if overridden:
            self.flag(f"defines {', '.join(overridden)} in class {node.name} "
                      "(values that may lie when compared)")
        self._nested(node)

    def _nested(self, node):
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    def _binds(self, name: str) -> None:
        if self.depth == 0 and name in TEST_BUILTINS:
            self.flag(f"rebinds the builtin {name}")

    def visit_Name(self, node):
        if isinstance(node.ctx, ast.Store):
            self._binds(node.id)
        if node.id == "__builtins__":
            self.flag("reaches __builtins__")

    def visit_Assign(self, node):
        # A constant is configuration (torch.backends.cudnn.benchmark = True); a function,
        # a name or a lambda put in a module's place is a patch.
        if not isinstance(node.value, ast.Constant):
            for target in node.targets:
                self._assigned(target)
        if isinstance(node.value, ast.Call) and _last_name(node.value.func) == "get_ipython":
            for target in node.targets:
                if isinstance(target, ast.Name):
                    self.modules[target.id] = "get_ipython()"
        self.generic_visit(node)

    def visit_AugAssign(self, node):
        self._assigned(node.target)
        self.generic_visit(node)

    def visit_Delete(self, node):
        for target in node.targets:
            self._assigned(target)
        self.generic_visit(node)

    def _assigned(self, target) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                self._assigned(elt)
            return
        if isinstance(target, ast.Subscript):
            target = target.value
        if not isinstance(target, ast.Attribute):
            return
        chain = _chain(target)
        root = self.modules.get(chain[0])
        if root is not None:
            self.flag(f"patches {'.'.join([root] + chain[1:])}")
        elif chain[-1] in IPYTHON_HOOKS or chain[-1] in FRAME_ATTRS:
            self.flag(f"overwrites {chain[-1]}")

    # -- uses ------------------------------------------------------------------------
    def visit_Attribute(self, node):
        chain = _chain(node)
        name = node.attr
        if name in IPYTHON_HOOKS:
            self.flag(f"reaches IPython's {name}")
        elif name == "register" and len(chain) >= 2 and chain[-2] == "events":
            self.flag("registers an IPython event hook (events.register)")
        elif name in FRAME_ATTRS:
            self.flag(f"walks frames or interpreter objects ({name})")
        module = self.modules.get(chain[0], chain[0]).split(".")[0]
        if len(chain) >= 2 and (module, chain[1]) in HIDDEN_EXITS:
            self.flag(HIDDEN_EXITS[(module, chain[1])])
        if module == "os" and len(chain) >= 2 and chain[1] in ("dup2", "close", "closerange"):
            self.flag(f"closes or redirects file descriptors (os.{chain[1]})")
        self.generic_visit(node)

    def visit_Call(self, node):
        func = _last_name(node.func)
        if func in ("exec", "eval", "compile", "__import__"):
            self.flag(f"runs dynamically built code ({func})")
        chain = _chain(node.func) if isinstance(node.func, ast.Attribute) else []
        if (len(chain) == 3 and self.modules.get(chain[0]) == "sys"
                and chain[1] in SYS_MUTATORS and chain[2] in MUTATING_METHODS):
            self.flag(f"edits sys.{chain[1]}")
        if func in ("setattr", "delattr") and node.args:
            chain = _chain(node.args[0])
            root = self.modules.get(chain[0]) if chain else None
            if root is not None:
                self.flag(f"patches {'.'.join([root] + chain[1:])} ({func})")
        self.generic_visit(node)

    def visit_Constant(self, node):
        if isinstance(node.value, str):
            text = node.value
            hooks = sorted(w for w in IPYTHON_HOOKS | EVENT_HOOKS | FRAME_ATTRS
                           if w in text and len(w) > 6)
            if hooks:
                self.flag(f"names IPython or interpreter internals in a string ({hooks[0]})")
            words = [w for w in GRADING_WORDS if w in text.lower()]
            if words:
                self.flag(f"names grading files ({text[:60]!r})")


def compare_structure(submitted_nb, source_nb) -> list[str]:
    """Flags for test cells deleted, duplicated, edited or re-labelled, and kernel swaps."""
    flags = []
    tests = {}
    for cell in source_nb.cells:
        meta = _nbgrader(cell)
        if meta.get("grade") and not meta.get("solution") and meta.get("grade_id"):
            tests[meta["grade_id"]] = (cell, meta)
    seen: dict[str, int] = {}
    for cell in submitted_nb.cells:
        meta = _nbgrader(cell)
        grade_id = meta.get("grade_id")
        if grade_id not in tests:
            continue
        seen[grade_id] = seen.get(grade_id, 0) + 1
        original, original_meta = tests[grade_id]
        if _strip(cell.source) != _strip(_release_source(original.source)):
            flags.append(f"edits test cell '{grade_id}'")
        for key in ("grade", "solution", "points", "locked"):
            if meta.get(key) != original_meta.get(key):
                flags.append(f"changes the metadata of test cell '{grade_id}' ({key})")
                break
        if cell.cell_type != original.cell_type:
            flags.append(f"changes the type of test cell '{grade_id}'")
    for grade_id in tests:
        if seen.get(grade_id, 0) == 0:
            flags.append(f"deletes test cell '{grade_id}'")
        elif seen[grade_id] > 1:
            flags.append(f"duplicates test cell '{grade_id}'")
    kernel = lambda nb: (nb.metadata.get("kernelspec", {}) or {}).get("language")  # noqa: E731
    language = lambda nb: (nb.metadata.get("language_info", {}) or {}).get("name")  # noqa: E731
    if kernel(submitted_nb) not in (None, kernel(source_nb)) or \
            language(submitted_nb) not in (None, language(source_nb)):
        flags.append("changes the notebook's kernel or language")
    return flags


def _release_source(source: str) -> str:
    """A test cell as the student received it: hidden tests removed."""
    lines, hidden = [], False
    for line in source.splitlines():
        if "BEGIN HIDDEN TESTS" in line:
            hidden = True
        elif "END HIDDEN TESTS" in line:
            hidden = False
        elif not hidden:
            lines.append(line)
    return "\n".join(lines)


def _strip(source: str) -> str:
    return "\n".join(line.rstrip() for line in source.strip().splitlines())


def _chain(node) -> list[str]:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Call):
        parts.append(f"{_last_name(node.func)}()")
    elif isinstance(node, ast.Name):
        parts.append(node.id)
    else:
        parts.append("?")
    return parts[::-1]


def _last_name(node) -> str:
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return ""
