"""Every private Django API the project uses is named in ``controlplane.private_django`` and exists in the
Django release it was checked against; on another release the test says which ones to read again."""

import importlib
import inspect
from pathlib import Path

import django
import pytest

from controlplane.private_django import CHECKED_ON, PRIVATE_APIS

ROOT = Path(__file__).resolve().parents[2]


def test_it_runs_on_the_django_release_its_private_apis_were_checked_against():
    names = "\n".join(f"  {module}.{attribute} ({user}: {why})" for module, attribute, user, why, *_ in PRIVATE_APIS)
    assert django.VERSION[:2] == CHECKED_ON, (
        f"Django {django.get_version()} is not {CHECKED_ON[0]}.{CHECKED_ON[1]}, the release these private APIs "
        f"were checked against; read each again, then update CHECKED_ON in controlplane/private_django.py:\n{names}")


@pytest.mark.parametrize("entry", PRIVATE_APIS, ids=[f"{entry[0]}.{entry[1]}" for entry in PRIVATE_APIS])
def test_each_private_api_still_exists_and_is_still_used(entry):
    module, attribute, user, why, *read = entry
    found = importlib.import_module(module)
    for part in attribute.split("."):
        assert hasattr(found, part), f"Django {django.get_version()} has no {module}.{attribute} ({user}: {why})"
        found = getattr(found, part)
    name = read[0] if read else attribute.split(".")[-1]
    if read:
        assert name in inspect.getsource(found), f"{module}.{attribute} no longer reads {name} ({user}: {why})"
    assert name in (ROOT / user).read_text(), f"{user} no longer uses {name}: drop it from the list"
