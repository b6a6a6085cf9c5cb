"""A grading worker (trusted): one per local process or Dask thread. It runs nbgrader's
steps on one submission with two kernels, and writes only its own scratch folder."""
