"""Noise mechanisms: pure functions whose randomness is injected (a RandomSource)."""
