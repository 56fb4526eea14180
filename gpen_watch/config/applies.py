"""When a changed setting takes effect in the running service: one table, by section or by
setting, which the settings page shows and the service's reload acts on (service.reload); a test
holds it to cover every setting."""

from __future__ import annotations

import enum
import re


class Applies(enum.Enum):
    """When a changed setting takes effect in the running service (its settings page says so, and
    the service's ``reload`` acts on it)."""

    AT_ONCE = "at once, for the next photo"
    NOTICES = "at once, from the next notice"
    WATCHER = "at once: the inboxes are watched again"
    DOWNLOADS = "at once: the downloads it allows start"
    WORKERS = "the workers restart (photos in flight finish or go back to the queue)"
    SERVICE = "after a restart of the service"


# When a change applies, by section (or by setting, where one differs from its section): the one
# table of it, tested to cover every setting.
APPLIES: dict[str, Applies] = {
    "watch": Applies.WATCHER,
    "output": Applies.AT_ONCE,
    "restore": Applies.WORKERS,
    # The model gate downloads what the new yes allows; nothing loaded changes.
    "restore.accepted_terms": Applies.DOWNLOADS,
    "workers": Applies.WORKERS,
    "cluster": Applies.SERVICE,
    "dashboard": Applies.SERVICE,
    "api": Applies.SERVICE,
    # Read by the API with each request.
    "api.cors_origins": Applies.AT_ONCE,
    "api.requests_per_minute": Applies.AT_ONCE,
    "api.mb_per_day": Applies.AT_ONCE,
    "api.max_file_mb": Applies.AT_ONCE,
    "api.uploads_at_once": Applies.AT_ONCE,
    "api.upload_idle_s": Applies.AT_ONCE,
    "api.min_upload_kbs": Applies.AT_ONCE,
    # The notice thread looks at the settings before each look at the status.
    "notify": Applies.NOTICES,
    # Read by the service loop before each claim, not by the workers: no restart.
    "workers.schedule": Applies.AT_ONCE,
    "workers.pause_on_battery": Applies.AT_ONCE,
}


def applies(name: str) -> Applies:
    """When a change of the dotted setting ``name`` takes effect. An inbox's own restore.* and
    output.* settings are read by the workers with each photo, but a changed profile may need
    other models loaded: the workers restart for restore.*, output.* applies at once."""
    match = re.fullmatch(r"watch\.inboxes(?:\[\d+\])?\.(restore|output)(?:\..+)?", name)
    if name in APPLIES:
        return APPLIES[name]
    return APPLIES[match[1] if match else name.partition(".")[0]]
