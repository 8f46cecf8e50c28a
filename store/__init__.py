"""The DuckDB store: schema, migrations, queries and retrieval (all SQL lives here)."""
