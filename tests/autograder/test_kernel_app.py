"""The grading kernels' stream (``autograder.sandbox.kernel_app.OutStream``), without a
kernel: a flush the IOPub thread is in the middle of is waited for, so that no output can
follow the idle status queued after it. (That an empty flush hands that thread nothing is
checked in a real kernel: test_bridge_kernels.)"""

from __future__ import annotations

import threading
import time

import pytest
import zmq
from ipykernel.iostream import IOPubThread
from jupyter_client.session import Session

from autograder.sandbox.kernel_app import OutStream


@pytest.fixture
def stream():
    context = zmq.Context()
    socket = context.socket(zmq.PUB)
    socket.bind("inproc://kernel-app-test")
    thread = IOPubThread(socket)
    thread.start()
    out = OutStream(Session(), thread, "stdout", watchfd=False)
    try:
        yield out, thread
    finally:
        thread.stop()
        thread.close()
        context.term()


def flush_in_background(out) -> threading.Thread:
    flushing = threading.Thread(target=out.flush, daemon=True)
    flushing.start()
    return flushing


def test_a_flush_waits_for_one_the_iopub_thread_is_in_the_middle_of(stream):
    """The IOPub thread's own flush (its timer's) is held after it took the buffers and
    before it queued their message: a flush then must wait for it, as ipykernel's does."""
    out, thread = stream
    took, release = threading.Event(), threading.Event()
    send = out.session.send

    def slow_send(*args, **kwargs):
        took.set()  # the buffers are taken, the message not yet queued
        release.wait(10)
        return send(*args, **kwargs)

    out.session.send = slow_send
    out.write("x")
    thread.schedule(out._flush)  # as the timer 0.2 s after a write does
    assert took.wait(10)
    flushing = flush_in_background(out)
    time.sleep(0.3)
    assert flushing.is_alive(), "the flush returned before the output was queued"
    release.set()
    flushing.join(10)
    assert not flushing.is_alive()
