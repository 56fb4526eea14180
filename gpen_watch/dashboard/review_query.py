"""A Results view as its URL carries it (``?q=wedding&state=restored&sort=name&page=3``): read into
a ``ReviewFilter`` and written back, so a view can be bookmarked and a photo's page steps within
the view it was opened from.

Inboxes are named by their place in the settings (``inbox=2``), never by a path; a person by one
of their faces, a run id and the face's number on its page (``person=1234.0``: the People view's
tiles link so), which the dashboard resolves to that person's photos (``dashboard.people``). A
value this dashboard would not write (a bookmark from an older version, a hand-edited URL) is left
out of the view and said in ``ignored``; the page still answers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timedelta
from urllib.parse import urlencode

from multidict import MultiMapping

from gpen_watch.dashboard.api.names import batch_name_ok
from gpen_watch.journal.review import Outcome, Review, ReviewFilter, Sort
from gpen_watch.journal.states import MAX_STARS

# The query's names, in the order a URL lists them.
NAMES = (
    "q",
    "state",
    "inbox",
    "from",
    "to",
    "faces_min",
    "faces_max",
    "review",
    "stars",
    "batch",
    "identity",
    "person",
    "sort",
)
MAX_TEXT = 200
MAX_FACES = 10_000
# ``identity=flagged``: the photos with a face that may not look like the same person.
FLAGGED = "flagged"
_PERSON = re.compile(r"([0-9]{1,18})\.([0-9]{1,4})")


@dataclass(frozen=True)
class View:
    """A Results view: what the URL asked for, as the form shows it, and the filter it means."""

    values: dict[str, str]  # the accepted parameters, as text (the form's values)
    filter: ReviewFilter
    page: int = 1
    ignored: list[str] = field(default_factory=list)
    # ``person``: the run and face number that name them; the filter holds their photos once the
    # dashboard has found them (``dashboard.people``), and ``person_problem`` says why it could not.
    person: tuple[int, int] | None = None
    person_problem: str = ""

    def query(self, **change: str | int | None) -> str:
        """This view's query string with ``change`` applied (None drops a name); "" for none."""
        values = dict(self.values)
        if self.page > 1:
            values["page"] = str(self.page)
        for name, value in change.items():
            if value is None or value == "":
                values.pop(name, None)
            else:
                values[name] = str(value)
        ordered = [(n, values[n]) for n in (*NAMES, "page") if n in values]
        return ("?" + urlencode(ordered)) if ordered else ""

    def cleared(self) -> str:
        """The query of every photo in this view's order."""
        return View({k: v for k, v in self.values.items() if k == "sort"}, ReviewFilter()).query()

    @property
    def filtered(self) -> bool:
        """Whether anything narrows the view (a sort alone does not)."""
        return any(n in self.values for n in NAMES if n != "sort")


def parse(query: MultiMapping[str] | dict[str, str], inboxes: list[str]) -> View:
    """The view ``query`` names; ``inboxes``: the inbox folders, in the settings' order."""
    values: dict[str, str] = {}
    ignored: list[str] = []
    f = ReviewFilter()

    def take(name: str) -> str:
        return str(query.get(name, "")).strip()

    def bad(name: str, raw: str) -> None:
        ignored.append(f"{name}={raw[:40]}")

    text = take("q")[:MAX_TEXT]
    if text:
        values["q"], f = text, replace(f, text=text)
    if raw := take("state"):
        try:
            values["state"], f = raw, replace(f, outcome=Outcome(raw))
        except ValueError:
            bad("state", raw)
    if raw := take("review"):
        try:
            values["review"], f = raw, replace(f, review=Review(raw))
        except ValueError:
            bad("review", raw)
    if raw := take("sort"):
        try:
            values["sort"], f = raw, replace(f, sort=Sort(raw))
        except ValueError:
            bad("sort", raw)
    if raw := take("inbox"):
        if raw.isdigit() and 1 <= int(raw) <= len(inboxes):
            values["inbox"], f = raw, replace(f, inbox=inboxes[int(raw) - 1])
        else:
            bad("inbox", raw)
    if raw := take("from"):
        if (day := _day(raw)) is not None:
            values["from"], f = raw, replace(f, since=_midnight(day))
        else:
            bad("from", raw)
    if raw := take("to"):
        if (day := _day(raw)) is not None:
            values["to"], f = raw, replace(f, until=_midnight(day + timedelta(days=1)))  # the whole day
        else:
            bad("to", raw)
    if raw := take("faces_min"):
        if raw.isdigit() and int(raw) <= MAX_FACES:
            values["faces_min"], f = raw, replace(f, faces_min=int(raw))
        else:
            bad("faces_min", raw)
    if raw := take("faces_max"):
        if raw.isdigit() and int(raw) <= MAX_FACES:
            values["faces_max"], f = raw, replace(f, faces_max=int(raw))
        else:
            bad("faces_max", raw)
    if raw := take("stars"):
        if raw.isdigit() and 1 <= int(raw) <= MAX_STARS:
            values["stars"], f = raw, replace(f, stars_min=int(raw))
        else:
            bad("stars", raw)
    if raw := take("batch"):
        if batch_name_ok(raw):
            values["batch"], f = raw, replace(f, batch=raw)
        else:
            bad("batch", raw)
    if raw := take("identity"):
        if raw == FLAGGED:
            values["identity"], f = raw, replace(f, flagged=True)
        else:
            bad("identity", raw)
    person = None
    if raw := take("person"):
        if found := _PERSON.fullmatch(raw):
            values["person"], person = raw, (int(found[1]), int(found[2]))
        else:
            bad("person", raw)
    page_text = take("page")
    page = int(page_text) if page_text.isdigit() and len(page_text) < 9 else 1
    return View(values, f, max(1, page), ignored, person)


def _midnight(day: date) -> float:
    """Local midnight at the start of ``day``."""
    return datetime.combine(day, datetime.min.time()).timestamp()


def _day(text: str) -> date | None:
    try:
        return date.fromisoformat(text) if len(text) == 10 else None
    except ValueError:
        return None
