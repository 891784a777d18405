"""Table-driven SQL shape tests (issue 18): each accepted shape on DuckDB and PostgreSQL, with its price and an
accuracy check against the exact answer at a large ε; each refusal with its message."""
