"""The agent's Prometheus text reader gives what prometheus_client's parser gives, for the samples it reads."""

from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from agent.engines.exposition import ExpositionError, metric_prefix, parse_samples
from agent.engines.reading import SGLANG, VLLM

ENGINES = Path(__file__).parent / "data" / "engines"
CAPTURES = [("vllm-0.32.0-cpu-busy.prom", VLLM), ("vllm-0.32.0-cpu-idle.prom", VLLM),
            ("sglang-dp2-a.prom", SGLANG), ("sglang-dp2-b.prom", SGLANG)]


def as_set(samples):
    return {(name, tuple(sorted(labels.items())), repr(value)) for name, group in samples.items()
            for labels, value in group}


def reference(text, wanted):
    """The same samples read by prometheus_client, the kept parser."""
    return {(sample.name, tuple(sorted(sample.labels.items())), repr(sample.value))
            for family in text_string_to_metric_families(text) for sample in family.samples
            if sample.name in wanted}


@pytest.mark.parametrize(("capture", "sources"), CAPTURES)
def test_it_reads_the_real_captures_as_prometheus_client_does(capture, sources):
    text = (ENGINES / capture).read_text()
    ours = as_set(parse_samples(text, sources.wanted))
    assert ours == reference(text, sources.wanted)
    assert len(ours) > 50  # gauges, counters and every histogram bucket, not an empty agreement


def test_it_unescapes_label_values_and_keeps_braces_and_commas_inside_them():
    text = ('# HELP vllm:lora_requests_info Running stats on lora requests.\n'
            '# TYPE vllm:lora_requests_info gauge\n'
            'vllm:lora_requests_info{max_lora="2",running_lora_adapters="a,b}",'
            'waiting_lora_adapters="say \\"hi\\"\\\\n\\n"} 1.7e+09 1700000000000\n')
    wanted = {"vllm:lora_requests_info"}
    [(labels, value)] = parse_samples(text, wanted)["vllm:lora_requests_info"]
    assert labels == {"max_lora": "2", "running_lora_adapters": "a,b}", "waiting_lora_adapters": 'say "hi"\\n\n'}
    assert value == 1.7e9
    assert as_set(parse_samples(text, wanted)) == reference(text, wanted)


def test_it_skips_longer_names_that_start_like_a_wanted_one():
    text = "vllm:num_requests_running_total 3\nvllm:num_requests_running 4\n"
    assert parse_samples(text, {"vllm:num_requests_running"}) == {"vllm:num_requests_running": [({}, 4.0)]}


def test_it_reads_special_values():
    text = "a:x NaN\na:y +Inf\na:z -1.5e-3\n"
    samples = parse_samples(text, {"a:x", "a:y", "a:z"})
    assert samples["a:y"] == [({}, float("inf"))] and samples["a:z"] == [({}, -0.0015)]
    assert samples["a:x"][0][1] != samples["a:x"][0][1]  # NaN


@pytest.mark.parametrize("line", [
    'vllm:num_requests_running{engine="0" 4',
    'vllm:num_requests_running{engine=0} 4',
    'vllm:num_requests_running{engine="0"} four',
    'vllm:num_requests_running{engine="0"}4',
    'vllm:num_requests_running',
    'vllm:num_requests_running 1 2 3',
])
def test_it_refuses_a_malformed_wanted_line(line):
    with pytest.raises(ExpositionError):
        parse_samples(line + "\n", {"vllm:num_requests_running"})


def test_it_ignores_what_it_does_not_read():
    garbage = "<html><body>502 Bad Gateway</body></html>\nvllm is great\n"
    assert parse_samples(garbage, VLLM.wanted) == {}


def test_it_tells_the_engine_by_the_prefix_that_starts_a_line():
    assert metric_prefix("# HELP x\nsglang:token_usage 0.5\n", ["vllm:", "sglang:"]) == "sglang:"
    assert metric_prefix("vllm:num_requests_running 1\n", ["vllm:", "sglang:"]) == "vllm:"
    assert metric_prefix("# HELP vllm:x only a comment\nprocess_cpu_seconds_total 1\n", ["vllm:"]) is None
