"""Test doubles that ship with the package: store emulators for tests and the stress harness."""
