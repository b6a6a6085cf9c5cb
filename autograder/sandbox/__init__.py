"""What confines the kernels: bubblewrap's arguments, the kernel managers and their
watchdog, control groups, the code a sandboxed process starts with, the relay between a
student's kernel and the grader, and reading files a kernel may have shaped."""
