"""An AST transformer that deletes every check(...) and assert from later cells."""

from tests.hostile._common import HONEST_SCORE, with_trick

WEAKNESS = 2
STUDENT_ID = "trick-ast-transformer"
ANSWERS = with_trick("""
import ast as _ast

class _NoChecks(_ast.NodeTransformer):
    def visit_Expr(self, node):
        call = node.value
        if isinstance(call, _ast.Call) and getattr(call.func, "id", "").startswith("check"):
            return _ast.Pass()
        return node

    def visit_Assert(self, node):
        return _ast.Pass()

get_ipython().ast_transformers.append(_NoChecks())
""")
# The transformer only ever sees the student's own cells: the tests run elsewhere.
EXPECTED_SCORE = HONEST_SCORE
EXPECTED_FATE = "graded"
