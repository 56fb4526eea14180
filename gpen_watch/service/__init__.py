"""``gpen-watch run`` and its companions: the service loop that ties watch, journal, dispatch and
outbox together (``daemon``), holding the workers until their model files are there (``model_gate``),
and the local control channel behind ``status``/``pause``/``resume``/``stop`` (``control``). The
commands themselves are in gpen_watch.cli."""
