"""Rewrite passes: sqlglot tree in, sqlglot tree out, no I/O. SQL is only ever built from nodes."""
