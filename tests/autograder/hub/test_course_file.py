"""The course file's loader: a good file gives the hub it describes; each mistake an
instructor can make is refused with a message that names the key and what to write."""
from __future__ import annotations

import pytest

from autograder.hub.course_file import CourseFileError, load

GOOD = '''\
[hub]
root = "/srv/jupyterhub"

[courses.transformers]
instructors = ["ada"]
learners = ["bo", "cy"]
formgrader_port = 9001
[[courses.transformers.assignments]]
name = "02_attention"
due = 2026-12-01T23:59:00+01:00

[courses.nlp]
instructors = ["eve"]
learners = ["bo"]
'''


def _load(tmp_path, text):
    path = tmp_path / "hub.toml"
    path.write_text(text)
    return load(path)


def test_a_good_file(tmp_path):
    hub = _load(tmp_path, GOOD)
    tf, nlp = hub.courses
    assert (tf.id, tf.grader, tf.instructors, tf.learners) == ("transformers", "grader-transformers", ("ada",), ("bo", "cy"))
    assert tf.assignments[0].name == "02_attention" and tf.assignments[0].due.utcoffset().total_seconds() == 3600
    assert nlp.formgrader_port == 9000  # the first port from 9000 that no course names
    assert hub.people == ["ada", "bo", "cy", "eve"]
    assert str(hub.exchange) == "/srv/nbgrader/exchange" and hub.password is None  # PAM unless a password


@pytest.mark.parametrize("change, said", [
    (("learners = [\"bo\", \"cy\"]", "learners = [\"bo\", \"cy\"]\nteachers = [\"x\"]"),
     "unknown key teachers in courses.transformers"),
    (("learners = [\"bo\", \"cy\"]", "learners = [\"Bo Smith\"]"), "courses.transformers.learners: ['Bo Smith']"),
    (("learners = [\"bo\", \"cy\"]", "learners = [\"ada\"]"), "['ada'] both teach and learn"),
    (("learners = [\"bo\", \"cy\"]", "learners = [\"grader-x\"]"), "not grader-..."),
    (("name = \"02_attention\"", "name = \"02_atention\""), "'02_atention' is not an assignment of the course"),
    (("due = 2026-12-01T23:59:00+01:00", "due = 2026-12-01T23:59:00"), "due must be a date and time with its time zone"),
    (("formgrader_port = 9001", "formgrader_port = 70000"), "formgrader_port must be a port number"),
    (("[courses.nlp]", "[courses.NLP]"), "course id 'NLP'"),
    (("root = \"/srv/jupyterhub\"", "root = \"srv\""), "hub.root must be an absolute path"),
    (("root = \"/srv/jupyterhub\"", "root = \"/srv\"\npassword = \"short\""), "hub.password must be"),
    (("instructors = [\"eve\"]", "instructors = []"), "courses.nlp.instructors: name at least one instructor"),
    (("[hub]", "[hub\n"), "not valid TOML"),
])
def test_mistakes_are_named(tmp_path, change, said):
    old, new = change
    assert old in GOOD
    with pytest.raises(CourseFileError) as err:
        _load(tmp_path, GOOD.replace(old, new, 1))
    assert said in str(err.value) and str(tmp_path / "hub.toml") in str(err.value)


def test_no_course(tmp_path):
    with pytest.raises(CourseFileError, match="no course"):
        _load(tmp_path, "[hub]\n")
