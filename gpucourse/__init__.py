"""What the course's lesson notebooks import: device choice, measurements, the race,
training, the input pipeline.

Modules: ``device`` (pick cuda or cpu; on Colab without a GPU, say how to get one),
``measure`` (``torch.utils.benchmark`` timings and the verdict computed from them),
``race`` (the copy-versus-compute race as arithmetic), ``race_widget`` (the race as an
ipywidgets widget, for ipywidgets 7.7.1 and 8.1), ``figures`` (SVG figures that read
without running code), ``training`` (a small network trained on synthetic spirals, reading
its loss every N steps, and what those reads cost), ``training_widget`` (that training,
live, as a widget), ``widget_access`` (accessible names for sliders), ``host_reads``
(which lines of a loop read a value on the host), ``memory`` (what the weights,
gradients and optimizer state take), ``checkpoints`` (state dicts in memory, and one
as a GPU saves it), ``image_batches`` (synthetic image batches made on the CPU, and what
each stage of feeding them to a device costs here), ``input_pipeline`` (the input
pipeline of load, copy and compute as arithmetic), ``pipeline_widget`` (its timeline
as a widget), ``trace_timeline`` (a profiler trace as lanes, steps, busy time and gaps),
``timeline_widget`` (that trace as a widget) and ``slow_images`` (a data set slow to load on
purpose, for the profiling lesson). Importing the package imports none of them, so it stays light.
"""

__version__ = "0.18.1"
