"""The `forge` command line: everything headless."""
