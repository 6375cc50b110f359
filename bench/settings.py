"""Benchmark deployment: the real settings plus one bare view to compare against."""

from controlplane.settings import *  # noqa: F401,F403

ROOT_URLCONF = "bench.urls"
