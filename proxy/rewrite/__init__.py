"""Rewrite passes: sqlglot tree in, sqlglot tree out, no I/O. SQL is only ever built from nodes."""

from proxy.rewrite.reserved_words import quote_reserved_words

quote_reserved_words()  # before any SQL for PostgreSQL is written (reserved_words.py says why)
