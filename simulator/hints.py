"""What to do about the failures a run saw: said in the live view while it runs and in the command's error.

A hint applies while nothing has been acknowledged: then every request fails the same way, and the
cause is the command line (the address, the token), not the Proxy's load.
"""

from simulator.stats import CONNECTION_ERROR, http_status

# What to do about a refusal the Proxy's auth gave (SPEC 10), by error kind.
AUTH_HINTS = {
    http_status(401): ("the Proxy wants a token (auth is on by default): pass --token with one of scope instance, "
                       "e.g. TOKEN=$(./fw manage create_token --scope instance --name simulator | tail -n 1)"),
    http_status(403): "the Proxy refused the token: it needs scope instance (and, if bound, to these instance ids)",
}
# Refusals of the first requests after which a run gives up: nothing will be accepted with these options.
GIVE_UP_AFTER_REFUSALS = 3


def unreachable(proxy_url):
    return (f"nothing answers at {proxy_url}: is the Proxy running there? (`./fw up` serves on port 8000 "
            "unless given --port; --proxy-url names another address)")


def hints(errors_by_kind, acknowledged, proxy_url):
    """The hints for failures of these kinds (a mapping of kind to count)."""
    found = [hint for kind, hint in AUTH_HINTS.items() if errors_by_kind.get(kind)]
    if not acknowledged and errors_by_kind.get(CONNECTION_ERROR):
        found.append(unreachable(proxy_url))
    return found


def refused_from_the_start(stats):
    """True once the first few requests were all refused by the Proxy's auth and none acknowledged."""
    return not stats.acknowledged() and sum(stats.errors()[kind] for kind in AUTH_HINTS) >= GIVE_UP_AFTER_REFUSALS
