"""What the course's widgets share, in one vocabulary (the pure models stay apart, in
``race``, ``training`` and ``input_pipeline``; each widget only draws its model).

Every widget has:

- ``view``: the ipywidgets box that is shown;
- ``run``: the primary button (Run, or Train); it starts ``play()`` as a task on the
  kernel's running event loop, so the kernel stays free while the widget plays, and is
  disabled until the task ends; without a running loop (a script, a test) it calls
  ``play_now()``, which does the same at once, with no pauses;
- ``playing``: whether that task runs; a control moved meanwhile cancels it (``_cancel``);
- ``status``: the status line, an HTML widget with ``role="status"`` (screen readers read
  it out as it changes), and ``status_text``: its words;
- CSS classes ``<css>`` on the view and ``<css>-<part>`` on its parts, stable for browser
  tests and styling (``_name_parts``);
- a display bundle: the live widget, and for GitHub and nbviewer a static fallback
  (``_fallback_html``) that never answers a prediction, with a plain-text line
  (``_plain_text``).

Works on ipywidgets 8.1 (JupyterLab 4) and 7.7.1 (Colab): core widgets only.
"""

from __future__ import annotations

import asyncio
from html import escape


class LessonWidget:
    css = ""
    _task: asyncio.Task | None = None
    _status_text = ""

    # -- what tests and the notebook read ------------------------------------------------
    @property
    def status_text(self) -> str:
        return self._status_text

    @property
    def playing(self) -> bool:
        return self._task is not None and not self._task.done()

    # -- what each widget defines --------------------------------------------------------
    async def play(self) -> None:
        raise NotImplementedError

    def play_now(self) -> None:
        raise NotImplementedError

    def _fallback_html(self) -> str:
        raise NotImplementedError

    def _plain_text(self) -> str:
        raise NotImplementedError

    # -- shared behaviour ----------------------------------------------------------------
    def _on_run(self, _button=None) -> None:
        if self.playing:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.play_now()
            return
        self._started()  # at once, not when the task first runs
        self._task = loop.create_task(self.play())

    def _started(self) -> None:
        self.run.disabled = True

    def _cancel(self) -> None:
        if self.playing:
            self._task.cancel()  # play()'s finally gives the button back
        self._task = None
        self.run.disabled = False

    def _set_status(self, text: str) -> None:
        self._status_text = text
        self.status.value = f'<div role="status"><b>{escape(text)}</b></div>'

    def _name_parts(self, parts: dict) -> None:
        self.view.add_class(self.css)
        for part, widget in parts.items():
            widget.add_class(f"{self.css}-{part}")

    def _repr_mimebundle_(self, include=None, exclude=None):
        return {
            "text/plain": self._plain_text(),
            "text/html": self._fallback_html(),
            "application/vnd.jupyter.widget-view+json": {
                "version_major": 2,
                "version_minor": 0,
                "model_id": self.view.model_id,
            },
        }
