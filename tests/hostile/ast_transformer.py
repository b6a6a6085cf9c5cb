"""An AST transformer that deletes every check(...) and assert from later cells."""
from tests.hostile._common import HONEST_SCORE, with_trick

STUDENT_ID = "trick-ast-transformer"
ANSWERS = with_trick('''
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
''')
# Where a test calls the function inside check(...) (size_mb, race_ticks, fewest_gpu_steps:
# 6 points), deleting the check deleted the call, so no answer was recorded for it.
EXPECTED_SCORE = HONEST_SCORE - 6
EXPECTED_FATE = "flagged"
EXPECTED_FLAG = "ast_transformers"
