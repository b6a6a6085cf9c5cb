"""Accessible names for ipywidgets sliders, on ipywidgets 7.7.1 (Colab) and 8.

ipywidgets draws a slider's handle (``role="slider"`` in 8, a bare ``<span>`` in 7) with
no accessible name, even with a description, and has no trait to set one. ``slider_namer``
returns a hidden Output widget that carries a short script: it names the handle of every
slider with the CSS class ``gpucourse-slider`` after that slider's label, and gives the
7.x handle its role. It runs wherever the front end runs trusted outputs (JupyterLab,
Notebook, Colab); where it does not, the sliders work as before, without the name.
"""

from __future__ import annotations

import ipywidgets as widgets

SLIDER_CLASS = "gpucourse-slider"

# Re-runs whenever the page changes: the front end may draw a slider after this runs, and
# ipywidgets adds a view's classes (gpucourse-slider) only once the view is displayed, an
# attribute change after the nodes are in the page (childList alone missed it 1 run in 4).
NAME_SLIDERS_JS = """
(function () {
  function nameSliders() {
    document.querySelectorAll('.gpucourse-slider').forEach(function (box) {
      var label = box.querySelector('.widget-label');
      var name = label && label.textContent.trim();
      var handle = box.querySelector('[role="slider"], .ui-slider-handle');
      if (!name || !handle) { return; }
      if (handle.getAttribute('aria-label') !== name) { handle.setAttribute('aria-label', name); }
      if (handle.getAttribute('role') !== 'slider') { handle.setAttribute('role', 'slider'); }
    });
  }
  if (!window.gpucourseNameAllSliders) {
    window.gpucourseNameAllSliders = nameSliders;
    new MutationObserver(nameSliders).observe(document.body, {
      childList: true, subtree: true, attributes: true, attributeFilter: ['class']
    });
  }
  nameSliders();
})();
"""


def named(slider: widgets.Widget) -> widgets.Widget:
    """Mark ``slider`` to be named after its label; returns it."""
    slider.add_class(SLIDER_CLASS)
    return slider


def slider_namer() -> widgets.Output:
    """A hidden Output to put in the widget's box: it carries the naming script."""
    output = widgets.Output(layout=widgets.Layout(display="none"))
    output.outputs = (
        {
            "output_type": "display_data",
            "metadata": {},
            "data": {"application/javascript": NAME_SLIDERS_JS},
        },
    )
    return output
