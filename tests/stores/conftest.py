"""Fixtures shared by the store tests."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import aiohttp
import pytest
from aioresponses import aioresponses
from aioresponses import core as aioresponses_core
from yarl import URL


class _Response(aiohttp.ClientResponse):
    """aioresponses 0.7.9 predates the ``stream_writer`` argument aiohttp 3.14 requires."""

    def __init__(self, method: str, url: URL, **kwargs: Any) -> None:
        kwargs.setdefault("stream_writer", SimpleNamespace(output_size=0))
        super().__init__(method, url, **kwargs)


@pytest.fixture
def mock_http(monkeypatch: pytest.MonkeyPatch) -> Iterator[aioresponses]:
    """aioresponses, for scripted edge cases an emulator cannot produce."""
    if "stream_writer" in inspect.signature(aiohttp.ClientResponse.__init__).parameters:
        monkeypatch.setattr(aioresponses_core, "ClientResponse", _Response)
    with aioresponses() as mock:
        yield mock
