"""The course file: one JupyterHub, its courses, who teaches and who learns in each. [trusted]

A small TOML file that the instructor edits and ``autograder hub setup FILE`` reads (as root)::

    [hub]
    url = "http://0.0.0.0:8000"          # where people open the hub
    root = "/srv/jupyterhub"             # jupyterhub_config.py, the hub's state, shared config
    exchange = "/srv/nbgrader/exchange"  # nbgrader's exchange (one folder per course inside)
    home = "/home"                       # where useradd makes each account's home
    # password = "..."  a trial hub only: every account logs in with this password
    #                   (JupyterHub's DummyAuthenticator); without it, PAM (Unix passwords)

    [courses.transformers]
    instructors = ["ada"]
    learners = ["bo", "cy", "di"]
    formgrader_port = 9001                # the course's formgrader service, on 127.0.0.1

    [[courses.transformers.assignments]]
    name = "02_attention"
    due = 2026-12-01T23:59:00Z

``load(path)`` returns a ``Hub``; anything it cannot use raises ``CourseFileError`` naming the
file, the key and what is expected.
"""
from __future__ import annotations

import datetime as dt
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

from autograder.paths import SOLUTIONS

# a Unix user name that useradd takes on every distribution, and that nbgrader's ids allow
USER = re.compile(r"[a-z_][a-z0-9_-]{0,31}")
# a course id: also a JupyterHub service name, part of group names and of grader-<course> (<= 32)
COURSE = re.compile(r"[a-z][a-z0-9_]{0,24}")
HUB_KEYS = {"url", "root", "exchange", "home", "password", "hub_port", "proxy_api_port"}
COURSE_KEYS = {"instructors", "learners", "formgrader_port", "assignments"}
ASSIGNMENT_KEYS = {"name", "due"}


class CourseFileError(ValueError):
    """The course file cannot be used: the message names the file, the key and the fix."""


@dataclass(frozen=True)
class Assignment:
    name: str                  # a folder of solutions/, e.g. "02_attention"
    due: dt.datetime | None    # timezone-aware


@dataclass(frozen=True)
class Course:
    id: str
    instructors: tuple[str, ...]
    learners: tuple[str, ...]
    formgrader_port: int
    assignments: tuple[Assignment, ...]

    @property
    def grader(self) -> str:
        """The account that runs the course's formgrader and owns its files (nbgrader's name)."""
        return f"grader-{self.id}"


@dataclass(frozen=True)
class Hub:
    url: str
    root: Path
    exchange: Path
    home: Path
    password: str | None
    hub_port: int
    proxy_api_port: int
    courses: tuple[Course, ...] = field(default=())

    @property
    def people(self) -> list[str]:
        """Every instructor and learner, each once, in the file's order."""
        return list(dict.fromkeys(p for c in self.courses for p in (*c.instructors, *c.learners)))


def load(path: str | Path) -> Hub:
    """Read and check a course file; raises ``CourseFileError`` with what to change."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except OSError as err:
        raise CourseFileError(f"{path}: cannot read it: {err.strerror}") from None
    except tomllib.TOMLDecodeError as err:
        raise CourseFileError(f"{path}: not valid TOML: {err}") from None
    where = _Where(path)
    where.only(data, {"hub", "courses"}, "")
    hub = where.table(data, "hub", "")
    where.only(hub, HUB_KEYS, "hub")
    courses = where.table(data, "courses", "")
    if not courses:
        raise CourseFileError(f"{path}: no course: add a [courses.<id>] table")
    # a course without formgrader_port gets the first free one from 9000 on
    taken = {spec.get("formgrader_port") for spec in courses.values() if isinstance(spec, dict)}
    free = (port for port in range(9000, 65536) if port not in taken)
    loaded = tuple(_course(where, cid, spec, None if isinstance(spec, dict) and "formgrader_port" in spec
                           else next(free)) for cid, spec in courses.items())
    ports = [c.formgrader_port for c in loaded]
    if len(set(ports)) != len(ports):
        raise CourseFileError(f"{path}: two courses have the same formgrader_port {ports}")
    password = hub.get("password")
    if password is not None and not (isinstance(password, str) and len(password) >= 8):
        raise CourseFileError(f"{path}: hub.password must be a string of at least 8 characters")
    return Hub(url=where.string(hub, "url", "hub", "http://0.0.0.0:8000"),
               root=where.folder(hub, "root", "/srv/jupyterhub"),
               exchange=where.folder(hub, "exchange", "/srv/nbgrader/exchange"),
               home=where.folder(hub, "home", "/home"), password=password,
               hub_port=where.port(hub, "hub_port", "hub", 8081),
               proxy_api_port=where.port(hub, "proxy_api_port", "hub", 8001), courses=loaded)


def _course(where: _Where, cid: str, spec, default_port: int | None) -> Course:
    key = f"courses.{cid}"
    if not COURSE.fullmatch(cid):
        raise CourseFileError(f"{where.path}: course id {cid!r}: use a lower-case letter, then up to 24 "
                              "lower-case letters, digits or _ (it names a service and grader-<id>)")
    if not isinstance(spec, dict):
        raise CourseFileError(f"{where.path}: {key} must be a table")
    where.only(spec, COURSE_KEYS, key)
    instructors = where.users(spec, "instructors", key)
    learners = where.users(spec, "learners", key)
    both = set(instructors) & set(learners)
    if both:
        raise CourseFileError(f"{where.path}: {key}: {sorted(both)} both teach and learn in the course")
    if not instructors:
        raise CourseFileError(f"{where.path}: {key}.instructors: name at least one instructor")
    assignments = spec.get("assignments", [])
    if not isinstance(assignments, list):
        raise CourseFileError(f"{where.path}: {key}.assignments must be [[{key}.assignments]] tables")
    return Course(id=cid, instructors=instructors,
                  learners=learners, formgrader_port=where.port(spec, "formgrader_port", key, default_port),
                  assignments=tuple(_assignment(where, a, f"{key}.assignments[{i}]")
                                    for i, a in enumerate(assignments)))


def _assignment(where: _Where, spec, key: str) -> Assignment:
    if not isinstance(spec, dict):
        raise CourseFileError(f"{where.path}: {key} must be a table with a name (and a due date)")
    where.only(spec, ASSIGNMENT_KEYS, key)
    name = where.string(spec, "name", key, None)
    known = sorted(p.name for p in SOLUTIONS.iterdir() if p.is_dir() and not p.name.startswith("."))
    if name not in known:
        raise CourseFileError(f"{where.path}: {key}.name {name!r} is not an assignment of the course: "
                              f"one of {', '.join(known)}")
    due = spec.get("due")
    if due is not None and not (isinstance(due, dt.datetime) and due.tzinfo is not None):
        raise CourseFileError(f"{where.path}: {key}.due must be a date and time with its time zone, "
                              "e.g. 2026-12-01T23:59:00Z or 2026-12-01T23:59:00+01:00")
    return Assignment(name, due)


@dataclass
class _Where:
    """Typed reads from a parsed table, with errors that name the file and the key."""
    path: Path

    def fail(self, key: str, expected: str):
        raise CourseFileError(f"{self.path}: {key} must be {expected}")

    def only(self, table: dict, allowed: set[str], key: str) -> None:
        unknown = sorted(set(table) - allowed)
        if unknown:
            raise CourseFileError(f"{self.path}: unknown key{'s' * (len(unknown) > 1)} "
                                  f"{', '.join(unknown)} in {key or 'the top level'}; "
                                  f"known: {', '.join(sorted(allowed))}")

    def table(self, table: dict, name: str, key: str) -> dict:
        value = table.get(name, {})
        if not isinstance(value, dict):
            self.fail(f"{key}.{name}".lstrip("."), "a table")
        return value

    def string(self, table: dict, name: str, key: str, default: str | None) -> str:
        value = table.get(name, default)
        if not isinstance(value, str) or not value:
            self.fail(f"{key}.{name}", "a non-empty string")
        return value

    def folder(self, table: dict, name: str, default: str) -> Path:
        value = self.string(table, name, "hub", default)
        if not Path(value).is_absolute():
            self.fail(f"hub.{name}", f"an absolute path (not {value!r})")
        return Path(value)

    def port(self, table: dict, name: str, key: str, default: int) -> int:
        value = table.get(name, default)
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 65535:
            self.fail(f"{key}.{name}", "a port number from 1 to 65535")
        return value

    def users(self, table: dict, name: str, key: str) -> tuple[str, ...]:
        value = table.get(name, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.fail(f"{key}.{name}", 'a list of user names, e.g. ["ada", "bo"]')
        bad = [v for v in value if not USER.fullmatch(v) or v.startswith("grader-")]
        if bad:
            raise CourseFileError(f"{self.path}: {key}.{name}: {bad} are not user names this hub can "
                                  "make: a lower-case letter or _, then up to 31 lower-case letters, "
                                  "digits, _ or - (and not grader-..., the courses' own accounts)")
        if len(set(value)) != len(value):
            raise CourseFileError(f"{self.path}: {key}.{name} names someone twice")
        return tuple(value)
