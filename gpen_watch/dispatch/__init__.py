"""From journal to workers: one restorer subprocess per GPU (CPU workers without one), the jobs
handed to each, and what happens when a worker crashes, hangs or runs out of memory.

``devices`` chooses the worker slots; ``pool`` runs and supervises them from the service loop,
carrying out what the pure fault ``policy`` decides (its per-worker ``records``); ``worker`` is the
interface every worker implements, ``local`` the subprocess one and ``worker_main`` the process
itself; ``protocol`` holds the typed messages between them, ``tasks`` what the pool is handed and
hands back.
"""
