"""The coordinator: course-grade's own process (trusted). It alone writes the course
folder and the gradebook; it sends each worker a Job and records the Result."""
