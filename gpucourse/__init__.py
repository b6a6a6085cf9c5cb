"""What the course's lesson notebooks import: device choice, measurements, the race.

Modules: ``device`` (pick cuda or cpu; on Colab without a GPU, say how to get one),
``measure`` (``torch.utils.benchmark`` timings and the verdict computed from them),
``race`` (the copy-versus-compute race as arithmetic), ``race_widget`` (the race as an
ipywidgets widget, for ipywidgets 7.7.1 and 8.1) and ``figures`` (SVG figures that read
without running code). Importing the package imports none of them, so it stays light.
"""

__version__ = "0.1.0"
