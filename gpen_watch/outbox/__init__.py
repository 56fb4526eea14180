"""Where results land: output names (``naming``), the durable commit of a worker's output
(``commit``), what becomes of originals (``originals``, ``moves``), failure records in failed/
(``failed``) and start-up recovery after a crash (``recovery``)."""
