"""``proxy_app.tokenizers.store``'s reads (SPEC 16.2): complete sets, bytes, a marker of change, load errors."""

import hashlib

import pytest

from proxy_app.models import Instance, TokenizerOffer
from proxy_app.tokenizers import store
from tests.factories import T0

pytestmark = pytest.mark.django_db

OLD, NEW = b'{"old": 1}', b'{"new": 2}'


def digest(data):
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def instances(register_instance, frozen):
    register_instance("i-1")
    register_instance("i-2", host="10.0.0.2")


def offered(instance_id, data, now, model="tiny", upload=True):
    files = {"tokenizer.json": digest(data)}
    store.offer(instance_id, model, files, now)
    if upload:
        assert store.put_file(digest(data), data, now) in (store.Stored.STORED, store.Stored.ALREADY)
    return files


def test_each_model_gets_its_newest_offer_whose_files_are_all_stored(instances):
    old = offered("i-1", OLD, T0)
    assert store.agent_sets() == {"tiny": old}
    offered("i-2", NEW, T0 + 1, upload=False)  # newer, but its file is not stored yet
    assert store.agent_sets() == {"tiny": old}
    new = offered("i-2", NEW, T0 + 2)
    assert store.agent_sets() == {"tiny": new}


def test_file_bytes_of_an_unknown_digest_is_none(instances):
    assert store.file_bytes(digest(b"nothing")) is None


def test_the_marker_changes_with_each_offer_upload_and_removal_and_not_otherwise(instances):
    first = store.changed_marker()
    assert store.changed_marker() == first
    offered("i-1", OLD, T0, upload=False)
    after_offer = store.changed_marker()
    assert after_offer != first
    assert store.put_file(digest(OLD), OLD, T0) is store.Stored.STORED
    after_upload = store.changed_marker()
    assert after_upload != after_offer
    store.record_error("tiny", digest(OLD), "boom")  # the registry's own write: no reload for it
    assert store.changed_marker() == after_upload
    Instance.objects.filter(pk="i-1").delete()
    assert store.changed_marker() != after_upload


def test_a_load_error_is_kept_on_the_offers_of_that_tokenizer_and_cleared_by_a_new_offer(instances):
    offered("i-1", OLD, T0)
    offered("i-2", NEW, T0, model="other")
    store.record_error("tiny", digest(OLD), "tokenizer.json: expected value at line 1")
    assert dict(TokenizerOffer.objects.values_list("model", "load_error")) == {
        "tiny": "tokenizer.json: expected value at line 1", "other": None}
    offered("i-1", OLD, T0 + 1)
    assert TokenizerOffer.objects.get(model="tiny").load_error is None
    store.record_error("tiny", digest(OLD), "x" * 5000)
    assert len(TokenizerOffer.objects.get(model="tiny").load_error) == store.MAX_ERROR_LENGTH
