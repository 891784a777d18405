"""PostgreSQL protocol 3.0 for Veil: message codecs, SCRAM-SHA-256, text encoding of values.

Pure code: no sockets, no asyncio, no SQL parsing, and no imports from the rest of ``proxy``.
The session feeds received bytes in and writes the returned bytes out.
"""
