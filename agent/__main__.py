"""``python -m agent`` and the ``fleetwatch-agent`` console script."""

import logging
import sys

from agent.app import Agent, run_forever
from agent.config import load_settings


def main(argv=None) -> int:
    settings = load_settings(argv)
    if settings.engine_kv_events:
        from agent.engines.kv_subscriber import require_extra

        missing = require_extra()
        if missing:
            print(f"fleetwatch-agent: error: {missing}", file=sys.stderr)
            return 2
    logging.basicConfig(level=settings.log_level, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if settings.once:
        return Agent(settings).once()
    return run_forever(settings)


if __name__ == "__main__":
    sys.exit(main())
