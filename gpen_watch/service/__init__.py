"""``gpen-watch run`` and its companions: the service loop that ties watch, journal, dispatch and
outbox together (``daemon``), holding the workers until their model files are there (``model_gate``),
the local control channel behind ``status``/``pause``/``resume``/``stop`` (``control``), and start at
login (``login_cli``)."""
