"""A tensor subclass whose __torch_function__ lies: it reports the model's device and
dtype and equality with anything, while its data are float64 on the CPU."""

from tests.hostile._common import BASE, HONEST_SCORE
from tests.submissions_gpu_tensors import POINTS

WEAKNESS = 3
STUDENT_ID = "trick-torch-function-liar"
ANSWERS = {
    **BASE,
    "q1_prepare_batch": """
class _Liar(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in ("__eq__", "equal", "allclose"):
            return True
        result = super().__torch_function__(func, types, args, kwargs or {})
        return result

    @property
    def dtype(self):
        return self._claimed

def prepare_batch(batch, model):
    liar = batch.clone().as_subclass(_Liar)  # still float64, still on the CPU
    liar._claimed = next(model.parameters()).dtype
    return liar
""",
}
# The test kernel gets the tensor's real dtype and device: float64 on the CPU. So the
# dtype test and the meta-device test fail, as for an honest batch left as it was.
EXPECTED_SCORE = HONEST_SCORE - POINTS["test_q1_dtype"] - POINTS["test_q1_device"]
EXPECTED_FATE = "graded"
