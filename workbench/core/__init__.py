"""The lowest floor: JSON (de)serialising (serial), option parsing (options), metrics with
units (metrics), timing discipline (latency), quiet library output (quiet), cache paths (home)."""
