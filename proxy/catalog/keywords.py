"""PostgreSQL 15's keywords, as ``pg_get_keywords()`` lists them: clients complete and quote names with them
(pgcli, DBeaver). Generated once from PostgreSQL 15.19's ``SELECT word, catcode, barelabel FROM
pg_get_keywords()``; nothing is read at run time."""

from __future__ import annotations

from typing import Final


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


UNRESERVED_BARE: Final = _words(
    """
    abort absolute access action add admin after aggregate also alter always asensitive assertion
    assignment at atomic attach attribute backward before begin breadth by cache call called cascade
    cascaded catalog chain characteristics checkpoint class close cluster columns comment comments
    commit committed compression configuration conflict connection constraints content continue
    conversion copy cost csv cube current cursor cycle data database deallocate declare defaults
    deferred definer delete delimiter delimiters depends depth detach dictionary disable discard
    document domain double drop each enable encoding encrypted enum escape event exclude excluding
    exclusive execute explain expression extension external family finalize first following force
    forward function functions generated global granted groups handler header hold identity if
    immediate immutable implicit import include including increment index indexes inherit inherits
    inline input insensitive insert instead invoker isolation key label language large last
    leakproof level listen load local location lock locked logged mapping match matched materialized
    maxvalue merge method minvalue mode move name names new next nfc nfd nfkc nfkd no normalized
    nothing notify nowait nulls object of off oids old operator option options ordinality others
    overriding owned owner parallel parameter parser partial partition passing password plans policy
    preceding prepare prepared preserve prior privileges procedural procedure procedures program
    publication quote range read reassign recheck recursive ref referencing refresh reindex relative
    release rename repeatable replace replica reset restart restrict return returns revoke role
    rollback rollup routine routines rows rule savepoint schema schemas scroll search security
    sequence sequences serializable server session set sets share show simple skip snapshot sql
    stable standalone start statement statistics stdin stdout storage stored strict strip
    subscription support sysid system tables tablespace temp template temporary text ties
    transaction transform trigger truncate trusted type types uescape unbounded uncommitted
    unencrypted unknown unlisten unlogged until update vacuum valid validate validator value version
    view views volatile whitespace work wrapper write xml yes zone
"""
)

UNRESERVED_NOT_BARE: Final = _words(
    """
    day filter hour minute month over second varying within without year
"""
)

COLUMN_NAME_BARE: Final = _words(
    """
    between bigint bit boolean coalesce dec decimal exists extract float greatest grouping inout int
    integer interval least national nchar none normalize nullif numeric out overlay position real
    row setof smallint substring time timestamp treat trim values varchar xmlattributes xmlconcat
    xmlelement xmlexists xmlforest xmlnamespaces xmlparse xmlpi xmlroot xmlserialize xmltable
"""
)

COLUMN_NAME_NOT_BARE: Final = _words(
    """
    char character precision
"""
)

TYPE_FUNC_NAME_BARE: Final = _words(
    """
    authorization binary collation concurrently cross current_schema freeze full ilike inner is join
    left like natural outer right similar tablesample verbose
"""
)

TYPE_FUNC_NAME_NOT_BARE: Final = _words(
    """
    isnull notnull overlaps
"""
)

RESERVED_BARE: Final = _words(
    """
    all analyse analyze and any asc asymmetric both case cast check collate column constraint
    current_catalog current_date current_role current_time current_timestamp current_user default
    deferrable desc distinct do else end false foreign in initially lateral leading localtime
    localtimestamp not null only or placing primary references select session_user some symmetric
    table then trailing true unique user using variadic when
"""
)

RESERVED_NOT_BARE: Final = _words(
    """
    array as create except fetch for from grant group having intersect into limit offset on order
    returning to union where window with
"""
)

CATEGORIES: Final = (
    ("U", "unreserved", UNRESERVED_BARE, UNRESERVED_NOT_BARE),
    ("C", "unreserved (cannot be function or type name)", COLUMN_NAME_BARE, COLUMN_NAME_NOT_BARE),
    ("T", "reserved (can be function or type name)", TYPE_FUNC_NAME_BARE, TYPE_FUNC_NAME_NOT_BARE),
    ("R", "reserved", RESERVED_BARE, RESERVED_NOT_BARE),
)


def keyword_rows() -> list[tuple[str, str, bool, str, str]]:
    """(word, catcode, barelabel, catdesc, baredesc) for every keyword, sorted by word."""
    rows = [
        (word, code, bare, description, "can be bare label" if bare else "requires AS")
        for code, description, bare_words, other_words in CATEGORIES
        for words, bare in ((bare_words, True), (other_words, False))
        for word in words
    ]
    return sorted(rows)
