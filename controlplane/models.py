"""Where Django finds this app's one stored model, the API token; the model bases live in the rooms
(``controlplane.endpoints.models``, ``controlplane.series.models``)."""

from controlplane.api.tokens import ApiToken  # noqa: F401
