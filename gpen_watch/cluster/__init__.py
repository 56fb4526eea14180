"""Restorer workers on the studio's other machines, through a Ray cluster (optional extra `cluster`).

Ray does membership, GPU inventory and scheduling, warm actors, moving bytes and failure
detection; gpen-watch's journal stays the only source of truth and its outbox the only place
results land. The service never imports ray: ``membership`` (nodes -> pool workers) drives a
bridge process (``bridge``, its child side ``bridge_main``, messages in ``link``) that is the Ray
driver, so a head that goes away ends the bridge, not the service. In the bridge, ``remote`` is
one remote worker's Ray side and ``actor`` the warm restorer on the node. ``token`` and
``raylib`` set Ray up (token authentication on, imported only where Ray runs), ``head`` probes
the head before Ray is given its address, and ``started`` remembers the Ray node `gpen-watch
cluster head/join` started, for `leave` (the commands are gpen_watch.cli.cluster).
"""
