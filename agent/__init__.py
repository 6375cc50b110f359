"""Fleetwatch host agent: samples one host and reports it to a Proxy (SPEC 2).

Standard library, psutil, nvidia-ml-py and requests only; never Django, so the
agent installs alone on GPU hosts.
"""

# Kept in step with pyproject.toml by hand: reading package metadata at start
# would fail for a source checkout that was never pip-installed.
AGENT_VERSION = "0.1.0"
