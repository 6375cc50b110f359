"""How another program starts this agent on its host (``manage.py up``, the Proxy's ``/agent/`` page).

The command line, the address it serves on unless told otherwise and the
variable its token goes in are the agent's own, so they are written here,
beside the flags they name (``agent.config``); a launcher reads an address
the way the agent reads ``--listen`` (``agent.config.parse_listen``). The
token goes in the environment: on the command line it would show in ``ps``.
"""

import sys

from agent.config import ENV_PREFIX, Settings

DEFAULT_HOST, DEFAULT_PORT = Settings.listen_host, Settings.listen_port
DEFAULT_LISTEN = f"{DEFAULT_HOST}:{DEFAULT_PORT}"
TOKEN_VARIABLE = f"{ENV_PREFIX}TOKEN"


def command_line(proxy_url, listen, python=sys.executable):
    """``python -m agent`` reporting to ``proxy_url`` and serving its endpoints on ``listen``."""
    return [python, "-m", "agent", "--proxy-url", proxy_url, "--listen", listen]
