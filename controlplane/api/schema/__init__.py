"""The OpenAPI schema's shared parts (drf-spectacular, served at ``/api/schema/``).

Each app's ``openapi`` describes its own endpoints with these parts and
hands the views one ``extend_schema_view`` decorator, so the views stay
"parse, call one domain function, serialise":

- ``parts``: how a request proves who it is (SPEC 10: the bearer token, and
  for reads the dashboards' staff session), and the field types the request
  serializers use that drf-spectacular cannot guess (strict JSON objects,
  lists and objects where null means "absent", one-value members);
- ``errors``: the error answers every endpoint can give (SPEC 1 and 10), each
  as its own component with its headers (``WWW-Authenticate``, ``Retry-After``);
- ``answers``: the columns every registered entry's list row starts with, the
  two shapes of a list answer, the figures of a history point (SPEC 9);
- ``operations``: a read, a write, an entry's history, ``/healthz``, and the
  query parameters used by more than one endpoint (``include_dead``,
  ``limit``/``offset``, ``range``).

Only the schema is described here: nothing in this package runs on a request.
"""
