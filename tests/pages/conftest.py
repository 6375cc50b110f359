"""Actors of the dashboard tests: the Proxy's and the Scheduler's clients, a staff user, page readers.

Pages are read through Django's test client by a staff user (``page``; who
else may look is ``test_access``'s subject), with time frozen (``frozen``);
instances and proxies get into the database the way they do in production,
through the API (the actors of ``tests/proxy`` and ``tests/scheduler``).
"""

import re
from html import unescape
from typing import NamedTuple

import pytest

from tests.proxy.conftest import (  # noqa: F401
    cpu_host,
    gpu_host,
    instance_heartbeat,
    listed_instances,
    register_instance,
    report,
)
from tests.scheduler.conftest import proxy_heartbeat, register_proxy  # noqa: F401


@pytest.fixture
def auth_on(settings):
    settings.FLEETWATCH_AUTH = True
    return settings


@pytest.fixture
def auth_off(settings):
    settings.FLEETWATCH_AUTH = False
    return settings


@pytest.fixture
def staff(admin_client):
    """A logged-in staff user's browser."""
    return admin_client


@pytest.fixture
def page(staff):
    """GET a page (or fragment) as staff and return its HTML; fails unless the status is ``status``."""

    def _page(path, status=200, user_client=None, **headers):
        response = (user_client or staff).get(path, headers=headers)
        assert response.status_code == status, (response.status_code, response.content[:2000])
        return response.content.decode()

    return _page


def by_testid(html, testid):
    """The text inside every element marked ``data-testid="<testid>"`` (tags stripped), in page order."""
    texts = []
    for match in re.finditer(rf'<(\w+)[^>]*data-testid="{re.escape(testid)}"[^>]*>', html):
        tag, start = match.group(1), match.end()
        depth, position = 1, start
        pattern = re.compile(rf"<(/?){tag}\b[^>]*>")
        for inner in pattern.finditer(html, start):
            depth += -1 if inner.group(1) else 1
            if depth == 0:
                position = inner.start()
                break
        texts.append(text_of(html[start:position]))
    return texts


INLINE_TAGS = r"(?:span|a|time|code|strong|em|b|i|abbr)"


def text_of(html):
    """Visible text of an HTML snippet as a reader sees it: inline tags vanish, others separate words."""
    html = re.sub(rf"</?{INLINE_TAGS}\b[^>]*>", "", html)
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())


class Row(NamedTuple):
    classes: str  # its class attribute
    text: str  # its cells' text, as text_of reads it
    cells: str  # its inner HTML


def row_ids(html, attribute):
    """The ids of a table's rows, in order: the values of ``attribute`` (``data-instance-id``, ``data-candidate``)."""
    return re.findall(rf'<tr\b[^>]*\s{attribute}="([^"]+)"', html)


def row_of(html, row_id, attribute):
    """The table row whose ``attribute`` is ``row_id``, as a ``Row``."""
    match = re.search(rf'<tr\b((?=[^>]*\s{attribute}="{re.escape(row_id)}")[^>]*)>(.*?)</tr>', html, re.S)
    assert match, row_id
    classes = re.search(r'\sclass="([^"]*)"', match.group(1))
    return Row(classes.group(1) if classes else "", text_of(match.group(2)), match.group(2))


def one(html, testid):
    texts = by_testid(html, testid)
    assert len(texts) == 1, (testid, texts)
    return texts[0]


@pytest.fixture(autouse=True)
def var_dir(settings, tmp_path):
    """Each test's own VAR_DIR, where the local agent control keeps its state (and a fast password hash)."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.VAR_DIR = tmp_path / "var"
    return settings.VAR_DIR
