"""Integrations with distributed engines (Spark)."""
