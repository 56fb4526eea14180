"""The dashboard: a local web page of the running service (the queue, the workers, every result).

``server`` runs it beside the service; ``guard`` and ``access`` decide who may use it; ``site``
and ``live`` are its pages; ``views`` reads the previews the workers write.
"""
