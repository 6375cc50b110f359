import pytest

from tests.live import LiveServer


@pytest.fixture
def servers(tmp_path):
    """Factory of ``LiveServer``s; every one is stopped and its database dropped afterwards."""
    started = []

    def _server(**kwargs):
        server = LiveServer(tmp_path, **kwargs)
        started.append(server)
        return server

    yield _server
    for server in started:
        server.stop()
        server.database.drop()
