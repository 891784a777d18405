"""Federated small-cell suppression between two Veil servers (issue 17; docs/federation.md).

Two sites hold the same table (e.g. patients) over the same public group domain. A grouped count on the
federation is answered with each site's own DP noisy counts, summed — but only for the cells whose noisy sum
reaches the federation's threshold k. Whether a cell reaches k is decided by the Type 1 secure comparison of
:mod:`mechanisms.secure` on the two sites' counts, so neither site learns the other's count of a suppressed
cell.

- :mod:`.link` — the authenticated peer link (shared-secret handshake, MAC'd frames).
- :mod:`.comparison` — many Type 1 comparisons run in lockstep over one link, and the key/randomness pools.
- :mod:`.exchange` — the two sites' halves of one federated query.
- :mod:`.peer` — the answering site's listener thread.
"""
