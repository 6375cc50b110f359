"""Offering the served models' tokenizer files to the Proxy (SPEC 16.2 (b)), against the fake Proxy over HTTP."""

import hashlib

import pytest

from agent.app import Agent
from agent.config import Settings
from agent.proxy_client import ProxyClient
from agent.reporter import Backoff
from agent.tokenizer_offer import TokenizerOfferer, model_directory, served_bases

TOKENIZER = b'{"version": "1.0", "model": {"type": "BPE", "vocab": {}}}'
CONFIG = b'{"chat_template": "{% for m in messages %}{{ m.content }}{% endfor %}"}'


def sha(data):
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def model_dir(tmp_path):
    directory = tmp_path / "tiny"
    directory.mkdir()
    (directory / "tokenizer.json").write_bytes(TOKENIZER)
    (directory / "tokenizer_config.json").write_bytes(CONFIG)
    (directory / "model.safetensors").write_bytes(b"weights, never offered")
    (directory / "vocab.txt").write_bytes(b"not a file the Proxy takes")
    return directory


class Setup:
    """A TokenizerOfferer stepped by hand: what the engines serve and how often the reporter registered."""

    def __init__(self, proxy, clock, environ=None):
        self.served = [None]
        self.registrations = 0
        self.unknown = 0
        self.offerer = TokenizerOfferer(
            ProxyClient(proxy.url, timeout_s=5), lambda: self.served, lambda: self.registrations, lambda: "i-1",
            on_unknown_instance=self.forgotten, environ=environ or {}, clock=clock.s,
            backoff=Backoff(rand=lambda: 0.0))

    def forgotten(self):
        self.unknown += 1


@pytest.fixture
def setup(fake_proxy, clock):
    fake_proxy.known.add("i-1")
    made = Setup(fake_proxy, clock)
    yield made
    made.offerer.close()


def test_it_offers_after_registering_and_uploads_only_the_missing_tokenizer_files(setup, fake_proxy, model_dir):
    setup.served = [[{"id": "tiny", "root": str(model_dir), "parent": None},
                     {"id": "sql-lora", "root": "/adapters/sql", "parent": "tiny"}]]
    setup.offerer.step()
    assert fake_proxy.bodies("/v1/instance/tokenizer") == []  # not registered yet
    setup.registrations = 1
    setup.offerer.step()
    [offer] = fake_proxy.bodies("/v1/instance/tokenizer")
    assert offer == {"instance_id": "i-1", "model": "tiny",
                     "files": {"tokenizer.json": sha(TOKENIZER), "tokenizer_config.json": sha(CONFIG)}}
    assert fake_proxy.tokenizer_files == {sha(TOKENIZER): TOKENIZER, sha(CONFIG): CONFIG}
    setup.offerer.step()
    assert len(fake_proxy.bodies("/v1/instance/tokenizer")) == 1  # nothing changed: nothing sent


def test_it_offers_again_when_served_changes_and_after_the_proxy_forgot(setup, fake_proxy, model_dir):
    setup.registrations = 1
    setup.served = [[{"id": "tiny", "root": str(model_dir), "parent": None}]]
    setup.offerer.step()
    assert setup.offerer.uploads == 2
    setup.served = [[{"id": "tiny", "root": str(model_dir), "parent": None},
                     {"id": "tiny-2", "root": str(model_dir), "parent": None}]]
    setup.offerer.step()
    assert [body["model"] for body in fake_proxy.bodies("/v1/instance/tokenizer")] == ["tiny", "tiny", "tiny-2"]
    assert setup.offerer.uploads == 2  # the Proxy held both files already
    fake_proxy.forget()
    fake_proxy.known.add("i-1")
    setup.registrations = 2  # the reporter registered again
    setup.offerer.step()
    assert setup.offerer.uploads == 4 and len(fake_proxy.tokenizer_files) == 2


def test_an_unknown_instance_asks_the_reporter_to_register_and_retries_later(setup, fake_proxy, model_dir, clock):
    fake_proxy.known.clear()
    setup.registrations = 1
    setup.served = [[{"id": "tiny", "root": str(model_dir), "parent": None}]]
    wait = setup.offerer.step()
    assert setup.unknown == 1 and wait > 0 and fake_proxy.tokenizer_files == {}
    fake_proxy.known.add("i-1")
    clock.advance(int(wait * 1000) + 1)
    setup.offerer.step()
    assert len(fake_proxy.tokenizer_files) == 2


def test_a_model_without_tokenizer_files_or_a_directory_here_is_not_offered(setup, fake_proxy, tmp_path):
    setup.registrations = 1
    setup.served = [[{"id": "empty", "root": str(tmp_path), "parent": None},
                     {"id": "elsewhere", "root": "/no/such/dir", "parent": None}], None]
    setup.offerer.step()
    assert fake_proxy.bodies("/v1/instance/tokenizer") == []


def test_a_hub_name_is_found_in_the_hugging_face_cache(tmp_path, model_dir):
    repo = tmp_path / "hub" / "models--acme--tiny"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("abc123\n")
    (repo / "snapshots").mkdir()
    model_dir.rename(repo / "snapshots" / "abc123")
    snapshot = repo / "snapshots" / "abc123"
    assert model_directory("acme/tiny", {"HF_HUB_CACHE": str(tmp_path / "hub")}) == snapshot
    assert model_directory("acme/tiny", {"HF_HOME": str(tmp_path)}) == snapshot
    assert model_directory("acme/other", {"HF_HUB_CACHE": str(tmp_path / "hub")}) is None
    assert model_directory("../acme/tiny", {"HF_HUB_CACHE": str(tmp_path / "hub")}) is None
    assert model_directory("acme/../../etc", {"HF_HUB_CACHE": str(tmp_path / "hub")}) is None
    assert model_directory(None, {}) is None


def test_only_base_models_with_a_root_are_candidates():
    served = [[{"id": "tiny", "root": "/m/tiny", "parent": None}, {"id": "lora", "root": "/a", "parent": "tiny"},
               {"id": "bare", "root": None, "parent": None}], None]
    assert served_bases(served) == {"tiny": "/m/tiny"}


def test_a_running_agent_offers_its_engines_tokenizer_to_the_proxy(fake_proxy, two_gpus, source, busy_vllm,
                                                                   model_dir):
    busy_vllm.models = [{"id": "tiny", "root": str(model_dir), "parent": None}]
    settings = Settings(listen_port=0, proxy_url=fake_proxy.url, sample_interval_ms=50, report_interval_ms=50,
                        engine_urls=(busy_vllm.url,))
    agent = Agent(settings, nvml=two_gpus, source=source)
    agent.start()
    try:
        assert fake_proxy.wait_for(lambda proxy: len(proxy.tokenizer_files) == 2, 20)
        [offer] = fake_proxy.bodies("/v1/instance/tokenizer")
        assert offer["model"] == "tiny" and offer["instance_id"] == agent.builder.instance_id
    finally:
        agent.stop()
