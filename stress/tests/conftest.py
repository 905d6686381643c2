"""The harness's tests run on the library tests' store and emulator fixtures, under the
same rules (an emulator starts only in a test marked ``emulator``)."""

from tests.conftest import *  # noqa: F403
from tests.conftest import (  # hooks are not picked up by the star import's linters
    pytest_collection_modifyitems,
    pytest_configure,
    pytest_runtest_protocol,
)

__all__ = ["pytest_collection_modifyitems", "pytest_configure", "pytest_runtest_protocol"]
