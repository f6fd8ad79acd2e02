"""The course's grader: exercise registry, kernel side, trusted judge, nbgrader glue, CLI."""


def submit(notebook, assignment=None, as_json=False):
    """Grade a saved notebook and print the score table (see ``autograder.grading.submit``)."""
    from autograder.grading import submit as _submit

    return _submit(notebook, assignment, as_json)
