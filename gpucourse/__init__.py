"""What the course's lesson notebooks import: device choice, measurements, the race."""

__version__ = "0.1.0"
