"""Reading the sqlglot tree: parsing, statement classification, query shapes and allow-list checks.
No I/O happens here."""
