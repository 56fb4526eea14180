"""The Settings page: every setting as a form, saved into the service's own TOML file.

What the page saves is the file's text with the form's values set (config.edit, through tomlkit,
so the user's comments and order stay); that text is read by ``config.from_text``, the very path
``config.load`` takes, before anything is written, so a bad value gets the sentence the file would
get. Then the file is replaced in one rename and the service is told to read it again (the
``reload`` control command, as the CLI's control channel would send it).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import re
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from aiohttp import web

from gpen_watch import config
from gpen_watch.base.errors import ConfigError, OutputError
from gpen_watch.base.fsutil import write_text_atomic
from gpen_watch.catalog import licences
from gpen_watch.catalog.registry import has_fidelity
from gpen_watch.config import Config, edit, short_path
from gpen_watch.config.applies import applies
from gpen_watch.config.docs import DESCRIPTIONS
from gpen_watch.config.source import ConfigSource
from gpen_watch.dashboard import model_terms, setting_labels
from gpen_watch.dashboard.remote_access import remote_access
from gpen_watch.dashboard.site import Site
from gpen_watch.modelstore import answers
from gpen_watch.service.folders import check_service_folders

log = logging.getLogger(__name__)

SECTIONS = ("watch", "restore", "output", "workers", "cluster", "dashboard", "api", "notify")
# A form has about a hundred fields; more is no form of this page.
MAX_FIELDS = 1000
OVERRIDDEN = (
    "The service's command line sets this to {value}: that wins over the file until the service "
    "is started without it."
)


@dataclass(frozen=True)
class Row:
    """One setting on the page."""

    name: str  # the form's field, named as --set names it
    key: str  # what the page shows
    note: str
    value: str  # the file's value ("" blank)
    default: str
    choices: tuple[str, ...] = ()  # a select's options, else a text field
    overridden: str = ""
    inherits: bool = False  # an inbox's own: blank follows the global setting (``default`` says how)
    invalid: bool = False  # the refusal's sentence names it
    label: str = ""  # what a person calls it ("Strength"), shown beside the key
    # When a change applies, where it differs from what its section's heading says ("" if not).
    applies: str = ""

    @property
    def search(self) -> str:
        """What the page's filter box matches against."""
        return f"{self.label} {self.key} {self.note}".lower()


@dataclass(frozen=True)
class Section:
    title: str
    applies: str
    rows: list[Row]
    heading: str = ""
    line: str = ""


@dataclass(frozen=True)
class InboxForm:
    index: int
    path: str
    rows: list[Row]  # its folder, recursive and outbox
    profile: list[Row]  # its own restore.* and output.*
    overridden: str

    @property
    def own(self) -> int:
        """How many settings of its own it has."""
        return sum(1 for row in self.profile if row.value)


@dataclass(frozen=True)
class Shown:
    """What a form showed last: the values sent, kept on a refusal so that nothing typed is lost,
    and the refusal's sentence."""

    sent: dict[str, str] = field(default_factory=dict)
    error: str = ""

    def value(self, name: str, saved: str) -> str:
        return self.sent.get(name, saved)

    def names(self, key: str, inbox: int | None = None) -> bool:
        """Whether the sentence is about this setting (an inbox's: that inbox's)."""
        about_inbox = re.search(r"watch\.inboxes\[(\d+)\]", self.error)
        if inbox is None:
            return about_inbox is None and re.search(rf"(^|: ){re.escape(key)}: ", self.error) is not None
        return about_inbox is not None and int(about_inbox[1]) == inbox and f" {key}: " in self.error


@dataclass
class SettingsPage:
    site: Site
    source: ConfigSource | None
    current: Callable[[], Config]  # the service's settings in effect now
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def routes(self) -> list[web.AbstractRouteDef]:
        return [
            web.get("/settings", self.show),
            web.post("/settings", self.save),
            web.post("/settings/inbox/add", self.add_inbox),
            web.post("/settings/inbox/remove", self.remove_inbox),
            web.post("/settings/terms", self.accept_terms),
            web.post("/settings/paid-work", self.paid_work),
        ]

    async def show(self, request: web.Request) -> web.Response:
        return await self.page()

    async def save(self, request: web.Request) -> web.Response:
        form = await _form(request)
        return await self._change(lambda text, inboxes: edit.apply_form(text, form, inboxes), form)

    async def add_inbox(self, request: web.Request) -> web.Response:
        form = await _form(request, allowed={"path"})
        return await self._change(lambda text, _inboxes: edit.add_inbox(text, form.get("path", "")))

    async def remove_inbox(self, request: web.Request) -> web.Response:
        index = (await _form(request, allowed={"index"})).get("index", "")
        if not index.isdigit() or len(index) > 3:
            return await self.page(error="index: give the number of the inbox to remove", status=400)
        return await self._change(lambda text, inboxes: edit.remove_inbox(text, int(index), inboxes))

    async def accept_terms(self, request: web.Request) -> web.Response:
        """Yes to the terms the form names (``terms``: their names, comma-separated), as
        `gpen-watch models accept` says it."""
        names = [n.strip() for n in (await _form(request, allowed={"terms"})).get("terms", "").split(",")]
        chosen = [licences.terms_named(n) for n in names if n]
        if not chosen or len(chosen) > len(licences.ALL_TERMS) or not all(t and t.needs_yes for t in chosen):
            error = f"terms: name the terms to accept, of {', '.join(licences.ACCEPTABLE)}"
            return await self.page(error=error, status=400)
        yes = [t for t in chosen if t is not None]
        return await self._change(lambda text, _inboxes: answers.accept(text, self._path(), yes))

    async def paid_work(self, request: web.Request) -> web.Response:
        """The settings for paid work (`gpen-watch models paid-work`)."""
        await _form(request, allowed=set())
        return await self._change(lambda text, _inboxes: answers.for_paid_work(text, self._path())[0])

    def _path(self) -> Path:
        """The settings file (``_change`` runs a change only where the service has one)."""
        assert self.source is not None
        return self.source.path

    async def _change(
        self, change: Callable[[str, int], str], sent: dict[str, str] | None = None
    ) -> web.Response:
        if self.source is None:
            return await self.page(error="this service was started without a settings file", status=409)
        path = self.source.path
        async with self._lock:
            try:
                text = path.read_text(encoding="utf-8") if path.exists() else ""
            except (OSError, UnicodeDecodeError) as exc:
                return await self.page(error=f"{path}: cannot read the settings file: {exc}", status=500)
            try:
                new_text = self._edited(text, change)
                config.from_text(new_text, path)  # the file's own checks, before anything is written
                # ...then as the service will read it, with its command line over it.
                check_service_folders(self.source.with_text(new_text))
            except (ConfigError, OutputError) as exc:
                return await self.page(error=str(exc), status=400, sent=sent)
            if new_text != text:
                try:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    mode = path.stat().st_mode & 0o777 if path.exists() else None
                    write_text_atomic(path, new_text, mode=mode)
                except OSError as exc:
                    return await self.page(error=f"{path}: cannot save: {exc.strerror or exc}", status=500)
            reply = await self.site.command({"cmd": "reload"})
        if not reply.get("ok"):
            error = f"Saved in {short_path(path)}, but the service did not apply it: {reply.get('error')}"
            return await self.page(error=error, status=503)
        return await self.page(saved=reply)

    def _edited(self, text: str, change: Callable[[str, int], str]) -> str:
        """``change`` of the file's text, or ConfigError: a file whose tables are not where
        gpen-watch keeps them (``restore = "soft"``) gets its own problem's sentence, and only a
        file that reads well is a bug of ours to fail on."""
        file_cfg, problem = self._file_config(text)
        try:
            return change(text, len(file_cfg.watch.inboxes))
        except ConfigError:
            raise
        except Exception as exc:
            if problem:
                raise ConfigError(f"{problem}; fix the file in an editor, then save again") from None
            log.exception("settings page: changing %s failed", self.source.path if self.source else "")
            raise ConfigError(
                f"gpen-watch could not change the file, a bug of ours ({type(exc).__name__}); see the log"
            ) from None

    def _file_config(self, text: str | None = None) -> tuple[Config, str]:
        """The file's own settings (without the command line's), and its problem if it has one."""
        if self.source is None:
            return self.current(), ""
        path = self.source.path
        try:
            if text is None:
                text = path.read_text(encoding="utf-8") if path.exists() else ""
            return config.from_text(text, path), ""
        except (OSError, UnicodeDecodeError, ConfigError) as exc:
            return self.current(), str(exc)

    async def page(
        self,
        *,
        error: str = "",
        saved: dict[str, Any] | None = None,
        status: int = 200,
        sent: dict[str, str] | None = None,
    ) -> web.Response:
        file_cfg, problem = self._file_config()
        shown = Shown(sent or {}, error)
        body = self.site.render(
            "settings.html",
            nav="settings",
            live="",
            path=short_path(self.source.path) if self.source else "",
            problem=problem,
            error=error,
            saved=saved,
            sections=self.sections(file_cfg, shown),
            inboxes=self.inboxes(file_cfg, shown),
            terms=model_terms.rows(file_cfg.restore),
            not_for_paid_work=answers.not_for_paid_work(file_cfg.restore),
            paid_work_words=model_terms.paid_work_words(file_cfg.restore),
            # Where other machines reach this service, and its certificate's fingerprint.
            remote=remote_access((await self.site.status())[0]),
            api_address_label=setting_labels.LABELS["api.address"],
        )
        return web.Response(text=body, status=status, content_type="text/html", charset="utf-8")

    # --- what the form shows ------------------------------------------------------------------

    def sections(self, file_cfg: Config, shown: Shown) -> list[Section]:
        now = self.current()
        out = []
        for section in SECTIONS:
            rows = [
                self._row(
                    shown,
                    name,
                    name,
                    _get(file_cfg, name),
                    _shown(edit.default_of(name), edit.list_separator(name)),
                    tp,
                    _get(now, name),
                )
                for name, tp in edit.global_fields().items()
                if name.startswith(section + ".") and _applies_to(name, file_cfg.restore)
            ]
            words = setting_labels.SECTIONS[section]
            out.append(Section(section, applies(section + ".x").value, rows, words.heading, words.line))
        return out

    def inboxes(self, file_cfg: Config, shown: Shown) -> list[InboxForm]:
        now = self.current()
        forms = []
        for i, inbox in enumerate(file_cfg.watch.inboxes):
            rows, profile = [], []
            own = config.inbox_config(file_cfg, inbox).restore
            for key, tp in edit.inbox_fields().items():
                if not _applies_to(key, own):
                    continue
                name = f"watch.inboxes[{i}].{key}"
                section, _, sub = key.partition(".")
                if sub:  # a profile setting: blank follows the global one
                    value = getattr(inbox, section).get(sub)
                    default = f"as [{section}], now {_shown(getattr(getattr(file_cfg, section), sub))}"
                    profile.append(self._row(shown, name, key, value, default, tp, None, inbox=i, doc=key))
                else:
                    default = _shown(_inbox_default(key))
                    doc = f"watch.inboxes.{key}"
                    rows.append(self._row(shown, name, key, getattr(inbox, key), default, tp, None, doc=doc))
            overridden = ""
            if self.source is not None and self.source.overrides("watch.inboxes"):
                watched = ", ".join(short_path(i.path) for i in now.watch.inboxes)
                overridden = OVERRIDDEN.format(value=watched)
            forms.append(InboxForm(i, short_path(inbox.path), rows, profile, overridden))
        return forms

    def _row(
        self,
        shown: Shown,
        name: str,
        key: str,
        value: Any,
        default: str,
        tp: Any,
        now: Any,
        *,
        inbox: int | None = None,
        doc: str | None = None,
    ) -> Row:
        """``inbox``: the number of the inbox whose own setting this is (blank: the global one)."""
        overridden = ""
        if self.source is not None and now is not None and self.source.overrides(name):
            overridden = OVERRIDDEN.format(value=_shown(now, edit.list_separator(name)))
        choices = _choices(tp)
        inherits = inbox is not None
        if choices and inherits:
            choices = ("", *choices)
        return Row(
            name,
            key,
            DESCRIPTIONS[doc or name].note,
            shown.value(name, _shown(value, edit.list_separator(name))),
            default,
            choices,
            overridden,
            inherits,
            shown.names(key, inbox) if shown.error else False,
            setting_labels.label(name),
            _own_applies(doc or name),
        )


def _applies_to(name: str, restore: config.RestoreConfig) -> bool:
    """Whether the page shows ``name`` (restore.fidelity only where the model takes one, or where
    the file sets it, so a value it refuses can be seen and changed)."""
    if name != "restore.fidelity":
        return True
    return has_fidelity(restore.model) or restore.fidelity != config.RestoreConfig.fidelity


def _own_applies(name: str) -> str:
    """When a change of ``name`` applies, if not when its section's heading says; else ""."""
    own = applies(name)
    return "" if own == applies(name.partition(".")[0] + ".x") else own.value


def _inbox_default(key: str) -> Any:
    f = next(f for f in dataclasses.fields(config.InboxConfig) if f.name == key)
    return None if f.default is dataclasses.MISSING else f.default


def _get(cfg: Config, name: str) -> Any:
    section, _, key = name.partition(".")
    return getattr(getattr(cfg, section), key)


def _choices(tp: Any) -> tuple[str, ...]:
    if tp is bool:
        return ("true", "false")
    if typing.get_origin(tp) is Literal:
        return tuple(str(a) for a in typing.get_args(tp))
    return ()


def _shown(value: Any, sep: str = ",") -> str:
    """A value as the form shows it and reads it back (a list's items separated by ``sep``)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Path):
        return short_path(value)
    if isinstance(value, list):
        return f"{sep} ".join(str(v) for v in value)
    return str(value)


async def _form(request: web.Request, allowed: set[str] | None = None) -> dict[str, str]:
    """The form's fields as text; a 400 with a sentence for what no form of this page sends."""
    if request.content_type not in ("application/x-www-form-urlencoded", "multipart/form-data"):
        raise web.HTTPBadRequest(text="Send the settings as a form (application/x-www-form-urlencoded).\n")
    try:
        data = await request.post()
    except ValueError:
        raise web.HTTPBadRequest(text="The form could not be read.\n") from None
    if len(data) > MAX_FIELDS:
        raise web.HTTPBadRequest(text=f"The form has {len(data)} fields; this page sends fewer.\n")
    out: dict[str, str] = {}
    for key, value in data.items():
        if not isinstance(value, str):
            raise web.HTTPBadRequest(text=f"{key[:80]}: a file was sent; the settings are text.\n")
        if key in out:
            raise web.HTTPBadRequest(text=f"{key[:80]}: sent twice; send each setting once.\n")
        if allowed is not None and key not in allowed:
            raise web.HTTPBadRequest(
                text=f"{key[:80]!r}: this form sends only {', '.join(sorted(allowed))}.\n"
            )
        out[key] = value
    return out
