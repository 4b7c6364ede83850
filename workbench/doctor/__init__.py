"""The doctor: versions, ORTModule extensions, providers, accelerators (checks)."""
