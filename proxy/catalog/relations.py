"""The system catalog the shadow database shows: pg_catalog and information_schema, rebuilt for DuckDB.

DuckDB ships a ``pg_catalog`` of its own, but it describes DuckDB: type OIDs that PostgreSQL clients do
not know, ``relowner = 0``, every internal schema, no ``pg_roles``, ``pg_inherits``, ``pg_policy`` …
and ``format_type`` answers DuckDB names. So the shadow keeps its own copies in the schemas
``veil_pg_catalog`` and ``veil_information_schema``, and :mod:`proxy.catalog.translate` points every
catalog reference there. The relations come in three kinds:

* **views over the shadow's own tables** (``pg_class``, ``pg_attribute``, ``pg_description`` …): they
  read DuckDB's metadata of the empty dataset tables, so the policy is their only source;
* **fixed rows** (``pg_type``, ``pg_namespace``, ``pg_database``, ``pg_roles``, ``pg_settings`` …), filled
  by :mod:`proxy.catalog.shadow` with parameters;
* **empty tables with PostgreSQL's columns** (``pg_index``, ``pg_inherits``, ``pg_policy``, ``pg_stats`` …):
  Veil has no indexes, rules, policies or partitions to show, and **never statistics**: ``pg_stats``,
  ``pg_statistic`` and row estimates (``reltuples = -1``, ``pg_table_size`` NULL) would describe the data.

Everything here is static SQL written by hand (no value from a client or a policy enters it). The
internal schema ``veil_shadow`` holds the relation list with its OIDs and the type display names.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Final

PG_CATALOG: Final = "pg_catalog"
INFORMATION_SCHEMA: Final = "information_schema"
SHADOW_SCHEMAS: Final = MappingProxyType(
    {PG_CATALOG: "veil_pg_catalog", INFORMATION_SCHEMA: "veil_information_schema"}
)
INTERNAL_SCHEMA: Final = "veil_shadow"

OWNER: Final = "veil"  # the role that owns every object, as pg_get_userbyid(10) names it
OWNER_OID: Final = 10
PG_CATALOG_OID: Final = 11
DATASET_SCHEMA_OID: Final = 2200  # PostgreSQL's OID for "public"; here, whatever the dataset's schema is
INFORMATION_SCHEMA_OID: Final = 13181
DATABASE_OID: Final = 16384
FIRST_TABLE_OID: Final = 16400  # dataset tables, in name order
FIRST_CATALOG_OID: Final = 12000  # catalog relations without a well-known OID, in name order
HEAP_AM_OID: Final = 2
TEXT_COLLATION_OID: Final = 100
UTF8_ENCODING: Final = 6

# PostgreSQL's own OIDs: clients write 'pg_class'::regclass and compare it with pg_description.classoid.
WELL_KNOWN_OIDS: Final = MappingProxyType(
    {
        "pg_aggregate": 2600, "pg_am": 2601, "pg_attrdef": 2604, "pg_cast": 2605, "pg_constraint": 2606,
        "pg_conversion": 2607, "pg_depend": 2608, "pg_description": 2609, "pg_index": 2610,
        "pg_inherits": 2611, "pg_language": 2612, "pg_opclass": 2616, "pg_operator": 2617,
        "pg_rewrite": 2618, "pg_statistic": 2619, "pg_trigger": 2620, "pg_namespace": 2615,
        "pg_tablespace": 1213, "pg_type": 1247, "pg_attribute": 1249, "pg_proc": 1255, "pg_class": 1259,
        "pg_authid": 1260, "pg_auth_members": 1261, "pg_database": 1262, "pg_shdescription": 2396,
        "pg_sequence": 2224, "pg_foreign_table": 3118, "pg_extension": 3079, "pg_policy": 3256,
        "pg_partitioned_table": 3350, "pg_statistic_ext": 3381, "pg_collation": 3456,
        "pg_event_trigger": 3466, "pg_enum": 3501, "pg_range": 3541, "pg_publication": 6104,
        "pg_publication_rel": 6106, "pg_publication_namespace": 6237,
    }
)  # fmt: skip


# (oid, typname, typlen, typbyval, typtype, typcategory, typelem, typarray, typcollation, typalign,
#  typstorage, display name as format_type prints it). Array types are derived from their element.
BASE_TYPES: Final = (
    (16, "bool", 1, True, "b", "B", 0, 1000, 0, "c", "p", "boolean"),
    (17, "bytea", -1, False, "b", "U", 0, 1001, 0, "i", "x", "bytea"),
    (18, "char", 1, True, "b", "Z", 0, 1002, 0, "c", "p", '"char"'),
    (19, "name", 64, False, "b", "S", 18, 1003, 950, "c", "p", "name"),
    (20, "int8", 8, True, "b", "N", 0, 1016, 0, "d", "p", "bigint"),
    (21, "int2", 2, True, "b", "N", 0, 1005, 0, "s", "p", "smallint"),
    (22, "int2vector", -1, False, "b", "A", 21, 1006, 0, "i", "p", "int2vector"),
    (23, "int4", 4, True, "b", "N", 0, 1007, 0, "i", "p", "integer"),
    (24, "regproc", 4, True, "b", "N", 0, 1008, 0, "i", "p", "regproc"),
    (25, "text", -1, False, "b", "S", 0, 1009, 100, "i", "x", "text"),
    (26, "oid", 4, True, "b", "N", 0, 1028, 0, "i", "p", "oid"),
    (27, "tid", 6, False, "b", "U", 0, 1010, 0, "s", "p", "tid"),
    (28, "xid", 4, True, "b", "U", 0, 1011, 0, "i", "p", "xid"),
    (29, "cid", 4, True, "b", "U", 0, 1012, 0, "i", "p", "cid"),
    (30, "oidvector", -1, False, "b", "A", 26, 1013, 0, "i", "p", "oidvector"),
    (114, "json", -1, False, "b", "U", 0, 199, 0, "i", "x", "json"),
    (142, "xml", -1, False, "b", "U", 0, 143, 0, "i", "x", "xml"),
    (194, "pg_node_tree", -1, False, "b", "Z", 0, 0, 100, "i", "x", "pg_node_tree"),
    (700, "float4", 4, True, "b", "N", 0, 1021, 0, "i", "p", "real"),
    (701, "float8", 8, True, "b", "N", 0, 1022, 0, "d", "p", "double precision"),
    (705, "unknown", -2, False, "p", "X", 0, 0, 0, "c", "p", "unknown"),
    (790, "money", 8, True, "b", "N", 0, 791, 0, "d", "p", "money"),
    (869, "inet", -1, False, "b", "I", 0, 1041, 0, "i", "m", "inet"),
    (1033, "aclitem", 16, False, "b", "U", 0, 1034, 0, "d", "p", "aclitem"),
    (1042, "bpchar", -1, False, "b", "S", 0, 1014, 100, "i", "x", "character"),
    (1043, "varchar", -1, False, "b", "S", 0, 1015, 100, "i", "x", "character varying"),
    (1082, "date", 4, True, "b", "D", 0, 1182, 0, "i", "p", "date"),
    (1083, "time", 8, True, "b", "D", 0, 1183, 0, "d", "p", "time without time zone"),
    (1114, "timestamp", 8, True, "b", "D", 0, 1115, 0, "d", "p", "timestamp without time zone"),
    (1184, "timestamptz", 8, True, "b", "D", 0, 1185, 0, "d", "p", "timestamp with time zone"),
    (1186, "interval", 16, False, "b", "T", 0, 1187, 0, "d", "p", "interval"),
    (1266, "timetz", 12, False, "b", "D", 0, 1270, 0, "d", "p", "time with time zone"),
    (1700, "numeric", -1, False, "b", "N", 0, 1231, 0, "i", "m", "numeric"),
    (2202, "regprocedure", 4, True, "b", "N", 0, 2207, 0, "i", "p", "regprocedure"),
    (2205, "regclass", 4, True, "b", "N", 0, 2210, 0, "i", "p", "regclass"),
    (2206, "regtype", 4, True, "b", "N", 0, 2211, 0, "i", "p", "regtype"),
    (2249, "record", -1, False, "p", "P", 0, 2287, 0, "d", "x", "record"),
    (2275, "cstring", -2, False, "p", "P", 0, 1263, 0, "c", "p", "cstring"),
    (2276, "any", 4, True, "p", "P", 0, 0, 0, "i", "p", '"any"'),
    (2277, "anyarray", -1, False, "p", "P", 0, 0, 0, "d", "x", "anyarray"),
    (2278, "void", 4, True, "p", "P", 0, 0, 0, "i", "p", "void"),
    (2279, "trigger", 4, True, "p", "P", 0, 0, 0, "i", "p", "trigger"),
    (2283, "anyelement", 4, True, "p", "P", 0, 0, 0, "i", "p", "anyelement"),
    (2950, "uuid", 16, False, "b", "U", 0, 2951, 0, "c", "p", "uuid"),
    (3802, "jsonb", -1, False, "b", "U", 0, 3807, 0, "i", "x", "jsonb"),
    (4089, "regnamespace", 4, True, "b", "N", 0, 4090, 0, "i", "p", "regnamespace"),
    (4096, "regrole", 4, True, "b", "N", 0, 4097, 0, "i", "p", "regrole"),
)

# The PostgreSQL type of each DuckDB column type that a shadow relation uses.
DUCKDB_TYPES: Final = MappingProxyType(
    {
        "BOOLEAN": 16, "SMALLINT": 21, "INTEGER": 23, "BIGINT": 20, "FLOAT": 700, "DOUBLE": 701,
        "VARCHAR": 25, "DATE": 1082, "TIMESTAMP": 1114, "TIMESTAMP WITH TIME ZONE": 1184,
        "BOOLEAN[]": 1000, "SMALLINT[]": 1005, "INTEGER[]": 1007, "BIGINT[]": 1016, "VARCHAR[]": 1009,
    }
)  # fmt: skip

INTERNAL_DDL: Final = """
CREATE SCHEMA veil_shadow;
CREATE TABLE veil_shadow.relations (
    oid BIGINT, relnamespace BIGINT, schema_name VARCHAR, relname VARCHAR, relkind VARCHAR);
CREATE TABLE veil_shadow.type_names (oid BIGINT, display VARCHAR);
CREATE TABLE veil_shadow.duckdb_types (duckdb_type VARCHAR, oid BIGINT);
CREATE TABLE veil_shadow.schema_descriptions (oid BIGINT, description VARCHAR);
"""

# Relations with fixed rows (filled by the shadow) or none. Column types follow PostgreSQL's where DuckDB
# has them; oid, regproc and name columns are BIGINT and VARCHAR.
PG_CATALOG_TABLES: Final = """
CREATE SCHEMA veil_pg_catalog;
CREATE TABLE veil_pg_catalog.pg_namespace (oid BIGINT, nspname VARCHAR, nspowner BIGINT, nspacl VARCHAR[]);
CREATE TABLE veil_pg_catalog.pg_type (
    oid BIGINT, typname VARCHAR, typnamespace BIGINT, typowner BIGINT, typlen SMALLINT, typbyval BOOLEAN,
    typtype VARCHAR, typcategory VARCHAR, typispreferred BOOLEAN, typisdefined BOOLEAN, typdelim VARCHAR,
    typrelid BIGINT, typsubscript VARCHAR, typelem BIGINT, typarray BIGINT, typinput VARCHAR,
    typoutput VARCHAR, typreceive VARCHAR, typsend VARCHAR, typmodin VARCHAR, typmodout VARCHAR,
    typanalyze VARCHAR, typalign VARCHAR, typstorage VARCHAR, typnotnull BOOLEAN, typbasetype BIGINT,
    typtypmod INTEGER, typndims INTEGER, typcollation BIGINT, typdefaultbin VARCHAR, typdefault VARCHAR,
    typacl VARCHAR[]);
CREATE TABLE veil_pg_catalog.pg_database (
    oid BIGINT, datname VARCHAR, datdba BIGINT, encoding INTEGER, datlocprovider VARCHAR,
    datistemplate BOOLEAN, datallowconn BOOLEAN, datconnlimit INTEGER, datfrozenxid BIGINT,
    datminmxid BIGINT, dattablespace BIGINT, datcollate VARCHAR, datctype VARCHAR, daticulocale VARCHAR,
    daticurules VARCHAR, datcollversion VARCHAR, datacl VARCHAR[]);
CREATE TABLE veil_shadow.roles (
    oid BIGINT, rolname VARCHAR, rolsuper BOOLEAN, rolinherit BOOLEAN, rolcreaterole BOOLEAN,
    rolcreatedb BOOLEAN, rolcanlogin BOOLEAN, rolreplication BOOLEAN, rolbypassrls BOOLEAN,
    rolconnlimit INTEGER, rolpassword VARCHAR, rolvaliduntil TIMESTAMP WITH TIME ZONE);
CREATE TABLE veil_shadow.keywords (
    word VARCHAR, catcode VARCHAR, barelabel BOOLEAN, catdesc VARCHAR, baredesc VARCHAR);
CREATE TABLE veil_pg_catalog.pg_settings (
    name VARCHAR, setting VARCHAR, unit VARCHAR, category VARCHAR, short_desc VARCHAR, extra_desc VARCHAR,
    context VARCHAR, vartype VARCHAR, source VARCHAR, min_val VARCHAR, max_val VARCHAR,
    enumvals VARCHAR[], boot_val VARCHAR, reset_val VARCHAR, sourcefile VARCHAR, sourceline INTEGER,
    pending_restart BOOLEAN);
CREATE TABLE veil_pg_catalog.pg_shdescription (objoid BIGINT, classoid BIGINT, description VARCHAR);
CREATE TABLE veil_pg_catalog.pg_am (oid BIGINT, amname VARCHAR, amhandler VARCHAR, amtype VARCHAR);
CREATE TABLE veil_pg_catalog.pg_tablespace (
    oid BIGINT, spcname VARCHAR, spcowner BIGINT, spcacl VARCHAR[], spcoptions VARCHAR[]);
CREATE TABLE veil_pg_catalog.pg_collation (
    oid BIGINT, collname VARCHAR, collnamespace BIGINT, collowner BIGINT, collprovider VARCHAR,
    collisdeterministic BOOLEAN, collencoding INTEGER, collcollate VARCHAR, collctype VARCHAR,
    colliculocale VARCHAR, collicurules VARCHAR, collversion VARCHAR);
CREATE TABLE veil_pg_catalog.pg_attrdef (oid BIGINT, adrelid BIGINT, adnum SMALLINT, adbin VARCHAR);
CREATE TABLE veil_pg_catalog.pg_index (
    indexrelid BIGINT, indrelid BIGINT, indnatts SMALLINT, indnkeyatts SMALLINT, indisunique BOOLEAN,
    indnullsnotdistinct BOOLEAN, indisprimary BOOLEAN, indisexclusion BOOLEAN, indimmediate BOOLEAN,
    indisclustered BOOLEAN, indisvalid BOOLEAN, indcheckxmin BOOLEAN, indisready BOOLEAN,
    indislive BOOLEAN, indisreplident BOOLEAN, indkey SMALLINT[], indcollation BIGINT[],
    indclass BIGINT[], indoption SMALLINT[], indexprs VARCHAR, indpred VARCHAR);
CREATE TABLE veil_pg_catalog.pg_constraint (
    oid BIGINT, conname VARCHAR, connamespace BIGINT, contype VARCHAR, condeferrable BOOLEAN,
    condeferred BOOLEAN, convalidated BOOLEAN, conrelid BIGINT, contypid BIGINT, conindid BIGINT,
    conparentid BIGINT, confrelid BIGINT, confupdtype VARCHAR, confdeltype VARCHAR,
    confmatchtype VARCHAR, conislocal BOOLEAN, coninhcount INTEGER, connoinherit BOOLEAN,
    conkey SMALLINT[], confkey SMALLINT[], conpfeqop BIGINT[], conppeqop BIGINT[], conffeqop BIGINT[],
    confdelsetcols SMALLINT[], conexclop BIGINT[], conbin VARCHAR);
CREATE TABLE veil_pg_catalog.pg_inherits (
    inhrelid BIGINT, inhparent BIGINT, inhseqno INTEGER, inhdetachpending BOOLEAN);
CREATE TABLE veil_pg_catalog.pg_policy (
    oid BIGINT, polname VARCHAR, polrelid BIGINT, polcmd VARCHAR, polpermissive BOOLEAN,
    polroles BIGINT[], polqual VARCHAR, polwithcheck VARCHAR);
CREATE TABLE veil_pg_catalog.pg_statistic_ext (
    oid BIGINT, stxrelid BIGINT, stxname VARCHAR, stxnamespace BIGINT, stxowner BIGINT,
    stxstattarget INTEGER, stxkeys SMALLINT[], stxkind VARCHAR[], stxexprs VARCHAR);
CREATE TABLE veil_pg_catalog.pg_statistic (
    starelid BIGINT, staattnum SMALLINT, stainherit BOOLEAN, stanullfrac FLOAT, stawidth INTEGER,
    stadistinct FLOAT);
CREATE TABLE veil_pg_catalog.pg_stats (
    schemaname VARCHAR, tablename VARCHAR, attname VARCHAR, inherited BOOLEAN, null_frac FLOAT,
    avg_width INTEGER, n_distinct FLOAT, most_common_vals VARCHAR[], most_common_freqs FLOAT[],
    histogram_bounds VARCHAR[], correlation FLOAT);
CREATE TABLE veil_pg_catalog.pg_publication (
    oid BIGINT, pubname VARCHAR, pubowner BIGINT, puballtables BOOLEAN, pubinsert BOOLEAN,
    pubupdate BOOLEAN, pubdelete BOOLEAN, pubtruncate BOOLEAN, pubviaroot BOOLEAN);
CREATE TABLE veil_pg_catalog.pg_publication_namespace (oid BIGINT, pnpubid BIGINT, pnnspid BIGINT);
CREATE TABLE veil_pg_catalog.pg_publication_rel (
    oid BIGINT, prpubid BIGINT, prrelid BIGINT, prqual VARCHAR, prattrs SMALLINT[]);
CREATE TABLE veil_pg_catalog.pg_proc (
    oid BIGINT, proname VARCHAR, pronamespace BIGINT, proowner BIGINT, prolang BIGINT, procost FLOAT,
    prorows FLOAT, provariadic BIGINT, prosupport VARCHAR, prokind VARCHAR, prosecdef BOOLEAN,
    proleakproof BOOLEAN, proisstrict BOOLEAN, proretset BOOLEAN, provolatile VARCHAR,
    proparallel VARCHAR, pronargs SMALLINT, pronargdefaults SMALLINT, prorettype BIGINT,
    proargtypes BIGINT[], proallargtypes BIGINT[], proargmodes VARCHAR[], proargnames VARCHAR[],
    proargdefaults VARCHAR, protrftypes BIGINT[], prosrc VARCHAR, probin VARCHAR, prosqlbody VARCHAR,
    proconfig VARCHAR[], proacl VARCHAR[]);
CREATE TABLE veil_pg_catalog.pg_range (
    rngtypid BIGINT, rngsubtype BIGINT, rngmultitypid BIGINT, rngcollation BIGINT, rngsubopc BIGINT,
    rngcanonical VARCHAR, rngsubdiff VARCHAR);
CREATE TABLE veil_pg_catalog.pg_enum (oid BIGINT, enumtypid BIGINT, enumsortorder FLOAT, enumlabel VARCHAR);
CREATE TABLE veil_pg_catalog.pg_extension (
    oid BIGINT, extname VARCHAR, extowner BIGINT, extnamespace BIGINT, extrelocatable BOOLEAN,
    extversion VARCHAR, extconfig BIGINT[], extcondition VARCHAR[]);
CREATE TABLE veil_pg_catalog.pg_depend (
    classid BIGINT, objid BIGINT, objsubid INTEGER, refclassid BIGINT, refobjid BIGINT,
    refobjsubid INTEGER, deptype VARCHAR);
CREATE TABLE veil_pg_catalog.pg_auth_members (
    oid BIGINT, roleid BIGINT, member BIGINT, grantor BIGINT, admin_option BOOLEAN);
CREATE TABLE veil_pg_catalog.pg_sequence (
    seqrelid BIGINT, seqtypid BIGINT, seqstart BIGINT, seqincrement BIGINT, seqmax BIGINT,
    seqmin BIGINT, seqcache BIGINT, seqcycle BOOLEAN);
CREATE TABLE veil_pg_catalog.pg_trigger (
    oid BIGINT, tgrelid BIGINT, tgparentid BIGINT, tgname VARCHAR, tgfoid BIGINT, tgtype SMALLINT,
    tgenabled VARCHAR, tgisinternal BOOLEAN, tgconstrrelid BIGINT, tgconstrindid BIGINT,
    tgconstraint BIGINT, tgdeferrable BOOLEAN, tginitdeferred BOOLEAN, tgnargs SMALLINT,
    tgattr SMALLINT[], tgargs VARCHAR, tgqual VARCHAR, tgoldtable VARCHAR, tgnewtable VARCHAR);
CREATE TABLE veil_pg_catalog.pg_rewrite (
    oid BIGINT, rulename VARCHAR, ev_class BIGINT, ev_type VARCHAR, ev_enabled VARCHAR,
    is_instead BOOLEAN, ev_qual VARCHAR, ev_action VARCHAR);
CREATE TABLE veil_pg_catalog.pg_foreign_table (ftrelid BIGINT, ftserver BIGINT, ftoptions VARCHAR[]);
CREATE TABLE veil_pg_catalog.pg_partitioned_table (
    partrelid BIGINT, partstrat VARCHAR, partnatts SMALLINT, partdefid BIGINT, partattrs SMALLINT[],
    partclass BIGINT[], partcollation BIGINT[], partexprs VARCHAR);
CREATE TABLE veil_pg_catalog.pg_language (
    oid BIGINT, lanname VARCHAR, lanowner BIGINT, lanispl BOOLEAN, lanpltrusted BOOLEAN,
    lanplcallfoid BIGINT, laninline BIGINT, lanvalidator BIGINT, lanacl VARCHAR[]);
CREATE TABLE veil_pg_catalog.pg_operator (
    oid BIGINT, oprname VARCHAR, oprnamespace BIGINT, oprowner BIGINT, oprkind VARCHAR,
    oprcanmerge BOOLEAN, oprcanhash BOOLEAN, oprleft BIGINT, oprright BIGINT, oprresult BIGINT,
    oprcom BIGINT, oprnegate BIGINT, oprcode VARCHAR, oprrest VARCHAR, oprjoin VARCHAR);
CREATE TABLE veil_pg_catalog.pg_opclass (
    oid BIGINT, opcmethod BIGINT, opcname VARCHAR, opcnamespace BIGINT, opcowner BIGINT,
    opcfamily BIGINT, opcintype BIGINT, opcdefault BOOLEAN, opckeytype BIGINT);
CREATE TABLE veil_pg_catalog.pg_cast (
    oid BIGINT, castsource BIGINT, casttarget BIGINT, castfunc BIGINT, castcontext VARCHAR,
    castmethod VARCHAR);
CREATE TABLE veil_pg_catalog.pg_aggregate (
    aggfnoid VARCHAR, aggkind VARCHAR, aggnumdirectargs SMALLINT, aggtransfn VARCHAR,
    aggfinalfn VARCHAR, aggtranstype BIGINT, agginitval VARCHAR);
CREATE TABLE veil_pg_catalog.pg_conversion (
    oid BIGINT, conname VARCHAR, connamespace BIGINT, conowner BIGINT, conforencoding INTEGER,
    contoencoding INTEGER, conproc VARCHAR, condefault BOOLEAN);
CREATE TABLE veil_pg_catalog.pg_event_trigger (
    oid BIGINT, evtname VARCHAR, evtevent VARCHAR, evtowner BIGINT, evtfoid BIGINT, evtenabled VARCHAR,
    evttags VARCHAR[]);
CREATE TABLE veil_pg_catalog.pg_stat_activity (
    datid BIGINT, datname VARCHAR, pid INTEGER, leader_pid INTEGER, usesysid BIGINT, usename VARCHAR,
    application_name VARCHAR, client_addr VARCHAR, client_hostname VARCHAR, client_port INTEGER,
    backend_start TIMESTAMP WITH TIME ZONE, xact_start TIMESTAMP WITH TIME ZONE,
    query_start TIMESTAMP WITH TIME ZONE, state_change TIMESTAMP WITH TIME ZONE,
    wait_event_type VARCHAR, wait_event VARCHAR, state VARCHAR, backend_xid BIGINT,
    backend_xmin BIGINT, query_id BIGINT, query VARCHAR, backend_type VARCHAR);
CREATE TABLE veil_pg_catalog.pg_locks (
    locktype VARCHAR, database BIGINT, relation BIGINT, page INTEGER, tuple SMALLINT,
    virtualxid VARCHAR, transactionid BIGINT, classid BIGINT, objid BIGINT, objsubid SMALLINT,
    virtualtransaction VARCHAR, pid INTEGER, mode VARCHAR, granted BOOLEAN, fastpath BOOLEAN,
    waitstart TIMESTAMP WITH TIME ZONE);
CREATE TABLE veil_pg_catalog.pg_prepared_statements (
    name VARCHAR, statement VARCHAR, prepare_time TIMESTAMP WITH TIME ZONE, parameter_types BIGINT[],
    result_types BIGINT[], from_sql BOOLEAN, generic_plans BIGINT, custom_plans BIGINT);
"""

# Views over the relation list and DuckDB's metadata of the shadow's (empty) tables.
PG_CATALOG_VIEWS: Final = """
CREATE VIEW veil_pg_catalog.pg_class AS
SELECT r.oid, r.relname, r.relnamespace, 0::BIGINT AS reltype, 0::BIGINT AS reloftype,
    10::BIGINT AS relowner, CASE WHEN r.relkind = 'r' THEN 2 ELSE 0 END::BIGINT AS relam,
    0::BIGINT AS relfilenode, 0::BIGINT AS reltablespace, 0 AS relpages, -1::FLOAT AS reltuples,
    0 AS relallvisible, 0::BIGINT AS reltoastrelid, false AS relhasindex, false AS relisshared,
    'p' AS relpersistence, r.relkind,
    (SELECT count(*) FROM duckdb_columns() c
      WHERE c.schema_name = r.schema_name AND c.table_name = r.relname)::SMALLINT AS relnatts,
    0::SMALLINT AS relchecks, false AS relhasrules, false AS relhastriggers, false AS relhassubclass,
    false AS relrowsecurity, false AS relforcerowsecurity, true AS relispopulated, 'd' AS relreplident,
    false AS relispartition, 0::BIGINT AS relrewrite, 0::BIGINT AS relfrozenxid, 0::BIGINT AS relminmxid,
    NULL::VARCHAR[] AS relacl, NULL::VARCHAR[] AS reloptions, NULL::VARCHAR AS relpartbound
FROM veil_shadow.relations r;

CREATE VIEW veil_pg_catalog.pg_attribute AS
SELECT r.oid AS attrelid, c.column_name AS attname, t.oid AS atttypid, t.typlen AS attlen,
    c.column_index::SMALLINT AS attnum, -1 AS attcacheoff, -1 AS atttypmod, 0::SMALLINT AS attndims,
    t.typbyval AS attbyval, t.typalign AS attalign, t.typstorage AS attstorage, '' AS attcompression,
    false AS attnotnull, false AS atthasdef, false AS atthasmissing, '' AS attidentity,
    '' AS attgenerated, false AS attisdropped, true AS attislocal, 0 AS attinhcount,
    -1::SMALLINT AS attstattarget, t.typcollation AS attcollation, NULL::VARCHAR[] AS attacl,
    NULL::VARCHAR[] AS attoptions, NULL::VARCHAR[] AS attfdwoptions, NULL::VARCHAR AS attmissingval
FROM veil_shadow.relations r
JOIN duckdb_columns() c ON c.schema_name = r.schema_name AND c.table_name = r.relname
LEFT JOIN veil_shadow.duckdb_types d ON d.duckdb_type = c.data_type
JOIN veil_pg_catalog.pg_type t ON t.oid = coalesce(d.oid, 25);

CREATE VIEW veil_pg_catalog.pg_description AS
SELECT r.oid AS objoid, 1259::BIGINT AS classoid, 0 AS objsubid, t.comment AS description
FROM veil_shadow.relations r
JOIN duckdb_tables() t ON t.schema_name = r.schema_name AND t.table_name = r.relname
WHERE t.comment IS NOT NULL
UNION ALL
SELECT r.oid, 1259::BIGINT, c.column_index, c.comment
FROM veil_shadow.relations r
JOIN duckdb_columns() c ON c.schema_name = r.schema_name AND c.table_name = r.relname
WHERE c.comment IS NOT NULL
UNION ALL
SELECT oid, 2615::BIGINT, 0, description FROM veil_shadow.schema_descriptions;

-- the owner, and the analyst asking (the session's user, set on the answering cursor): never other analysts
CREATE VIEW veil_pg_catalog.pg_authid AS
SELECT * FROM veil_shadow.roles
UNION ALL
SELECT 16384::BIGINT, getvariable('veil_user'), false, true, false, false, true, false, false, -1,
    NULL::VARCHAR, NULL::TIMESTAMP WITH TIME ZONE
WHERE getvariable('veil_user') IS NOT NULL AND getvariable('veil_user') <> 'veil';

CREATE VIEW veil_pg_catalog.pg_roles AS
SELECT rolname, rolsuper, rolinherit, rolcreaterole, rolcreatedb, rolcanlogin, rolreplication,
    rolconnlimit, '********' AS rolpassword, rolvaliduntil, rolbypassrls, NULL::VARCHAR[] AS rolconfig, oid
FROM veil_pg_catalog.pg_authid;

CREATE VIEW veil_pg_catalog.pg_user AS
SELECT rolname AS usename, oid AS usesysid, rolcreatedb AS usecreatedb, rolsuper AS usesuper,
    rolreplication AS userepl, rolbypassrls AS usebypassrls, '********' AS passwd,
    rolvaliduntil AS valuntil, NULL::VARCHAR[] AS useconfig
FROM veil_pg_catalog.pg_authid WHERE rolcanlogin;

CREATE VIEW veil_pg_catalog.pg_tables AS
SELECT n.nspname AS schemaname, c.relname AS tablename, 'veil' AS tableowner, NULL::VARCHAR AS tablespace,
    false AS hasindexes, false AS hasrules, false AS hastriggers, false AS rowsecurity
FROM veil_pg_catalog.pg_class c JOIN veil_pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p');

CREATE VIEW veil_pg_catalog.pg_views AS
SELECT n.nspname AS schemaname, c.relname AS viewname, 'veil' AS viewowner, NULL::VARCHAR AS definition
FROM veil_pg_catalog.pg_class c JOIN veil_pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind = 'v';

CREATE VIEW veil_pg_catalog.pg_matviews AS
SELECT NULL::VARCHAR AS schemaname, NULL::VARCHAR AS matviewname, NULL::VARCHAR AS matviewowner,
    NULL::VARCHAR AS tablespace, NULL::BOOLEAN AS hasindexes, NULL::BOOLEAN AS ispopulated,
    NULL::VARCHAR AS definition
WHERE false;

CREATE VIEW veil_pg_catalog.pg_indexes AS
SELECT NULL::VARCHAR AS schemaname, NULL::VARCHAR AS tablename, NULL::VARCHAR AS indexname,
    NULL::VARCHAR AS tablespace, NULL::VARCHAR AS indexdef
WHERE false;
"""

INFORMATION_SCHEMA_VIEWS: Final = """
CREATE SCHEMA veil_information_schema;
CREATE VIEW veil_information_schema.schemata AS
SELECT d.datname AS catalog_name, n.nspname AS schema_name, 'veil' AS schema_owner,
    NULL::VARCHAR AS default_character_set_catalog, NULL::VARCHAR AS default_character_set_schema,
    NULL::VARCHAR AS default_character_set_name, NULL::VARCHAR AS sql_path
FROM veil_pg_catalog.pg_namespace n, veil_pg_catalog.pg_database d;

CREATE VIEW veil_information_schema.tables AS
SELECT d.datname AS table_catalog, n.nspname AS table_schema, c.relname AS table_name,
    CASE WHEN c.relkind = 'v' THEN 'VIEW' ELSE 'BASE TABLE' END AS table_type,
    NULL::VARCHAR AS self_referencing_column_name, NULL::VARCHAR AS reference_generation,
    NULL::VARCHAR AS user_defined_type_catalog, NULL::VARCHAR AS user_defined_type_schema,
    NULL::VARCHAR AS user_defined_type_name, 'NO' AS is_insertable_into, 'NO' AS is_typed,
    NULL::VARCHAR AS commit_action
FROM veil_pg_catalog.pg_class c JOIN veil_pg_catalog.pg_namespace n ON n.oid = c.relnamespace,
    veil_pg_catalog.pg_database d;

CREATE VIEW veil_information_schema.columns AS
SELECT d.datname AS table_catalog, n.nspname AS table_schema, c.relname AS table_name,
    a.attname AS column_name, a.attnum::INTEGER AS ordinal_position, NULL::VARCHAR AS column_default,
    'YES' AS is_nullable,
    CASE WHEN t.typcategory = 'A' THEN 'ARRAY' ELSE veil_pg_catalog.format_type(t.oid, NULL) END AS data_type,
    NULL::INTEGER AS character_maximum_length,
    CASE WHEN t.typcategory = 'S' AND t.oid <> 19 THEN 1073741824 END AS character_octet_length,
    CASE t.oid WHEN 21 THEN 16 WHEN 23 THEN 32 WHEN 20 THEN 64 WHEN 700 THEN 24 WHEN 701 THEN 53 END
        AS numeric_precision,
    CASE WHEN t.oid IN (20, 21, 23, 700, 701) THEN 2 END AS numeric_precision_radix,
    CASE WHEN t.oid IN (20, 21, 23) THEN 0 END AS numeric_scale,
    CASE WHEN t.oid IN (1082, 1083, 1114, 1184, 1266) THEN CASE WHEN t.oid = 1082 THEN 0 ELSE 6 END END
        AS datetime_precision,
    NULL::VARCHAR AS interval_type, NULL::INTEGER AS interval_precision,
    NULL::VARCHAR AS character_set_catalog, NULL::VARCHAR AS character_set_schema,
    NULL::VARCHAR AS character_set_name, NULL::VARCHAR AS collation_catalog,
    NULL::VARCHAR AS collation_schema, NULL::VARCHAR AS collation_name, NULL::VARCHAR AS domain_catalog,
    NULL::VARCHAR AS domain_schema, NULL::VARCHAR AS domain_name, d.datname AS udt_catalog,
    'pg_catalog' AS udt_schema, t.typname AS udt_name, NULL::VARCHAR AS scope_catalog,
    NULL::VARCHAR AS scope_schema, NULL::VARCHAR AS scope_name, NULL::INTEGER AS maximum_cardinality,
    a.attnum::VARCHAR AS dtd_identifier, 'NO' AS is_self_referencing, 'NO' AS is_identity,
    NULL::VARCHAR AS identity_generation, 'NEVER' AS is_generated, NULL::VARCHAR AS generation_expression,
    'NO' AS is_updatable
FROM veil_pg_catalog.pg_attribute a
JOIN veil_pg_catalog.pg_class c ON c.oid = a.attrelid
JOIN veil_pg_catalog.pg_namespace n ON n.oid = c.relnamespace
JOIN veil_pg_catalog.pg_type t ON t.oid = a.atttypid,
    veil_pg_catalog.pg_database d;

CREATE VIEW veil_information_schema.views AS
SELECT table_catalog, table_schema, table_name, NULL::VARCHAR AS view_definition, 'NONE' AS check_option,
    'NO' AS is_updatable, 'NO' AS is_insertable_into, 'NO' AS is_trigger_updatable,
    'NO' AS is_trigger_deletable, 'NO' AS is_trigger_insertable_into
FROM veil_information_schema.tables WHERE table_type = 'VIEW';

CREATE TABLE veil_information_schema.table_constraints (
    constraint_catalog VARCHAR, constraint_schema VARCHAR, constraint_name VARCHAR,
    table_catalog VARCHAR, table_schema VARCHAR, table_name VARCHAR, constraint_type VARCHAR,
    is_deferrable VARCHAR, initially_deferred VARCHAR, enforced VARCHAR, nulls_distinct VARCHAR);
CREATE TABLE veil_information_schema.key_column_usage (
    constraint_catalog VARCHAR, constraint_schema VARCHAR, constraint_name VARCHAR,
    table_catalog VARCHAR, table_schema VARCHAR, table_name VARCHAR, column_name VARCHAR,
    ordinal_position INTEGER, position_in_unique_constraint INTEGER);
CREATE TABLE veil_information_schema.referential_constraints (
    constraint_catalog VARCHAR, constraint_schema VARCHAR, constraint_name VARCHAR,
    unique_constraint_catalog VARCHAR, unique_constraint_schema VARCHAR,
    unique_constraint_name VARCHAR, match_option VARCHAR, update_rule VARCHAR, delete_rule VARCHAR);
CREATE TABLE veil_information_schema.constraint_column_usage (
    table_catalog VARCHAR, table_schema VARCHAR, table_name VARCHAR, column_name VARCHAR,
    constraint_catalog VARCHAR, constraint_schema VARCHAR, constraint_name VARCHAR);
CREATE TABLE veil_information_schema.routines (
    specific_catalog VARCHAR, specific_schema VARCHAR, specific_name VARCHAR, routine_catalog VARCHAR,
    routine_schema VARCHAR, routine_name VARCHAR, routine_type VARCHAR, data_type VARCHAR,
    type_udt_name VARCHAR, routine_body VARCHAR, routine_definition VARCHAR, external_language VARCHAR,
    is_deterministic VARCHAR, security_type VARCHAR);
CREATE TABLE veil_information_schema.parameters (
    specific_catalog VARCHAR, specific_schema VARCHAR, specific_name VARCHAR,
    ordinal_position INTEGER, parameter_mode VARCHAR, parameter_name VARCHAR, data_type VARCHAR,
    udt_name VARCHAR);
CREATE TABLE veil_information_schema.sequences (
    sequence_catalog VARCHAR, sequence_schema VARCHAR, sequence_name VARCHAR, data_type VARCHAR,
    start_value VARCHAR, minimum_value VARCHAR, maximum_value VARCHAR, increment VARCHAR,
    cycle_option VARCHAR);
CREATE TABLE veil_information_schema.triggers (
    trigger_catalog VARCHAR, trigger_schema VARCHAR, trigger_name VARCHAR, event_manipulation VARCHAR,
    event_object_catalog VARCHAR, event_object_schema VARCHAR, event_object_table VARCHAR,
    action_statement VARCHAR, action_orientation VARCHAR, action_timing VARCHAR);
CREATE TABLE veil_information_schema.check_constraints (
    constraint_catalog VARCHAR, constraint_schema VARCHAR, constraint_name VARCHAR,
    check_clause VARCHAR);
"""

# Catalog functions, as DuckDB macros in veil_pg_catalog. What would describe the data (sizes) is NULL.
MACROS: Final = """
CREATE MACRO veil_pg_catalog.pg_get_userbyid(role) AS
    CASE WHEN role = 10 THEN 'veil' ELSE 'unknown (OID=' || role || ')' END;
CREATE MACRO veil_pg_catalog.pg_table_is_visible(relation) AS
    EXISTS (SELECT 1 FROM veil_shadow.relations r WHERE r.oid = relation AND r.relnamespace <> 13181);
CREATE MACRO veil_pg_catalog.pg_type_is_visible(type) AS true;
CREATE MACRO veil_pg_catalog.pg_function_is_visible(function) AS true;
CREATE MACRO veil_pg_catalog.pg_collation_is_visible(collation) AS true;
CREATE MACRO veil_pg_catalog.format_type(type, typemod) AS
    CASE
        WHEN type IS NULL THEN NULL
        WHEN type = 1043 AND typemod > 4 THEN 'character varying(' || (typemod - 4) || ')'
        WHEN type = 1042 AND typemod > 4 THEN 'character(' || (typemod - 4) || ')'
        WHEN type = 1700 AND typemod > 4
            THEN 'numeric(' || ((typemod - 4) >> 16) || ',' || ((typemod - 4) & 65535) || ')'
        ELSE coalesce((SELECT n.display FROM veil_shadow.type_names n WHERE n.oid = type), '???')
    END;
CREATE MACRO veil_pg_catalog.obj_description(object) AS
    (SELECT min(d.description) FROM veil_pg_catalog.pg_description d
      WHERE d.objoid = object AND d.objsubid = 0),
    (object, catalog) AS
    (SELECT min(d.description) FROM veil_pg_catalog.pg_description d
      JOIN veil_shadow.relations r ON r.oid = d.classoid
      WHERE d.objoid = object AND d.objsubid = 0 AND r.relname = catalog AND r.relnamespace = 11);
CREATE MACRO veil_pg_catalog.col_description(relation, number) AS
    (SELECT min(d.description) FROM veil_pg_catalog.pg_description d
      WHERE d.objoid = relation AND d.classoid = 1259 AND d.objsubid = number);
CREATE MACRO veil_pg_catalog.shobj_description(object, catalog) AS
    (SELECT min(d.description) FROM veil_pg_catalog.pg_shdescription d WHERE d.objoid = object);
CREATE MACRO veil_pg_catalog.pg_get_expr(expression, relation) AS NULL::VARCHAR,
    (expression, relation, pretty) AS NULL::VARCHAR;
CREATE MACRO veil_pg_catalog.pg_get_constraintdef(constraint_oid) AS NULL::VARCHAR,
    (constraint_oid, pretty) AS NULL::VARCHAR;
CREATE MACRO veil_pg_catalog.pg_get_indexdef(index_oid) AS NULL::VARCHAR,
    (index_oid, column_number, pretty) AS NULL::VARCHAR;
CREATE MACRO veil_pg_catalog.pg_get_viewdef(view_oid) AS NULL::VARCHAR,
    (view_oid, pretty) AS NULL::VARCHAR;
CREATE MACRO veil_pg_catalog.pg_get_triggerdef(trigger_oid) AS NULL::VARCHAR,
    (trigger_oid, pretty) AS NULL::VARCHAR;
CREATE MACRO veil_pg_catalog.pg_get_partkeydef(relation) AS NULL::VARCHAR;
CREATE MACRO veil_pg_catalog.pg_get_keywords() AS TABLE SELECT * FROM veil_shadow.keywords;
CREATE MACRO veil_pg_catalog.pg_get_statisticsobjdef_columns(statistics) AS NULL::VARCHAR;
CREATE MACRO veil_pg_catalog.pg_get_function_result(function) AS NULL::VARCHAR;
CREATE MACRO veil_pg_catalog.pg_get_function_arguments(function) AS NULL::VARCHAR;
CREATE MACRO veil_pg_catalog.pg_get_function_identity_arguments(function) AS NULL::VARCHAR;
CREATE MACRO veil_pg_catalog.pg_get_serial_sequence(relation, column_name) AS NULL::VARCHAR;
CREATE MACRO veil_pg_catalog.pg_relation_is_publishable(relation) AS false;
CREATE MACRO veil_pg_catalog.pg_table_size(relation) AS NULL::BIGINT;
CREATE MACRO veil_pg_catalog.pg_total_relation_size(relation) AS NULL::BIGINT;
CREATE MACRO veil_pg_catalog.pg_indexes_size(relation) AS NULL::BIGINT;
CREATE MACRO veil_pg_catalog.pg_relation_size(relation) AS NULL::BIGINT,
    (relation, fork) AS NULL::BIGINT;
CREATE MACRO veil_pg_catalog.pg_database_size(database) AS NULL::BIGINT;
CREATE MACRO veil_pg_catalog.pg_size_pretty(size) AS
    CASE WHEN size IS NULL THEN NULL ELSE size::VARCHAR || ' bytes' END;
CREATE MACRO veil_pg_catalog.pg_tablespace_location(tablespace) AS '';
CREATE MACRO veil_pg_catalog.pg_encoding_to_char(encoding) AS
    CASE WHEN encoding = 6 THEN 'UTF8' WHEN encoding = 0 THEN 'SQL_ASCII' ELSE '' END;
CREATE MACRO veil_pg_catalog.has_table_privilege(a, b) AS true, (a, b, c) AS true;
CREATE MACRO veil_pg_catalog.has_schema_privilege(a, b) AS true, (a, b, c) AS true;
CREATE MACRO veil_pg_catalog.has_database_privilege(a, b) AS true, (a, b, c) AS true;
CREATE MACRO veil_pg_catalog.has_column_privilege(a, b, c) AS true, (a, b, c, d) AS true;
CREATE MACRO veil_pg_catalog.has_any_column_privilege(a, b) AS true, (a, b, c) AS true;
CREATE MACRO veil_pg_catalog.has_function_privilege(a, b) AS true, (a, b, c) AS true;
CREATE MACRO veil_pg_catalog.has_sequence_privilege(a, b) AS true, (a, b, c) AS true;
CREATE MACRO veil_pg_catalog.pg_has_role(a, b) AS false, (a, b, c) AS false;
CREATE MACRO veil_pg_catalog.pg_is_in_recovery() AS false;
CREATE MACRO veil_pg_catalog.pg_backend_pid() AS 0;
CREATE MACRO veil_pg_catalog.array_upper(values, dimension) AS
    CASE WHEN values IS NULL OR len(values) = 0 OR dimension <> 1 THEN NULL ELSE len(values) END;
CREATE MACRO veil_pg_catalog.array_lower(values, dimension) AS
    CASE WHEN values IS NULL OR len(values) = 0 OR dimension <> 1 THEN NULL ELSE 1 END;
CREATE MACRO veil_pg_catalog.quote_ident(name) AS
    CASE WHEN regexp_full_match(name, '[a-z_][a-z0-9_$]*') THEN name
    ELSE '"' || replace(name, '"', '""') || '"' END;
CREATE MACRO veil_shadow.unquote(part) AS
    CASE WHEN starts_with(part, '"') THEN replace(part[2:-2], '""', '"') ELSE lower(part) END;
CREATE MACRO veil_pg_catalog.to_regclass(name) AS
    (SELECT min(r.oid) FROM veil_shadow.relations r JOIN veil_pg_catalog.pg_namespace n ON n.oid = r.relnamespace
      WHERE r.relname = veil_shadow.unquote(string_split(name, '.')[-1])
        AND CASE WHEN len(string_split(name, '.')) = 1 THEN r.relnamespace <> 13181
            ELSE n.nspname = veil_shadow.unquote(string_split(name, '.')[1]) END);
CREATE MACRO veil_pg_catalog.to_regtype(name) AS
    (SELECT min(t.oid) FROM veil_pg_catalog.pg_type t JOIN veil_shadow.type_names n ON n.oid = t.oid
      WHERE lower(string_split(name, '.')[-1]) IN (t.typname, n.display));
CREATE MACRO veil_pg_catalog.to_regnamespace(name) AS
    (SELECT min(n.oid) FROM veil_pg_catalog.pg_namespace n WHERE n.nspname = veil_shadow.unquote(name));
CREATE MACRO veil_pg_catalog.to_regrole(name) AS
    (SELECT min(a.oid) FROM veil_pg_catalog.pg_authid a WHERE a.rolname = veil_shadow.unquote(name));
CREATE MACRO veil_pg_catalog.regclass_name(relation) AS
    CASE WHEN relation = 0 THEN '-' ELSE coalesce(
        (SELECT min(CASE WHEN r.relnamespace = 13181 THEN 'information_schema.' ELSE '' END || r.relname)
          FROM veil_shadow.relations r WHERE r.oid = relation), relation::VARCHAR) END;
CREATE MACRO veil_pg_catalog.regtype_name(type) AS
    CASE WHEN type = 0 THEN '-' ELSE coalesce(
        (SELECT min(n.display) FROM veil_shadow.type_names n WHERE n.oid = type), type::VARCHAR) END;
CREATE MACRO veil_pg_catalog.regnamespace_name(namespace) AS
    CASE WHEN namespace = 0 THEN '-' ELSE coalesce(
        (SELECT min(n.nspname) FROM veil_pg_catalog.pg_namespace n WHERE n.oid = namespace),
        namespace::VARCHAR) END;
CREATE MACRO veil_pg_catalog.regrole_name(role) AS
    CASE WHEN role = 0 THEN '-' ELSE coalesce(
        (SELECT min(a.rolname) FROM veil_pg_catalog.pg_authid a WHERE a.oid = role), role::VARCHAR) END;
CREATE MACRO veil_pg_catalog.current_setting(setting_name) AS
    (SELECT min(s.setting) FROM veil_pg_catalog.pg_settings s WHERE lower(s.name) = lower(setting_name)),
    (setting_name, missing_ok) AS
    (SELECT min(s.setting) FROM veil_pg_catalog.pg_settings s WHERE lower(s.name) = lower(setting_name));
"""

# Functions that DuckDB has under PostgreSQL's name and meaning: catalog queries may call them as they are.
NATIVE_FUNCTIONS: Final = frozenset(
    {"generate_subscripts", "array_to_string", "array_length", "string_to_array", "to_char", "format"}
)
