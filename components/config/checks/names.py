"""Cross-field check of derived names: every name made from a config key fits its limit once prefixed (DESIGN
section 4, "Names are contracts"; the names and limits are declared in components.config.names).

Every key whose type carries `Derives` is checked, wherever it is in the site, against every name made from it;
names that join the site name (`<site>-<key>`) are checked on the real pairs. One line per key: the tightest name
it breaks, and the longest key that fits them all.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import UnionType
from typing import TYPE_CHECKING, Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel

from components.config.names import Derived, Derives, derives
from components.config.problems import Problem

if TYPE_CHECKING:
    from components.config.views import SiteViews


def name_problems(site: SiteViews) -> Iterator[Problem]:
    """One line per key whose names do not fit; when several keys are too long only together with the site name,
    one line on the site name: that is the one mistake."""
    problems = []
    joined: list[tuple[str, Derived]] = []
    for path, noun, key, meta in _keys(site, ()):
        if not meta.site_name:
            problem = key_problem(meta, key, noun, site.name)
            if problem:
                problems.append((path, problem))
                joined += [(key, d) for d in meta.all() if d.joins_site and len(d(key, site.name)) > d.limit.max_length]
    keys = {key for key, _ in joined}
    if len(keys) > 1 and len(keys) == len(problems):
        room = min(d.limit.max_length - (len(d(key, site.name)) - len(site.name)) for key, d in joined)
        names = sorted({d(key, site.name) for key, d in joined})
        yield ("name",), (
            f"{site.name!r} makes {len(names)} names that join it too long ({', '.join(names)}): "
            f"use a site name of at most {room} characters"
        )
        return
    yield from problems


def key_problem(meta: Derives, key: str, noun: str, site: str) -> str | None:
    """Why a key (or field value) makes a name that does not fit, or None."""
    derived = meta.all()
    too_long = [d for d in derived if len(d(key, site)) > d.limit.max_length]
    if too_long:
        worst = min(too_long, key=lambda d: d.room(site))
        fix = "use a shorter key" if worst.joins_site else f"use a {noun} of at most {min(d.room(site) for d in derived)} characters"
        return _too_long(worst, key, noun, site, fix)
    letter = next((d for d in derived if d.key_first_letter and not key[:1].isalpha()), None)
    if letter:
        return (f"{letter.names} {letter(key, site)!r} ({letter.how(noun)}) must start with a letter, as {letter.limit.authority} "
                f"requires of a {letter.names} name: use a {noun} that starts with a letter")
    return None


def _too_long(derived: Derived, key: str, noun: str, site: str, fix: str) -> str:
    name = derived(key, site)
    how = f" ({derived.how(noun)})" if derived.template != "{key}" else ""
    return (f"{derived.names} {name!r}{how} has {len(name)} characters; {derived.limit.authority} "
            f"allows at most {derived.limit.max_length}{derived.limit.where}: {fix}")


def _keys(node: Any, path: tuple[str | int, ...]) -> Iterator[tuple[tuple[str | int, ...], str, str, Derives]]:
    """(key path, noun, value, Derives) of every value and mapping key of the site whose type derives names."""
    if not isinstance(node, BaseModel):
        return
    for name, info in type(node).model_fields.items():
        value = getattr(node, name)
        field_path = (*path, info.alias or name)
        meta = next((m for m in info.metadata if isinstance(m, Derives)), None) or derives(_optional(info.annotation))
        if meta is not None and isinstance(value, str):
            yield field_path, info.alias or name, value, meta
        yield from _values(value, _optional(info.annotation), field_path)


def _values(value: Any, tp: Any, path: tuple[str | int, ...]) -> Iterator[tuple[tuple[str | int, ...], str, str, Derives]]:
    if get_origin(tp) is Annotated:
        tp = get_args(tp)[0]
    if isinstance(value, BaseModel):
        yield from _keys(value, path)
    elif isinstance(value, dict) and get_origin(tp) is dict:
        key_tp, value_tp = get_args(tp)
        meta = derives(key_tp)
        for key, item in value.items():
            if meta is not None:
                yield (*path, key), "key", key, meta
            yield from _values(item, value_tp, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _values(item, None, (*path, i))


def _optional(tp: Any) -> Any:
    """`X` of `X | None`."""
    if get_origin(tp) in (Union, UnionType):
        return next((a for a in get_args(tp) if a is not type(None)), tp)
    return tp
