"""The UI's in-process tests use tests/api's app: `api` on both backends (httpx over ASGI)."""

from tests.api.conftest import api, live_log_urls, services  # noqa: F401 (fixtures)
