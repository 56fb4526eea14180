"""Messages between the service (parent) and a restorer worker, over a multiprocessing Pipe.

Each message is a tuple whose first item is its kind; the payloads are plain picklable objects
(FileJob, FileResult, dicts), so neither side needs the other's code beyond this module.

parent -> worker
    (JOBS, [(key, FileJob), ...])   more images to restore
    (STOP,)                          finish the images already started, hand back the rest, exit

worker -> parent
    (READY, info)                    models loaded; info: pid, device, threads
    (TOOK, key)                      the restorer started on this image (blame for a crash is laid here)
    (RESULT, key, FileResult)
    (HEARTBEAT, busy)                every few seconds from a side thread: the process is alive
    (LOG, levelno, logger, message)  the worker's log records, written by the parent's handlers
    (FATAL, kind, message)           the worker cannot go on and is about to exit; kind is one of
                                     FATAL_MODEL (weights missing/corrupt: restarting will not help),
                                     FATAL_DEVICE (CUDA failed), FATAL_CRASH (anything else)
    (BYE, [key, ...])                stopping: these images were never started
"""

from __future__ import annotations

JOBS = "jobs"
STOP = "stop"

READY = "ready"
TOOK = "took"
RESULT = "result"
HEARTBEAT = "heartbeat"
LOG = "log"
FATAL = "fatal"
BYE = "bye"

FATAL_MODEL = "model"
FATAL_DEVICE = "device"
FATAL_CRASH = "crash"

# Exit codes of a worker that reported FATAL (anything else is a crash seen from outside).
EXIT_MODEL = 3
EXIT_DEVICE = 4
EXIT_CRASH = 5

# Default factory for the restorer inside a worker: "module:attribute", called as
# factory(restore_cfg, device, threads=threads). Tests and benchmarks substitute a fake one.
DEFAULT_FACTORY = "gpen_watch.restore.restorer:Restorer"
