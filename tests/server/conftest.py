import pytest


# Module scope so module-scoped async fixtures (a seeded run) share the tests' runner. A sync fixture
# calling anyio.run would fail whenever the plugin's runner is alive: it marks the thread as async.
@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"
