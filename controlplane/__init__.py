"""The shared base of both control planes (it imports neither app), in rooms that import only the rooms below:

- ``clock``, ``figures``, ``env``: now, how every figure is read, the environment's typed readers;
- ``endpoints``: what registers and heartbeats (liveness, the model bases, their managers and admin);
- ``series``: figures over time (SPEC 9) and a pool summary's figures;
- ``api``: the API base (viewsets, the hot path, errors, auth, tokens, rate limits, the schema's parts);
- ``pages``: the dashboards' base (access, layout, lists, charts, filters, the entry-dashboard kit);
- ``ops``: running it (``manage.py up``, its supervisor, roles, schedules, singletons, ``/metrics``);
- on top, the project's wiring: ``settings``, ``urls``, ``wsgi``, ``admin``, ``models``, the commands.
"""
