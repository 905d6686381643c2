"""The harness's tests run on the library tests' store and emulator fixtures, under the
same tiers (tests/tiers.py, loaded by the repository's conftest.py)."""

from tests.conftest import *  # noqa: F403
