"""The command line runner of tests/cli, for the interop test through `aiocommit commit`."""

from tests.cli.conftest import cli

__all__ = ["cli"]
