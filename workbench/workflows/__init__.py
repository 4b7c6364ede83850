"""Runs of several stages: the demo (demo) and the architecture coverage run (coverage)."""
