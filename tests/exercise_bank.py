"""Shared check for an exercise module: each registered mistake loses points and is named."""
from __future__ import annotations

from autograder.judge.diagnose import safe_outputs
from autograder.judge.verdict import judge
from autograder.kernel.transport import Raised

TEST_KEY = b"a key for the tests, not a secret"  # graded cases are drawn from a key


def mistake_verdicts(exercises):
    """(exercise id, mistake name, verdict when a submission behaves exactly like the mistake)."""
    for ex in exercises:
        cases = ex.graded_cases(TEST_KEY)
        for m in ex.mistakes:
            results = [safe_outputs(m.wrong, c) or Raised("raised") for c in cases]
            yield ex.id, m.name, judge(ex, cases, results)


def learner_verdict(exercise_id, sources, namespace, key=TEST_KEY):
    """The verdict on learner code given as source text, through the path of a graded cell:
    ``sources`` (strings, run in order, the last defining the exercise's function) are
    executed in a copy of ``namespace``, then ``kernel.run_cases`` and ``judge``."""
    import textwrap

    from autograder.exercises import get
    from autograder.kernel import run_cases

    ex = get(exercise_id)
    scope = dict(namespace, __name__="__main__")
    for source in sources:
        exec(textwrap.dedent(source), scope)
    cases = ex.graded_cases(key)
    changed = []  # per case, the inputs the learner's call changed in place
    results = run_cases(scope, ex.function, ex.call, cases, signature=ex.signature,
                        memory=ex.memory_limits(cases), changed=changed)
    return judge(ex, cases, results, changed=changed, alone=held_alone(ex, cases, key, results, scope))


def held_alone(ex, cases, key, results, scope) -> dict:
    """The grader's second look (``autograder.pipeline.rerun``): each case of a memory limit or
    a served model whose kernel outcome is outputs run again alone on its twin, in a plain
    process that imports this checkout (``Sandbox.alone`` without the sandbox)."""
    import contextlib
    import os
    import signal
    import subprocess

    from autograder.kernel.cases import CODE, pickled
    from autograder.kernel.transport import encode_results
    from autograder.paths import REPO
    from autograder.pipeline import rerun

    @contextlib.contextmanager
    def start(argv):
        env = {**os.environ, "PYTHONPATH": str(REPO), "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
        with subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              env=env, start_new_session=True) as process:

            def stop():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(process.pid, signal.SIGKILL)
            try:
                yield process, stop
            finally:
                stop()

    if not rerun.again(ex, cases):
        return {}
    payload = {**encode_results(ex.id, results), CODE: pickled(scope, ex.function)}
    return rerun.run_again(ex, cases, key, payload, REPO, start)


def assert_bug_is_named(verdict, name, described=("differs", "raised")):
    """A learner's bug loses points; feedback names its mistake ``name``, or, for a bug no
    mistake models (``name`` None), says what went wrong in one of the ``described`` words."""
    assert not verdict.full_marks
    text = " ".join(verdict.messages)
    if name:
        assert name in text, verdict.messages
    else:
        assert any(word in text for word in described), verdict.messages
