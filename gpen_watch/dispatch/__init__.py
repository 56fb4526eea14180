"""From journal to workers: one restorer subprocess per GPU (CPU workers without one), the jobs
handed to each, and what happens when a worker crashes, hangs or runs out of memory.

``devices`` chooses the worker slots, ``pool`` runs and supervises them from the service loop,
``worker_main`` is the worker process itself, ``protocol`` the messages between the two.
"""
