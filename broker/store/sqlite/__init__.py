"""The SQLite store: schema, opening and checks, group-commit writer, loading, stream pages."""
