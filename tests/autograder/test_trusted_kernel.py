"""A test kernel that cannot take a message has ended: that is a TrustedKernelProblem (the
test points are withheld, and the fate says why), never an exception that fails nbgrader's
autograde (`error`, graded again on every run). Attack 19 (a07, a10): both kernels were
killed at the wall-time limit, and zmq's `Again` from the test kernel's socket came back."""

import asyncio
import types

import pytest
import zmq
from jupyter_client.session import Session

from autograder.fates import Event, Kind
from autograder.worker import trusted_kernel


def _blocked(*args, **kwargs):
    raise zmq.Again()


class Unreachable:
    """A client whose kernel's sockets take nothing (a send would block)."""

    session = Session()
    shell_channel = types.SimpleNamespace(send=_blocked)
    input = staticmethod(_blocked)


def session(alive: bool) -> trusted_kernel.Session:
    kernel = types.SimpleNamespace(
        km=types.SimpleNamespace(events=[Event(Kind.WALL, limit=14)]),
        alive=lambda: alive,
    )
    return trusted_kernel.Session(kernel, Unreachable(), None, 5.0, None)


def test_a_dead_test_kernel_says_how_it_died():
    with pytest.raises(trusted_kernel.TrustedKernelProblem, match="died: killed after 14 s"):
        asyncio.run(session(alive=False).too_costly())


def test_a_living_test_kernel_that_takes_no_message_is_the_graders_problem():
    with pytest.raises(trusted_kernel.TrustedKernelProblem, match="took no message"):
        asyncio.run(session(alive=True).execute("1"))
