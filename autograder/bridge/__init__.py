"""The bridge between the student's kernel (untrusted) and the test kernel (trusted
code, hostile data): the protocol, plain data both sides encode and decode, and what runs
in each kernel."""
