"""Catalog introspection (psql ``\\d``, JDBC metadata, SQLAlchemy reflection) answered from a schema-only
shadow database, never from the dataset's rows: :mod:`proxy.catalog.shadow` builds and queries it,
:mod:`proxy.catalog.translate` turns PostgreSQL catalog SQL into SQL on it, :mod:`proxy.catalog.names`
tells catalog names apart for the classifier."""
