"""The engines behind ``restore.api.Engine``: the PyTorch one is ``restorer.Restorer`` with what
loads and holds its models (``loader``, ``modelsets``, ``verify``, the GPEN family ``gpen_family``)
and its device loop (``device_stages``); ``existing`` is the one-shot command's check for results
already there. A second engine sits here beside it as its own module."""
