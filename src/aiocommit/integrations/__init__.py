"""Integrations with distributed engines: Spark, Dask, Ray Data, and Arrow-based writers."""
