"""Models: loading (load) and the one registry of encoder architectures (architectures)."""
