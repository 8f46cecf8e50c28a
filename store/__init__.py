"""The DuckDB store: schema, migrations, queries and retrieval (all SQL lives here).

Modules, one concept each: `records` (frozen dataclasses, one per table), `schema`
(migrations), `summary` (the derived `kernels` table), `connection` (opening files, lock
errors), `writer` (the single writer: batches -> Arrow -> one transaction), `reader`
(read-only queries), `queries` (best, lineage, show, stats), `retrieval` (examples for
agents), `signature` (op signatures of problems), `secrets` (redaction), `from_eval`
(rows from an EvalResult), `io` (Parquet export/import), `load_test` (the synthetic load).
Importing this package imports neither duckdb nor torch; the modules import duckdb.
"""
