"""The exit statuses of `gpen-watch` that scripts rely on (docs/getting-started.md, "Exit codes").

0 is done, 1 is a command that ran and did not get everything done (a photo failed, a request was
refused), 2 is a command refused before it began (bad arguments, settings, files). ``NOT_RUNNING``
is the one status of every command that talks to the service and finds none, `status` included,
as `systemctl status` gives 3 for a unit that is not running; `stop` alone ends 0 then, since what
it was asked for is already so.
"""

from __future__ import annotations

NOT_RUNNING = 3
