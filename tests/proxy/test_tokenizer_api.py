"""``POST /v1/instance/tokenizer`` and ``PUT /v1/instance/tokenizer/<sha256>`` (SPEC 16.2 (b)), on both databases."""

import hashlib

import pytest

from proxy_app.models import TokenizerFile, TokenizerOffer
from proxy_app.tokenizers import store

pytestmark = [pytest.mark.django_db, pytest.mark.both_entry_points]

TOKENIZER = b'{"version": "1.0", "model": {"type": "BPE"}}'
CONFIG = b'{"chat_template": "{{ messages }}", "add_bos_token": true}'
DIGEST, CONFIG_DIGEST = hashlib.sha256(TOKENIZER).hexdigest(), hashlib.sha256(CONFIG).hexdigest()
FILES = {"tokenizer.json": DIGEST, "tokenizer_config.json": CONFIG_DIGEST}


def offer(api, instance_id="i-1", model="tiny", files=FILES):
    return api.post("/v1/instance/tokenizer", {"instance_id": instance_id, "model": model, "files": files})


def upload(api, digest, data, content_type="application/octet-stream", scope="instance", **extra):
    path = f"/v1/instance/tokenizer/{digest}"
    auth = {"HTTP_AUTHORIZATION": f"Bearer {api.token(scope)}"} if scope else {}
    return api.client.put(path, data=data, content_type=content_type, **auth, **extra)


def test_an_offer_names_the_missing_files_and_uploads_make_the_set_complete(api, register_instance, frozen):
    register_instance("i-1")
    response = offer(api)
    assert response.status_code == 200
    assert response.json() == {"ok": True, "missing": sorted([DIGEST, CONFIG_DIGEST])}
    assert store.agent_sets() == {}  # nothing stored yet: no complete set
    assert upload(api, DIGEST, TOKENIZER).json() == {"ok": True}
    assert offer(api).json() == {"ok": True, "missing": [CONFIG_DIGEST]}
    assert upload(api, CONFIG_DIGEST, CONFIG).status_code == 200
    assert offer(api).json() == {"ok": True, "missing": []}
    assert store.agent_sets() == {"tiny": FILES}
    assert store.file_bytes(DIGEST) == TOKENIZER


def test_a_file_is_stored_once_by_content(api, register_instance, frozen):
    register_instance("i-1")
    register_instance("i-2", host="10.0.0.2")
    offer(api, "i-1")
    offer(api, "i-2", model="tiny-copy")
    assert upload(api, DIGEST, TOKENIZER).status_code == 200
    assert upload(api, DIGEST, TOKENIZER).json() == {"ok": True}  # again: already stored
    assert TokenizerFile.objects.count() == 1
    assert offer(api, "i-2", model="tiny-copy").json()["missing"] == [CONFIG_DIGEST]


def test_an_unknown_instance_is_told_so_and_nothing_is_stored(api):
    response = offer(api, "nobody")
    assert (response.status_code, response.json()) == (200, {"ok": False, "error": "unknown_instance"})
    assert not TokenizerOffer.objects.exists()


@pytest.mark.parametrize("files, field", [
    ({"model.safetensors": DIGEST}, "files"),
    ({"../tokenizer.json": DIGEST}, "files"),
    ({"tokenizer.json": DIGEST.upper()}, "files"),
    ({"tokenizer.json": DIGEST[:-1]}, "files"),
    ({"tokenizer.json": 7}, "files"),
    ({}, "files"),
    (["tokenizer.json"], "files"),
])
def test_a_name_outside_the_list_or_a_bad_digest_is_a_400_and_nothing_is_stored(api, register_instance, files,
                                                                                 field):
    register_instance("i-1")
    response = offer(api, files=files)
    assert response.status_code == 400
    assert response.json()["error"] == "validation_error" and field in response.json()["detail"]
    assert not TokenizerOffer.objects.exists()


def test_an_upload_whose_bytes_do_not_match_the_digest_is_a_400_and_nothing_is_stored(api, register_instance):
    register_instance("i-1")
    offer(api)
    response = upload(api, DIGEST, TOKENIZER + b" ")
    assert response.status_code == 400 and response.json()["error"] == "validation_error"
    assert not TokenizerFile.objects.exists()


def test_a_path_that_is_no_digest_is_a_400_and_a_digest_nobody_offered_a_404(api, register_instance):
    register_instance("i-1")
    response = upload(api, DIGEST, TOKENIZER)
    assert (response.status_code, response.json()["error"]) == (404, "not_found")
    offer(api)
    assert upload(api, "not-a-digest", TOKENIZER).status_code == 400
    assert upload(api, DIGEST.upper(), TOKENIZER).status_code == 400
    assert not TokenizerFile.objects.exists()


def test_an_upload_over_64_mib_is_a_413_before_it_is_read(api, register_instance):
    register_instance("i-1")
    offer(api)
    response = upload(api, DIGEST, b"x" * (64 * 1024 * 1024 + 1))
    assert response.status_code == 413 and response.json()["error"] == "payload_too_large"
    assert not TokenizerFile.objects.exists()


def test_another_scopes_token_is_a_403_and_none_a_401(api, register_instance):
    register_instance("i-1")
    offer(api)
    assert upload(api, DIGEST, TOKENIZER, scope="read").status_code == 403
    assert upload(api, DIGEST, TOKENIZER, scope="route").status_code == 403
    assert upload(api, DIGEST, TOKENIZER, scope=None).status_code == 401
    response = api.post("/v1/instance/tokenizer", {"instance_id": "i-1", "model": "tiny", "files": FILES},
                        HTTP_AUTHORIZATION=f"Bearer {api.token('read')}")
    assert response.status_code == 403
    assert not TokenizerFile.objects.exists()


def test_an_upload_that_is_not_octet_stream_is_a_415(api, register_instance):
    register_instance("i-1")
    offer(api)
    assert upload(api, DIGEST, TOKENIZER, content_type="application/json").status_code == 415


def test_switched_off_an_offer_misses_nothing_and_nothing_is_stored(api, register_instance, settings):
    settings.FLEETWATCH_TOKENIZERS_FROM_AGENTS = False
    register_instance("i-1")
    assert offer(api).json() == {"ok": True, "missing": []}
    assert upload(api, DIGEST, TOKENIZER).status_code == 404  # no offer was stored to name it
    assert not TokenizerOffer.objects.exists() and not TokenizerFile.objects.exists()
