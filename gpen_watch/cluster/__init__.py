"""Restorer workers on the studio's other machines, through a Ray cluster (optional extra `cluster`).

Ray does membership, GPU inventory and scheduling, warm actors, moving bytes and failure
detection; gpen-watch's journal stays the only source of truth and its outbox the only place
results land. ``token`` and ``raylib`` set Ray up (token authentication on, imported only in
cluster mode), ``commands`` wraps Ray's CLI (`gpen-watch cluster head/join/status/leave`, ``cli``),
``actor`` is the worker on a remote GPU, ``remote`` its stand-in on the service's side behind
``dispatch.worker.Worker``, and ``membership`` turns the cluster's nodes into pool workers.
"""
