"""The pipeline stages a photo passes through: ``decode_stage``, ``detect``, ``align``, ``faces``
(which faces are restored), ``enhance``, ``upscale``, ``paste``, ``finish`` and ``views``, with
``staged.StagedPhoto``, the photo between them. Each stage runs the networks of ``restore.nets``
on what it is handed; which models are loaded, and when, is the engine's (``restore.engines``)."""
