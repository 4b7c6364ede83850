"""Shared test helpers, imported as ``helpers.<module>`` (tests/ is on sys.path:
pytest puts the folder of the rootdir conftest, tests/, there)."""
