"""Paging parameters of both list endpoints: bounded, answered in the envelope, never a 500 (found by fuzzing)."""

import pytest

pytestmark = pytest.mark.django_db

LISTS = ("/v1/instance/list", "/v1/proxy/list")
BIGGEST_DB_INT = 2**63 - 1


@pytest.mark.parametrize("path", LISTS)
@pytest.mark.parametrize("offset", [str(2**63), "99999999999999999999999", str(-(2**63))])
def test_it_refuses_an_offset_no_database_can_hold(api, path, offset):
    response = api.get(path, offset=offset)
    assert response.status_code == 400
    assert response.json() == {
        "ok": False, "error": "validation_error", "detail": {"offset": [f"Must be between 0 and {BIGGEST_DB_INT}."]},
    }


@pytest.mark.parametrize("path", LISTS)
def test_it_answers_an_empty_page_at_the_largest_offset(api, path):
    body = api.get(path, offset=str(BIGGEST_DB_INT), limit="5").json()
    assert (body["offset"], body["results"]) == (BIGGEST_DB_INT, [])


@pytest.mark.parametrize("path", LISTS)
def test_it_names_both_bounds_of_a_negative_offset(api, path):
    detail = api.get(path, offset="-1").json()["detail"]
    assert detail == {"offset": [f"Must be between 0 and {BIGGEST_DB_INT}."]}
    assert "None" not in str(detail)


NOT_AN_INTEGER = "Must be an integer (ASCII digits)."


@pytest.mark.parametrize("path", LISTS)
@pytest.mark.parametrize("limit, message", [("0", "Must be between 1 and 10000."), ("10001", "Must be between 1 and 10000."),
                                            ("ten", NOT_AN_INTEGER), ("５", NOT_AN_INTEGER), ("+5", NOT_AN_INTEGER),
                                            (" 5", NOT_AN_INTEGER), ("5 ", NOT_AN_INTEGER), ("1_0", NOT_AN_INTEGER),
                                            ("٥", NOT_AN_INTEGER), ("9" * 5000, NOT_AN_INTEGER)])
def test_it_bounds_the_limit(api, path, limit, message):
    response = api.get(path, limit=limit)
    assert response.status_code == 400
    assert response.json()["detail"] == {"limit": [message]}
