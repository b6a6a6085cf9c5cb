"""When the tests call its functions, prints every string it can reach (callers' frames,
globals, the garbage collector's objects), hoping hidden-test source lands in its own
feedback."""

from tests.hostile._common import BASE, HONEST_SCORE

WEAKNESS = 8
STUDENT_ID = "trick-prints-all-it-can-find"
ANSWERS = {
    **BASE,
    "q3_fewest_gpu_steps": """
import gc, sys

def _dump():
    frame = sys._getframe(1)
    while frame is not None:
        print(frame.f_code.co_filename, repr(frame.f_locals)[:20000])
        frame = frame.f_back
    for obj in gc.get_objects():
        if isinstance(obj, str) and ("HIDDEN" in obj or "check_equal" in obj):
            print(obj[:20000])

def fewest_gpu_steps(numbers=256, cpu_per_tick=8, gpu_per_tick=256, copy_ticks=40):
    _dump()
    cpu_step = math.ceil(numbers / cpu_per_tick)
    gpu_step = math.ceil(numbers / gpu_per_tick)
    if gpu_step >= cpu_step:
        return None
    return 2 * copy_ticks // (cpu_step - gpu_step) + 1

_dump()
""",
}
# No hidden test source is anywhere it can look (asserted for every feedback page).
EXPECTED_SCORE = HONEST_SCORE
EXPECTED_FATE = "graded"
