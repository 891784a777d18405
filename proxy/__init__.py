"""Veil: a privacy-aware SQL proxy."""

__version__ = "0.1.0"
