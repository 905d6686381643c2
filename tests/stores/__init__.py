"""Store adapter tests."""
