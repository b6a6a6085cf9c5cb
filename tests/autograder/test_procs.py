"""A process tree as the grader walks it: the tree's own /proc files (``procs.descendant_pids``)
against psutil's scan of every process, and what each kill path sees."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil
import pytest

from autograder.sandbox import procs, watchdog

# A parent whose main thread forks a child that forks a grandchild, and whose second thread
# forks a child of its own (the kernel lists that one under the thread's task, not the
# main thread's); each writes its pid and sleeps.
TREE = r"""
import os, sys, threading, time

def spawn(depth):
    pid = os.fork()
    if pid == 0:
        if depth:
            spawn(depth - 1)
        os.write(1, f"{os.getpid()}\n".encode())  # one write: the lines never interleave
        time.sleep(60)
        os._exit(0)

def from_a_thread():
    spawn(0)
    time.sleep(60)  # a thread that ends hands its children to another thread

spawn(1)
threading.Thread(target=from_a_thread, daemon=True).start()
os.write(1, f"parent {os.getpid()}\n".encode())
time.sleep(60)
"""


@pytest.fixture
def tree():
    parent = subprocess.Popen(
        [sys.executable, "-c", TREE], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    lines = [parent.stdout.readline().split() for _ in range(4)]
    assert all(lines), parent.stderr.read() if parent.poll() is not None else lines
    pids = {int(line[-1]) for line in lines if line[0] != "parent"}
    try:
        yield parent, pids
    finally:
        watchdog.kill_tree(parent.pid)
        parent.wait()


needs_children_files = pytest.mark.skipif(
    procs.descendant_pids(1) is None, reason="this kernel has no /proc/<pid>/task/<tid>/children"
)


@needs_children_files
def test_the_walk_finds_every_descendant_psutil_finds(tree):
    parent, pids = tree
    walked = set(procs.descendant_pids(parent.pid))
    scanned = {p.pid for p in psutil.Process(parent.pid).children(recursive=True)}
    assert walked == scanned == pids and len(pids) == 3


@needs_children_files
def test_a_child_forked_by_another_thread_is_found(tree):
    parent, pids = tree
    with open(f"/proc/{parent.pid}/task/{parent.pid}/children") as f:
        under_main = {int(p) for p in f.read().split()}
    assert len(under_main) == 1  # the other child is listed under the second thread
    assert set(procs._walk(parent.pid)) == pids  # it reads every task's file


def test_without_children_files_psutil_scans(tree, monkeypatch):
    parent, pids = tree
    monkeypatch.setattr(procs, "_CHILDREN_FILES", False)
    assert procs.descendant_pids(parent.pid) is None
    assert {p.pid for p in watchdog.descendants(psutil.Process(parent.pid))} == pids


def test_kill_tree_ends_the_whole_tree(tree):
    parent, pids = tree
    watchdog.kill_tree(parent.pid)
    parent.wait(timeout=10)
    deadline = time.monotonic() + 10
    while any(procs.live_threads(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not any(procs.live_threads(pid) for pid in pids)


def test_a_root_whose_pid_is_another_process_now_has_no_descendants(tree):
    parent, _ = tree
    root = psutil.Process(parent.pid)
    watchdog.kill_tree(parent.pid)
    parent.wait(timeout=10)
    with pytest.raises(psutil.NoSuchProcess):
        watchdog.descendants(root)
