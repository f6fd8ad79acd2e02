"""pipeline/execute.py: what runs in the sandbox, and the cases it hands on to the judge."""
import nbformat

from autograder.kernel.transport import MIME
from autograder.pipeline import plan
from autograder.pipeline.execute import FAULT, SandboxedExecute, fault_output, teaching_sources

from helpers import SOLUTIONS

ASSIGNMENT, NAME = "00_start_here", "start_here"


def test_teaching_cells_are_the_courses_unmarked_code_cells():
    nb = nbformat.read(SOLUTIONS / ASSIGNMENT / f"{NAME}.ipynb", as_version=4)
    teaching = teaching_sources(ASSIGNMENT, NAME)
    unmarked = {c.source.strip() for c in nb.cells if c.cell_type == "code" and "nbgrader" not in c.metadata}
    assert teaching == unmarked - {""} and teaching
    assert not any(c.source.strip() in teaching for c in nb.cells if "nbgrader" in c.metadata)


def test_a_fault_is_an_error_output_that_names_its_cause():
    out = fault_output("stopped: the kernel died")
    assert out.output_type == "error" and out.ename == FAULT and "kernel died" in out.traceback[0]


def test_the_sandboxed_run_records_each_graded_cell_and_hands_its_cases_on(tmp_path, monkeypatch):
    monkeypatch.setenv(plan.SECRET_ENV, str(tmp_path / "secret"))
    nb = nbformat.read(SOLUTIONS / ASSIGNMENT / f"{NAME}.ipynb", as_version=4)
    drawn = plan.graded_cases(nb, plan.submission_key(nb))
    nb, resources = SandboxedExecute().preprocess(nb, {"nbgrader": {"assignment": ASSIGNMENT, "notebook": NAME}})
    handed = resources["autograder"][plan.PLAN].graded
    assert sorted(handed) == sorted(drawn)
    for i, (ex, cases) in handed.items():
        assert ex is drawn[i][0] and len(cases) == len(drawn[i][1])
        payloads = [o for o in nb.cells[i].outputs if MIME in o.get("data", {})]
        assert len(payloads) == 1 and payloads[0].data[MIME]["exercise"] == ex.id
    teaching = teaching_sources(ASSIGNMENT, NAME)
    assert all(c.execution_count is None for c in nb.cells if c.cell_type == "code" and c.source.strip() in teaching)


def test_a_kernel_the_sandbox_cannot_start_is_said_in_one_line(tmp_path, monkeypatch):
    """What bubblewrap printed reaches the learner as one line, not nbgrader's traceback: the
    error where isolation is required; where it is not (a learner's ``submit``), the notebook
    is graded without the sandbox, as without bubblewrap, and the note says why."""
    import pytest

    from autograder.grading import GradingError, grade_notebook
    from autograder.pipeline.sandbox import ISOLATION_ENV, Sandbox

    missing = tmp_path / "no such folder"
    sandboxed = Sandbox.kernel_argv
    monkeypatch.setattr(Sandbox, "kernel_argv", lambda self: [
        "bwrap", "--ro-bind", str(missing), "/x", "--", "true", "{connection_file}"]
        if self.isolate else sandboxed(self))
    monkeypatch.setenv(ISOLATION_ENV, "required")
    with pytest.raises(GradingError) as err:
        grade_notebook(SOLUTIONS / ASSIGNMENT / f"{NAME}.ipynb")
    message = str(err.value)
    assert "\n" not in message and "could not start a kernel" in message
    assert str(missing) in message  # bubblewrap's own words: which path is missing

    monkeypatch.setenv(ISOLATION_ENV, "auto")
    result = grade_notebook(SOLUTIONS / ASSIGNMENT / f"{NAME}.ipynb")
    assert result.total == result.max_total
    assert [n for n in result.notes if n.startswith("Graded without isolation")] == [
        f"Graded without isolation: {message}. The score is right for honest work; an "
        "instructor grades in a sandbox."]


def test_a_path_the_learner_may_not_read_is_said_in_one_line(tmp_path, learner):
    """A data cache under a folder of root's, where the learner (without root) may not even look:
    bubblewrap cannot bind it, and ``submit`` says so in one line (it was nbgrader's traceback
    of a PermissionError)."""
    import os
    import shutil

    private = tmp_path / "root only"
    (private / "cache").mkdir(parents=True)
    os.chmod(private, 0o700)
    notebook = learner.clone / "notebooks" / ASSIGNMENT / f"{NAME}.ipynb"
    shutil.copyfile(SOLUTIONS / ASSIGNMENT / f"{NAME}.ipynb", notebook)
    shutil.chown(notebook, learner.user, learner.user)
    proc, result = learner.submit(notebook, AUTOGRADER_ISOLATION="required",
                                  COURSE_DATA_DIR=str(private / "cache"))
    assert result is None and proc.returncode == 2
    assert proc.stderr.strip() == ("autograder: the grading sandbox could not start a kernel: bwrap: Can't "
                                   f"find source path {private / 'cache'}: Permission denied")
