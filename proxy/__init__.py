"""Veil: a privacy-aware SQL proxy."""
