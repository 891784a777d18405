"""The exact catalog statements real clients send, answered by the shadow database.

Captured from the clients themselves: psql 15 with ``psql -E`` (``\\dt``, ``\\dt+``, ``\\d visits``, ``\\d+
visits``, ``\\dn``, ``\\l``, ``\\df``), pgjdbc 42.5 (``DatabaseMetaData.getTables/getColumns/getSchemas``),
SQLAlchemy 2 (``inspect(engine).get_table_names()/get_columns()``, parameters bound as psycopg binds them),
psycopg 3 and 2 (type lookups), asyncpg (type introspection) and pgcli — see ``../shared/clients.md``.
"""

from __future__ import annotations

from typing import Any

import pytest
from asyncpg import introspection

from proxy.analysis.parse import parse_statements
from proxy.catalog.comments import table_comment
from proxy.catalog.shadow import ShadowCatalog
from proxy.errors import UnsupportedQueryError
from proxy.release.apply import ReleasedTable
from proxy.rewrite.session_info import SessionInfo
from tests.unit.proxy.policy_fixture import clinic_policy

INFO = SessionInfo(version="PostgreSQL 16.0 (Veil test)", user="alice", database="clinic")
TABLES = sorted(clinic_policy().tables)
VISITS = list(clinic_policy().tables["visits"].columns)
SETTINGS = {"server_version_num": "160000", "application_name": "pytest"}

PSQL_LIST_TABLES = """\
SELECT n.nspname as "Schema",
  c.relname as "Name",
  CASE c.relkind WHEN 'r' THEN 'table' WHEN 'v' THEN 'view' WHEN 'm' THEN 'materialized view' WHEN 'i' THEN 'index' WHEN 'S' THEN 'sequence' WHEN 't' THEN 'TOAST table' WHEN 'f' THEN 'foreign table' WHEN 'p' THEN 'partitioned table' WHEN 'I' THEN 'partitioned index' END as "Type",
  pg_catalog.pg_get_userbyid(c.relowner) as "Owner"
FROM pg_catalog.pg_class c
     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
     LEFT JOIN pg_catalog.pg_am am ON am.oid = c.relam
WHERE c.relkind IN ('r','p','')
      AND n.nspname <> 'pg_catalog'
      AND n.nspname !~ '^pg_toast'
      AND n.nspname <> 'information_schema'
  AND pg_catalog.pg_table_is_visible(c.oid)
ORDER BY 1,2;
"""
PSQL_LIST_TABLES_PLUS = """\
SELECT n.nspname as "Schema",
  c.relname as "Name",
  CASE c.relkind WHEN 'r' THEN 'table' WHEN 'v' THEN 'view' WHEN 'm' THEN 'materialized view' WHEN 'i' THEN 'index' WHEN 'S' THEN 'sequence' WHEN 't' THEN 'TOAST table' WHEN 'f' THEN 'foreign table' WHEN 'p' THEN 'partitioned table' WHEN 'I' THEN 'partitioned index' END as "Type",
  pg_catalog.pg_get_userbyid(c.relowner) as "Owner",
  CASE c.relpersistence WHEN 'p' THEN 'permanent' WHEN 't' THEN 'temporary' WHEN 'u' THEN 'unlogged' END as "Persistence",
  am.amname as "Access method",
  pg_catalog.pg_size_pretty(pg_catalog.pg_table_size(c.oid)) as "Size",
  pg_catalog.obj_description(c.oid, 'pg_class') as "Description"
FROM pg_catalog.pg_class c
     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
     LEFT JOIN pg_catalog.pg_am am ON am.oid = c.relam
WHERE c.relkind IN ('r','p','')
      AND n.nspname <> 'pg_catalog'
      AND n.nspname !~ '^pg_toast'
      AND n.nspname <> 'information_schema'
  AND pg_catalog.pg_table_is_visible(c.oid)
ORDER BY 1,2;
"""
PSQL_FIND_TABLE = """\
SELECT c.oid,
  n.nspname,
  c.relname
FROM pg_catalog.pg_class c
     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.relname OPERATOR(pg_catalog.~) '^({name})$' COLLATE pg_catalog.default
  AND pg_catalog.pg_table_is_visible(c.oid)
ORDER BY 2, 3;
"""
PSQL_TABLE_INFO = """\
SELECT c.relchecks, c.relkind, c.relhasindex, c.relhasrules, c.relhastriggers, c.relrowsecurity, c.relforcerowsecurity, false AS relhasoids, c.relispartition, '', c.reltablespace, CASE WHEN c.reloftype = 0 THEN '' ELSE c.reloftype::pg_catalog.regtype::pg_catalog.text END, c.relpersistence, c.relreplident, am.amname
FROM pg_catalog.pg_class c
 LEFT JOIN pg_catalog.pg_class tc ON (c.reltoastrelid = tc.oid)
LEFT JOIN pg_catalog.pg_am am ON (c.relam = am.oid)
WHERE c.oid = '{oid}';
"""
PSQL_COLUMNS_PLUS = """\
SELECT a.attname,
  pg_catalog.format_type(a.atttypid, a.atttypmod),
  (SELECT pg_catalog.pg_get_expr(d.adbin, d.adrelid, true)
   FROM pg_catalog.pg_attrdef d
   WHERE d.adrelid = a.attrelid AND d.adnum = a.attnum AND a.atthasdef),
  a.attnotnull,
  (SELECT c.collname FROM pg_catalog.pg_collation c, pg_catalog.pg_type t
   WHERE c.oid = a.attcollation AND t.oid = a.atttypid AND a.attcollation <> t.typcollation) AS attcollation,
  a.attidentity,
  a.attgenerated,
  a.attstorage,
  a.attcompression AS attcompression,
  CASE WHEN a.attstattarget=-1 THEN NULL ELSE a.attstattarget END AS attstattarget,
  pg_catalog.col_description(a.attrelid, a.attnum)
FROM pg_catalog.pg_attribute a
WHERE a.attrelid = '{oid}' AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum;
"""
PSQL_POLICIES = """\
SELECT pol.polname, pol.polpermissive,
  CASE WHEN pol.polroles = '{{0}}' THEN NULL ELSE pg_catalog.array_to_string(array(select rolname from pg_catalog.pg_roles where oid = any (pol.polroles) order by 1),',') END,
  pg_catalog.pg_get_expr(pol.polqual, pol.polrelid),
  pg_catalog.pg_get_expr(pol.polwithcheck, pol.polrelid),
  CASE pol.polcmd
    WHEN 'r' THEN 'SELECT'
    WHEN 'a' THEN 'INSERT'
    WHEN 'w' THEN 'UPDATE'
    WHEN 'd' THEN 'DELETE'
    END AS cmd
FROM pg_catalog.pg_policy pol
WHERE pol.polrelid = '{oid}' ORDER BY 1;
"""
PSQL_STATISTICS = """\
SELECT oid, stxrelid::pg_catalog.regclass, stxnamespace::pg_catalog.regnamespace::pg_catalog.text AS nsp, stxname,
pg_catalog.pg_get_statisticsobjdef_columns(oid) AS columns,
  'd' = any(stxkind) AS ndist_enabled,
  'f' = any(stxkind) AS deps_enabled,
  'm' = any(stxkind) AS mcv_enabled,
stxstattarget
FROM pg_catalog.pg_statistic_ext
WHERE stxrelid = '{oid}'
ORDER BY nsp, stxname;
"""
PSQL_PUBLICATIONS = """\
SELECT pubname
     , NULL
     , NULL
FROM pg_catalog.pg_publication p
     JOIN pg_catalog.pg_publication_namespace pn ON p.oid = pn.pnpubid
     JOIN pg_catalog.pg_class pc ON pc.relnamespace = pn.pnnspid
WHERE pc.oid ='{oid}' and pg_catalog.pg_relation_is_publishable('{oid}')
UNION
SELECT pubname
     , pg_get_expr(pr.prqual, c.oid)
     , (CASE WHEN pr.prattrs IS NOT NULL THEN
         (SELECT string_agg(attname, ', ')
           FROM pg_catalog.generate_series(0, pg_catalog.array_upper(pr.prattrs::pg_catalog.int2[], 1)) s,
                pg_catalog.pg_attribute
          WHERE attrelid = pr.prrelid AND attnum = prattrs[s])
        ELSE NULL END) FROM pg_catalog.pg_publication p
     JOIN pg_catalog.pg_publication_rel pr ON p.oid = pr.prpubid
     JOIN pg_catalog.pg_class c ON c.oid = pr.prrelid
WHERE pr.prrelid = '{oid}'
UNION
SELECT pubname
     , NULL
     , NULL
FROM pg_catalog.pg_publication p
WHERE p.puballtables AND pg_catalog.pg_relation_is_publishable('{oid}')
ORDER BY 1;
"""
PSQL_PARENTS = """\
SELECT c.oid::pg_catalog.regclass
FROM pg_catalog.pg_class c, pg_catalog.pg_inherits i
WHERE c.oid = i.inhparent AND i.inhrelid = '{oid}'
  AND c.relkind != 'p' AND c.relkind != 'I'
ORDER BY inhseqno;
"""
PSQL_PARTITIONS = """\
SELECT c.oid::pg_catalog.regclass, c.relkind, inhdetachpending, pg_catalog.pg_get_expr(c.relpartbound, c.oid)
FROM pg_catalog.pg_class c, pg_catalog.pg_inherits i
WHERE c.oid = i.inhrelid AND i.inhparent = '{oid}'
ORDER BY pg_catalog.pg_get_expr(c.relpartbound, c.oid) = 'DEFAULT', c.oid::pg_catalog.regclass::pg_catalog.text;
"""
PSQL_SCHEMAS = """\
SELECT n.nspname AS "Name",
  pg_catalog.pg_get_userbyid(n.nspowner) AS "Owner"
FROM pg_catalog.pg_namespace n
WHERE n.nspname !~ '^pg_' AND n.nspname <> 'information_schema'
ORDER BY 1;
"""
PSQL_DATABASES = """\
SELECT d.datname as "Name",
       pg_catalog.pg_get_userbyid(d.datdba) as "Owner",
       pg_catalog.pg_encoding_to_char(d.encoding) as "Encoding",
       d.datcollate as "Collate",
       d.datctype as "Ctype",
       d.daticulocale as "ICU Locale",
       CASE d.datlocprovider WHEN 'c' THEN 'libc' WHEN 'i' THEN 'icu' END AS "Locale Provider",
       pg_catalog.array_to_string(d.datacl, E'\n') AS "Access privileges"
FROM pg_catalog.pg_database d
ORDER BY 1;
"""
PSQL_FUNCTIONS = """\
SELECT n.nspname as "Schema",
  p.proname as "Name",
  pg_catalog.pg_get_function_result(p.oid) as "Result data type",
  pg_catalog.pg_get_function_arguments(p.oid) as "Argument data types",
 CASE p.prokind
  WHEN 'a' THEN 'agg'
  WHEN 'w' THEN 'window'
  WHEN 'p' THEN 'proc'
  ELSE 'func'
 END as "Type"
FROM pg_catalog.pg_proc p
     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
WHERE pg_catalog.pg_function_is_visible(p.oid)
      AND n.nspname <> 'pg_catalog'
      AND n.nspname <> 'information_schema'
ORDER BY 1, 2, 4;
"""
JDBC_GET_TABLES = """\
SELECT NULL AS TABLE_CAT, n.nspname AS TABLE_SCHEM, c.relname AS TABLE_NAME,  CASE n.nspname ~ '^pg_' OR n.nspname = 'information_schema'  WHEN true THEN CASE  WHEN n.nspname = 'pg_catalog' OR n.nspname = 'information_schema' THEN CASE c.relkind   WHEN 'r' THEN 'SYSTEM TABLE'   WHEN 'v' THEN 'SYSTEM VIEW'   WHEN 'i' THEN 'SYSTEM INDEX'   ELSE NULL   END  WHEN n.nspname = 'pg_toast' THEN CASE c.relkind   WHEN 'r' THEN 'SYSTEM TOAST TABLE'   WHEN 'i' THEN 'SYSTEM TOAST INDEX'   ELSE NULL   END  ELSE CASE c.relkind   WHEN 'r' THEN 'TEMPORARY TABLE'   WHEN 'p' THEN 'TEMPORARY TABLE'   WHEN 'i' THEN 'TEMPORARY INDEX'   WHEN 'S' THEN 'TEMPORARY SEQUENCE'   WHEN 'v' THEN 'TEMPORARY VIEW'   ELSE NULL   END  END  WHEN false THEN CASE c.relkind  WHEN 'r' THEN 'TABLE'  WHEN 'p' THEN 'PARTITIONED TABLE'  WHEN 'i' THEN 'INDEX'  WHEN 'P' then 'PARTITIONED INDEX'  WHEN 'S' THEN 'SEQUENCE'  WHEN 'v' THEN 'VIEW'  WHEN 'c' THEN 'TYPE'  WHEN 'f' THEN 'FOREIGN TABLE'  WHEN 'm' THEN 'MATERIALIZED VIEW'  ELSE NULL  END  ELSE NULL  END  AS TABLE_TYPE, d.description AS REMARKS,  '' as TYPE_CAT, '' as TYPE_SCHEM, '' as TYPE_NAME, '' AS SELF_REFERENCING_COL_NAME, '' AS REF_GENERATION  FROM pg_catalog.pg_namespace n, pg_catalog.pg_class c  LEFT JOIN pg_catalog.pg_description d ON (c.oid = d.objoid AND d.objsubid = 0  and d.classoid = 'pg_class'::regclass)  WHERE c.relnamespace = n.oid  AND c.relname LIKE '%' AND (false  OR ( c.relkind = 'r' AND n.nspname !~ '^pg_' AND n.nspname <> 'information_schema' ) )  ORDER BY TABLE_TYPE,TABLE_SCHEM,TABLE_NAME
"""
JDBC_GET_COLUMNS = """\
SELECT * FROM (SELECT n.nspname,c.relname,a.attname,a.atttypid,a.attnotnull OR (t.typtype = 'd' AND t.typnotnull) AS attnotnull,a.atttypmod,a.attlen,t.typtypmod,row_number() OVER (PARTITION BY a.attrelid ORDER BY a.attnum) AS attnum, nullif(a.attidentity, '') as attidentity,nullif(a.attgenerated, '') as attgenerated,pg_catalog.pg_get_expr(def.adbin, def.adrelid) AS adsrc,dsc.description,t.typbasetype,t.typtype  FROM pg_catalog.pg_namespace n  JOIN pg_catalog.pg_class c ON (c.relnamespace = n.oid)  JOIN pg_catalog.pg_attribute a ON (a.attrelid=c.oid)  JOIN pg_catalog.pg_type t ON (a.atttypid = t.oid)  LEFT JOIN pg_catalog.pg_attrdef def ON (a.attrelid=def.adrelid AND a.attnum = def.adnum)  LEFT JOIN pg_catalog.pg_description dsc ON (c.oid=dsc.objoid AND a.attnum = dsc.objsubid)  LEFT JOIN pg_catalog.pg_class dc ON (dc.oid=dsc.classoid AND dc.relname='pg_class')  LEFT JOIN pg_catalog.pg_namespace dn ON (dc.relnamespace=dn.oid AND dn.nspname='pg_catalog')  WHERE c.relkind in ('r','p','v','f','m') and a.attnum > 0 AND NOT a.attisdropped  AND c.relname LIKE 'visits') c WHERE true  AND attname LIKE '%' ORDER BY nspname,c.relname,attnum
"""
JDBC_GET_SCHEMAS = """\
SELECT nspname AS TABLE_SCHEM, NULL AS TABLE_CATALOG FROM pg_catalog.pg_namespace  WHERE nspname <> 'pg_toast' \
AND (nspname !~ '^pg_temp_'  OR nspname = (pg_catalog.current_schemas(true))[1]) AND (nspname !~ '^pg_toast_temp_'  \
OR nspname = replace((pg_catalog.current_schemas(true))[1], 'pg_temp_', 'pg_toast_temp_'))  ORDER BY TABLE_SCHEM
"""
SQLALCHEMY_TABLE_NAMES = """\
SELECT pg_catalog.pg_class.relname
FROM pg_catalog.pg_class JOIN pg_catalog.pg_namespace ON pg_catalog.pg_namespace.oid = pg_catalog.pg_class.relnamespace
WHERE pg_catalog.pg_class.relkind = ANY (ARRAY['r'::VARCHAR, 'p'::VARCHAR]) AND pg_catalog.pg_class.relpersistence \
!= 't'::VARCHAR AND pg_catalog.pg_table_is_visible(pg_catalog.pg_class.oid) AND pg_catalog.pg_namespace.nspname \
!= 'pg_catalog'::VARCHAR
"""
SQLALCHEMY_COLUMNS = """\
SELECT pg_catalog.pg_attribute.attname AS name, pg_catalog.format_type(pg_catalog.pg_attribute.atttypid, \
pg_catalog.pg_attribute.atttypmod) AS format_type, CASE WHEN pg_catalog.pg_attribute.atthasdef THEN (SELECT \
pg_catalog.pg_get_expr(pg_catalog.pg_attrdef.adbin, pg_catalog.pg_attrdef.adrelid) AS pg_get_expr_1
FROM pg_catalog.pg_attrdef
WHERE pg_catalog.pg_attribute.atthasdef AND pg_catalog.pg_attrdef.adrelid = pg_catalog.pg_attribute.attrelid AND \
pg_catalog.pg_attrdef.adnum = pg_catalog.pg_attribute.attnum) ELSE NULL END AS "default", \
pg_catalog.pg_attribute.attnotnull AS not_null, pg_catalog.pg_class.relname AS table_name, \
pg_catalog.pg_description.description AS comment, pg_catalog.pg_attribute.attgenerated AS generated, CASE WHEN \
(pg_catalog.pg_attribute.attidentity != ''::VARCHAR) THEN (SELECT json_build_object('always'::VARCHAR, \
pg_catalog.pg_attribute.attidentity = 'a'::VARCHAR, 'start'::VARCHAR, pg_catalog.pg_sequence.seqstart, \
'increment'::VARCHAR, pg_catalog.pg_sequence.seqincrement, 'minvalue'::VARCHAR, pg_catalog.pg_sequence.seqmin, \
'maxvalue'::VARCHAR, pg_catalog.pg_sequence.seqmax, 'cache'::VARCHAR, pg_catalog.pg_sequence.seqcache, \
'cycle'::VARCHAR, pg_catalog.pg_sequence.seqcycle) AS json_build_object_1
FROM pg_catalog.pg_sequence
WHERE pg_catalog.pg_attribute.attidentity != ''::VARCHAR AND pg_catalog.pg_sequence.seqrelid = \
CAST(CAST(pg_catalog.pg_get_serial_sequence(CAST(CAST(pg_catalog.pg_attribute.attrelid AS REGCLASS) AS TEXT), \
pg_catalog.pg_attribute.attname) AS REGCLASS) AS OID)) ELSE NULL END AS identity_options, CASE WHEN \
(pg_catalog.pg_attribute.attcollation != 0::INTEGER AND (SELECT pg_catalog.pg_type.typcollation
FROM pg_catalog.pg_type
WHERE pg_catalog.pg_type.oid = pg_catalog.pg_attribute.atttypid) != pg_catalog.pg_attribute.attcollation) THEN \
(SELECT json_build_object('name'::VARCHAR, pg_catalog.pg_collation.collname, 'schema'::VARCHAR, CASE WHEN \
pg_catalog.pg_collation_is_visible(pg_catalog.pg_collation.oid) THEN NULL ELSE pg_catalog.pg_namespace.nspname END) \
AS json_build_object_9
FROM pg_catalog.pg_collation JOIN pg_catalog.pg_namespace ON pg_catalog.pg_namespace.oid = \
pg_catalog.pg_collation.collnamespace
WHERE pg_catalog.pg_collation.oid = pg_catalog.pg_attribute.attcollation) ELSE NULL END AS collation
FROM pg_catalog.pg_class LEFT OUTER JOIN pg_catalog.pg_attribute ON pg_catalog.pg_class.oid = \
pg_catalog.pg_attribute.attrelid AND pg_catalog.pg_attribute.attnum > 0::SMALLINT AND NOT \
pg_catalog.pg_attribute.attisdropped LEFT OUTER JOIN pg_catalog.pg_description ON \
pg_catalog.pg_description.objoid = pg_catalog.pg_attribute.attrelid AND pg_catalog.pg_description.objsubid = \
pg_catalog.pg_attribute.attnum JOIN pg_catalog.pg_namespace ON pg_catalog.pg_namespace.oid = \
pg_catalog.pg_class.relnamespace
WHERE pg_catalog.pg_class.relkind = ANY (ARRAY['r'::VARCHAR, 'p'::VARCHAR, 'f'::VARCHAR, 'v'::VARCHAR, \
'm'::VARCHAR]) AND pg_catalog.pg_table_is_visible(pg_catalog.pg_class.oid) AND pg_catalog.pg_namespace.nspname != \
'pg_catalog'::VARCHAR AND pg_catalog.pg_class.relname IN ('visits'::VARCHAR) ORDER BY pg_catalog.pg_class.relname, \
pg_catalog.pg_attribute.attnum
"""
PSYCOPG_TYPE_INFO = """\
SELECT
    typname AS name, oid, typarray AS array_oid,
    oid::regtype::text AS regtype, typdelim AS delimiter
FROM pg_type t
WHERE t.oid = to_regtype({name})
ORDER BY t.oid
"""
PSYCOPG2_HSTORE = """\
SELECT t.oid, typarray
FROM pg_type t JOIN pg_namespace ns
    ON typnamespace = ns.oid
WHERE typname = 'hstore';
"""


@pytest.fixture(scope="module")
def catalog() -> ShadowCatalog:
    return ShadowCatalog(clinic_policy())


def ask(catalog: ShadowCatalog, sql: str) -> ReleasedTable:
    (tree,) = parse_statements(sql)
    return catalog.answer(tree, info=INFO, setting=SETTINGS.get)  # type: ignore[arg-type]


def names(table: ReleasedTable) -> list[str]:
    return [column.name for column in table.columns]


def column(table: ReleasedTable, name: str) -> list[Any]:
    position = names(table).index(name)
    return [row[position] for row in table.rows]


def test_psql_dt_lists_the_tables(catalog: ShadowCatalog) -> None:
    table = ask(catalog, PSQL_LIST_TABLES)
    assert names(table) == ["Schema", "Name", "Type", "Owner"]
    assert table.rows == [("public", name, "table", "veil") for name in TABLES]


def test_psql_dt_plus_shows_the_table_comments_and_no_size(catalog: ShadowCatalog) -> None:
    table = ask(catalog, PSQL_LIST_TABLES_PLUS)
    described = dict(zip(column(table, "Name"), column(table, "Description"), strict=True))
    assert "privacy unit: patient_id; max_contributions: 3 rows per person" in described["visits"]
    assert column(table, "Size") == [None] * len(TABLES)
    assert set(column(table, "Access method")) == {"heap"}


def test_psql_d_visits_finds_the_table_then_describes_it(catalog: ShadowCatalog) -> None:
    ((oid, schema, name),) = ask(catalog, PSQL_FIND_TABLE.format(name="visits")).rows
    assert (schema, name) == ("public", "visits")
    info = ask(catalog, PSQL_TABLE_INFO.format(oid=oid))
    (row,) = info.rows
    assert row[:2] == (0, "r") and row[-1] == "heap"  # relchecks, relkind … amname: a plain table
    columns = ask(catalog, PSQL_COLUMNS_PLUS.format(oid=oid))
    assert [row[0] for row in columns.rows] == VISITS
    assert [row[1] for row in columns.rows] == [
        "bigint",
        "bigint",
        "double precision",
        "text",
        "text",
        "text",
    ]
    assert columns.rows[1][-1] == "private: aggregate only; values are clamped to [0, 100]"


@pytest.mark.parametrize(
    ("statement", "width"),
    [
        ("PSQL_POLICIES", 6),
        ("PSQL_STATISTICS", 9),
        ("PSQL_PUBLICATIONS", 3),
        ("PSQL_PARENTS", 1),
        ("PSQL_PARTITIONS", 4),
    ],
)
def test_psql_d_visits_footers_are_empty(catalog: ShadowCatalog, statement: str, width: int) -> None:
    ((oid, _, _),) = ask(catalog, PSQL_FIND_TABLE.format(name="visits")).rows
    table = ask(catalog, globals()[statement].format(oid=oid))
    assert table.rows == [] and len(table.columns) == width


def test_psql_d_finds_no_unknown_table(catalog: ShadowCatalog) -> None:
    assert ask(catalog, PSQL_FIND_TABLE.format(name="salaries")).rows == []


def test_psql_dn_lists_the_schema(catalog: ShadowCatalog) -> None:
    assert ask(catalog, PSQL_SCHEMAS).rows == [("public", "veil")]


def test_psql_l_lists_the_dataset_as_the_database(catalog: ShadowCatalog) -> None:
    assert ask(catalog, PSQL_DATABASES).rows == [("clinic", "veil", "UTF8", "C", "C", None, "libc", None)]


def test_psql_df_lists_no_function(catalog: ShadowCatalog) -> None:
    table = ask(catalog, PSQL_FUNCTIONS)
    assert table.rows == []
    assert names(table) == ["Schema", "Name", "Result data type", "Argument data types", "Type"]


def test_jdbc_get_tables_has_the_comments_as_remarks(catalog: ShadowCatalog) -> None:
    table = ask(catalog, JDBC_GET_TABLES)
    assert column(table, "TABLE_NAME") == TABLES
    assert set(column(table, "TABLE_TYPE")) == {"TABLE"}
    policy = clinic_policy().tables
    assert column(table, "REMARKS") == [table_comment(policy[name]) for name in TABLES]


def test_jdbc_get_columns_describes_visits(catalog: ShadowCatalog) -> None:
    table = ask(catalog, JDBC_GET_COLUMNS)
    assert column(table, "attname") == VISITS
    assert column(table, "atttypid") == [20, 20, 701, 25, 25, 25]
    assert column(table, "attnum") == list(range(1, len(VISITS) + 1))


def test_jdbc_get_schemas(catalog: ShadowCatalog) -> None:
    assert ask(catalog, JDBC_GET_SCHEMAS).rows == [
        ("information_schema", None),
        ("pg_catalog", None),
        ("public", None),
    ]


def test_sqlalchemy_get_table_names(catalog: ShadowCatalog) -> None:
    assert sorted(row[0] for row in ask(catalog, SQLALCHEMY_TABLE_NAMES).rows) == TABLES


def test_sqlalchemy_get_columns(catalog: ShadowCatalog) -> None:
    table = ask(catalog, SQLALCHEMY_COLUMNS)
    assert column(table, "name") == VISITS
    assert column(table, "format_type")[:3] == ["bigint", "bigint", "double precision"]
    assert column(table, "not_null") == [False] * len(VISITS)
    assert column(table, "comment")[4] == "public: may be grouped by; values: north, south"
    assert column(table, "identity_options") == column(table, "collation") == [None] * len(VISITS)


def test_psycopg_type_info_finds_builtin_types_only(catalog: ShadowCatalog) -> None:
    assert ask(catalog, PSYCOPG_TYPE_INFO.format(name="'hstore'")).rows == []
    assert ask(catalog, PSYCOPG_TYPE_INFO.format(name="'int8'")).rows == [("int8", 20, 1016, "bigint", ",")]
    assert ask(catalog, PSYCOPG2_HSTORE).rows == []


def test_asyncpg_type_introspection_walks_array_elements(catalog: ShadowCatalog) -> None:
    sql = introspection.INTRO_LOOKUP_TYPES.replace("$1::oid[]", "'{1016}'::oid[]")
    table = ask(catalog, sql)
    found = {row[names(table).index("name")]: row for row in table.rows}
    assert set(found) == {"_int8", "int8"}
    assert found["_int8"][names(table).index("elemtype_name")] == "bigint"


def test_asyncpg_looks_types_up_by_name(catalog: ShadowCatalog) -> None:
    sql = introspection.TYPE_BY_NAME.replace("$1", "'int4'").replace("$2", "'pg_catalog'")
    assert ask(catalog, sql).rows == [(23, 0, "b")]


def test_pgcli_reads_the_search_path(catalog: ShadowCatalog) -> None:
    assert ask(catalog, "SELECT * FROM unnest(current_schemas(true))").rows == [("pg_catalog",), ("public",)]


def test_session_identity_and_settings_are_the_sessions(catalog: ShadowCatalog) -> None:
    table = ask(
        catalog,
        "SELECT pg_catalog.version(), current_user, session_user, current_database(), current_schema(), "
        "current_setting('server_version_num'), current_setting('application_name')",
    )
    assert table.rows == [(INFO.version, "alice", "alice", "clinic", "public", "160000", "pytest")]
    assert names(table)[:2] == ["version", "current_user"]


def test_a_missing_relation_gives_an_empty_result_with_the_columns(
    catalog: ShadowCatalog, caplog: pytest.LogCaptureFixture
) -> None:
    table = ask(
        catalog, "SELECT e.extname, e.extversion AS version FROM pg_catalog.pg_largeobject_metadata e"
    )
    assert (table.rows, names(table)) == ([], ["extname", "version"])
    ask(catalog, "SELECT e.extname, e.extversion AS version FROM pg_catalog.pg_largeobject_metadata e")
    assert caplog.text.count("relation pg_catalog.pg_largeobject_metadata") == 1  # logged once


def test_a_missing_function_gives_an_empty_result(catalog: ShadowCatalog) -> None:
    table = ask(catalog, "SELECT pg_catalog.pg_get_keywords_x(oid) AS word FROM pg_class")
    assert (table.rows, names(table)) == ([], ["word"])


def test_a_missing_relation_read_with_star_is_refused(catalog: ShadowCatalog) -> None:
    with pytest.raises(UnsupportedQueryError, match="this catalog query is not supported"):
        ask(catalog, "SELECT * FROM pg_catalog.pg_largeobject")


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT relname, read_text('/etc/passwd') AS leak FROM pg_class",  # not a catalog function
        "SELECT c.relname, f.column0 AS leak FROM pg_class c, read_csv('/etc/passwd') f",  # the engine refuses
    ],
)
def test_files_stay_out_of_reach(catalog: ShadowCatalog, sql: str) -> None:
    assert ask(catalog, sql).rows == []


DBEAVER_NAVIGATOR = [  # DBeaver's PostgreSQL navigator, parameters bound
    "SELECT n.oid,n.*,d.description FROM pg_catalog.pg_namespace n LEFT OUTER JOIN pg_catalog.pg_description d "
    "ON d.objoid=n.oid AND d.objsubid=0 AND d.classoid='pg_namespace'::regclass ORDER BY nspname",
    "SELECT c.oid,c.*,t.relname as tabrelname,rt.relnamespace as refnamespace,d.description, case when "
    "c.relkind='p' then pg_get_partkeydef(c.oid) else null end as partition_key FROM pg_catalog.pg_class c "
    "LEFT OUTER JOIN pg_catalog.pg_class t ON t.oid=c.reltoastrelid LEFT OUTER JOIN pg_catalog.pg_class rt ON "
    "rt.oid=c.reltype LEFT OUTER JOIN pg_catalog.pg_description d ON d.objoid=c.oid AND d.objsubid=0 AND "
    "d.classoid='pg_class'::regclass WHERE c.relnamespace=2200 AND c.relkind not in ('i','I','c')",
    "SELECT c.relname,a.*,pg_catalog.pg_get_expr(ad.adbin, ad.adrelid, true) as def_value,dsc.description,"
    "dep.objid FROM pg_catalog.pg_attribute a INNER JOIN pg_catalog.pg_class c ON (a.attrelid=c.oid) LEFT OUTER "
    "JOIN pg_catalog.pg_attrdef ad ON (a.attrelid=ad.adrelid AND a.attnum = ad.adnum) LEFT OUTER JOIN "
    "pg_catalog.pg_description dsc ON (c.oid=dsc.objoid AND a.attnum = dsc.objsubid) LEFT OUTER JOIN pg_depend "
    "dep on dep.refobjid = a.attrelid AND dep.deptype = 'i' and dep.refobjsubid = a.attnum and dep.classid = "
    "dep.refclassid WHERE NOT a.attisdropped AND c.relkind not in ('i','I','c') AND c.oid='visits'::regclass "
    "ORDER BY a.attnum",
    "SELECT db.oid,db.* FROM pg_catalog.pg_database db WHERE datallowconn AND NOT datistemplate OR "
    "db.datname = 'clinic'",
    "SELECT t.oid,t.*,c.relkind,format_type(nullif(t.typbasetype, 0), t.typtypmod) as base_type_name, "
    "d.description FROM pg_catalog.pg_type t LEFT OUTER JOIN pg_catalog.pg_type et ON et.oid=t.typelem LEFT "
    "OUTER JOIN pg_catalog.pg_class c ON c.oid=t.typrelid LEFT OUTER JOIN pg_catalog.pg_description d ON "
    "t.oid=d.objoid WHERE t.typname IS NOT NULL AND (c.relkind IS NULL OR c.relkind = 'c') AND "
    "(et.typcategory IS NULL OR et.typcategory <> 'C')",
]


def test_dbeaver_navigator_lists_schemas_tables_columns_and_types(catalog: ShadowCatalog) -> None:
    schemas, tables, columns, databases, types = (ask(catalog, sql) for sql in DBEAVER_NAVIGATOR)
    assert column(schemas, "nspname") == ["information_schema", "pg_catalog", "public"]
    assert column(tables, "relname") == TABLES
    assert column(tables, "description") == [table_comment(clinic_policy().tables[name]) for name in TABLES]
    assert column(columns, "attname") == VISITS
    assert column(databases, "datname") == ["clinic"]
    assert {"int8", "text", "_text", "date"} <= set(column(types, "typname"))


def test_regclass_values_print_as_names_and_compare_as_oids(catalog: ShadowCatalog) -> None:
    table = ask(catalog, "SELECT 'visits'::regclass, 'visits'::regclass::oid, 'pg_type'::regclass::oid AS t")
    ((oid,),) = ask(catalog, "SELECT oid FROM pg_class WHERE relname = 'visits'").rows
    assert table.rows == [("visits", oid, 1247)]
    assert names(table) == ["regclass", "oid", "t"]
    assert ask(catalog, "SELECT relname FROM pg_class WHERE oid = 'visits'::regclass").rows == [("visits",)]
