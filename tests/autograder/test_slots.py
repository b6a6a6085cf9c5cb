"""A grading process's slot (its kernels' uids, its test-kernel template) is a lock in a
folder of the grading user's alone. Attack 19: a student with a shell account made
/tmp/course-grade-slots-0 first and held its locks, or left a dangling link in it, and
every submission of every later run was ``error``."""

import fcntl
import os
import shutil
from pathlib import Path

import pytest

from autograder.worker import worker


@pytest.fixture
def slots(tmp_path, monkeypatch):
    """The slot folder's places moved under tmp_path (no runtime folder of the user's)."""
    monkeypatch.setattr(worker, "ROOTS_SLOTS_DIR", tmp_path / "run" / "course-grade-slots")
    monkeypatch.setattr(worker, "SLOTS_DIR", tmp_path / "tmp" / "course-grade-slots")
    (tmp_path / "run").mkdir()
    (tmp_path / "tmp").mkdir(mode=0o1777)
    monkeypatch.setattr(worker, "_SLOTS", {})
    uid = os.geteuid()
    if uid == 0:
        return worker.ROOTS_SLOTS_DIR
    if worker._users_alone(Path(f"/run/user/{uid}"), uid):
        pytest.skip("this user's slots are in their runtime folder, which no one else can make")
    return Path(f"{worker.SLOTS_DIR}-{uid}")


def test_a_new_slot_folder_is_the_users_alone(slots):
    assert worker.slots_folder() == slots
    st = slots.lstat()
    assert st.st_uid == os.geteuid() and st.st_mode & 0o777 == 0o700


@pytest.mark.parametrize("made_by", ["someone_else", "a_link", "open_to_all"])
def test_a_slot_folder_someone_else_could_shape_is_refused_with_what_to_do(slots, made_by):
    if made_by == "someone_else":
        if os.geteuid() != 0:
            pytest.skip("only root can give a folder to someone else")
        slots.mkdir(mode=0o700)
        os.chown(slots, 65534, 65534)
    elif made_by == "a_link":
        target = slots.parent / "elsewhere"
        target.mkdir(mode=0o700)
        slots.symlink_to(target)
    else:
        slots.mkdir()
        slots.chmod(0o777)
    with pytest.raises(worker.SlotsUnusable, match="Nothing was graded. Remove it") as said:
        worker._slot(4000)
    assert str(slots) in str(said.value)
    if made_by == "a_link":
        assert list((slots.parent / "elsewhere").iterdir()) == []  # nothing made through it


def test_a_lock_that_cannot_be_opened_or_is_held_is_passed_over(slots):
    slots.mkdir(mode=0o700)
    (slots / "0.lock").symlink_to(slots / "nowhere")
    held = os.open(slots / "1.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(held, fcntl.LOCK_EX)
    try:
        assert worker._slot(4000)["index"] == 2
    finally:
        os.close(held)


@pytest.mark.skipif(os.geteuid() != 0, reason="the refusal of root's run: root's folder")
def test_course_grade_refuses_an_unusable_slot_folder_before_it_grades(slots, tmp_path):
    from autograder.coordinator.grade import InstructorError, check_ready

    slots.symlink_to(tmp_path)
    course = tmp_path / "course"
    shutil.copytree(Path(__file__).parents[2] / "source", course / "source")
    with pytest.raises(InstructorError, match="grading processes take their slots"):
        check_ready(course, "gpu_tensors", sandbox=True)
