"""Database engines behind one small interface: a dialect and ``execute``."""
