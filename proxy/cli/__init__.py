"""The `veil` command line: one module per command group; domain errors become one line at this edge."""
