"""Materialize algorithms (k-anonymity, diversity, factorization), attack simulators and utility metrics."""
