"""Fleetwatch host agent: samples one host and reports it to a Proxy (SPEC 2).

Standard library, psutil and nvidia-ml-py only (pyzmq and msgpack with the
``kv-events`` extra); never Django, so the agent installs alone on GPU hosts.
Every request to the Proxy goes through ``agent.proxy_client``.
"""

# Kept in step with pyproject.toml by hand: reading package metadata at start
# would fail for a source checkout that was never pip-installed.
AGENT_VERSION = "0.1.0"
