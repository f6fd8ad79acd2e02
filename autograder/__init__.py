"""The grader's learner-facing API, which every notebook's set-up cell imports. [learner's kernel]

The course's grader, as the notebooks call it:

    check(id, globals())       the check cell: public cases, advice at once (``check_cell``)
    show_case(id, number)      one public case, to look at (``check_cell``)
    record(id, globals())      the graded cell: outputs for the grader (``kernel.cases``)
    submit(notebook)           grade a saved notebook here and print the score table

The grading sandbox stages this file and the ``kernel/`` folder only; ``check`` and
``show_case`` import the registry and the judge when called, which never happens there.
"""
from autograder.kernel import record
from autograder.kernel.cases import grading_folder

__all__ = ["check", "record", "show_case", "submit"]


def check(exercise_id, namespace):
    """Run the public cases of an exercise and print a success line or a diagnosis."""
    if grading_folder() is not None:  # in the sandbox, where check_cell is not staged
        print("Check cells do nothing while the notebook is graded.")
        return
    # lazy: check_cell imports the judge and the registry, absent from the sandbox (which imports
    # this file); they load at the first check
    from autograder.check_cell import check as run_check

    run_check(exercise_id, namespace)


def show_case(exercise_id, number):
    """Print public case ``number`` of an exercise and return its inputs (see ``check_cell``)."""
    if grading_folder() is not None:
        print("show_case does nothing while the notebook is graded.")
        return None
    from autograder.check_cell import show_case as show  # lazy: as in ``check``

    return show(exercise_id, number)


def submit(notebook, assignment=None, as_json=False):
    """Grade a saved notebook and print the score table (see ``autograder.grading.submit``)."""
    # lazy: the sandbox imports this file with autograder.kernel alone; submit never runs there
    from course_lib.runmode import mode

    if mode() != "full":  # the notebook is itself being graded or tested: never recurse
        print(f"submit() skipped in {mode()} mode.")
        return None
    from autograder.grading import submit as grade_and_print  # lazy: nbgrader, seconds to import

    return grade_and_print(notebook, assignment, as_json)
