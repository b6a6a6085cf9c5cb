"""What every widget of the course shares (``gpucourse.lesson_widget``): one vocabulary,
a status line screen readers read, Run that plays at once without a running loop, and a
display bundle with the live widget and its static fallback."""

from __future__ import annotations

import pytest

from gpucourse.lesson_widget import LessonWidget
from gpucourse.pipeline_widget import PipelineWidget
from gpucourse.race_widget import RaceWidget
from gpucourse.training_widget import TrainingWidget

WIDGETS = {
    "race": lambda: RaceWidget(),
    "pipeline": lambda: PipelineWidget(),
    "training": lambda: TrainingWidget(max_steps=20),
}


@pytest.mark.parametrize("name", WIDGETS)
def test_each_widget_speaks_the_shared_vocabulary(name):
    widget = WIDGETS[name]()
    assert isinstance(widget, LessonWidget) and widget.css == name
    assert 'role="status"' in widget.status.value and widget.status_text
    assert name in widget.view._dom_classes
    assert not widget.playing and not widget.run.disabled


@pytest.mark.parametrize("name", WIDGETS)
def test_run_without_a_running_loop_plays_at_once_and_changes_the_status(name):
    widget = WIDGETS[name]()
    before = widget.status_text
    widget.run.click()  # no running event loop here: play_now()
    assert not widget.playing and not widget.run.disabled
    assert widget.status_text != before


@pytest.mark.parametrize("name", WIDGETS)
def test_the_display_bundle_holds_the_live_widget_and_a_static_fallback(name):
    widget = WIDGETS[name]()
    bundle = widget._repr_mimebundle_()
    assert bundle["application/vnd.jupyter.widget-view+json"]["model_id"] == widget.view.model_id
    assert bundle["text/html"].strip() and bundle["text/plain"].startswith(type(widget).__name__)
