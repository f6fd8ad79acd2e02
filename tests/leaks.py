"""What a learner gets back must not carry: hidden-case values, the course secret, solution code.

``leaks(result, html, own_code)`` lists what the feedback page ``html`` and the autograded
notebook (``result.autograded``) of a graded submission give away:

- **hidden-case values**: the cases the submission was graded on (drawn again here from the
  autograded notebook, with the course's secret, exactly as ``SandboxedExecute`` drew them) and
  the reference's answers to them. A value shows as a printed number, so the text's numbers
  are compared with them: any three in a row (an array's row, however printed) within the
  rounding of what is printed (each printed with at least 4 significant digits), or one
  printed to 10 or more (a ``repr``). Random numbers of the learner's own outputs meet these
  by chance with odds far below one in a thousand per notebook;
- **the secret** (``.autograder/secret``) and the submission's key, in hex;
- **solution code** (``own_code`` False: a submission that did not write it): each line of the
  source's solution regions at least 12 characters long that the released notebook does not
  itself hold.
"""
from __future__ import annotations

import bisect
import copy
import html as html_lib
import json
import re

from pathlib import Path

import nbformat
import numpy as np

from autograder.kernel.transport import as_outputs
from autograder.paths import RELEASE, SOLUTIONS
from autograder.pipeline import plan

NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+)(?:[eE][-+]?\d+)?")
RUN, RUN_DIGITS, ALONE_DIGITS = 3, 4, 10
SOLUTION_REGION = re.compile(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", re.S)


def page_text(html: str) -> str:
    """What a browser shows of an HTML page (tags out, entities decoded)."""
    return html_lib.unescape(re.sub(r"<[^>]+>", " ", html))


def notebook_text(nb: nbformat.NotebookNode) -> str:
    """Every cell's source and every output, as JSON text."""
    return "\n".join(c.source + "\n" + json.dumps(c.get("outputs", [])) for c in nb.cells)


def submitted_key(result) -> bytes:
    """The key ``result``'s submission was graded with: that of its prepared notebook."""
    from autograder.grading import _canonical_name
    from autograder.pipeline.submission import prepare

    path = Path(result.notebook)
    return plan.submission_key(prepare(path, result.assignment, _canonical_name(path, result.assignment)).nb)


def hidden_values(nb: nbformat.NotebookNode, key: bytes) -> list[np.ndarray]:
    """The graded cases of the autograded notebook ``nb`` drawn from ``key`` and the
    reference's answers, each array flattened to its finite non-integer values (integers, say
    token ids, say nothing)."""
    arrays = []
    for ex, cases in plan.graded_cases(nb, key).values():
        for case in cases:
            answers = as_outputs(ex.reference(**copy.deepcopy(case)))
            for value in [*case.values(), *answers]:
                if isinstance(value, (np.ndarray, float, np.floating)) and np.issubdtype(np.asarray(value).dtype, np.floating):
                    flat = np.asarray(value, dtype=float).ravel()
                    arrays.append(flat[np.isfinite(flat) & (flat != np.round(flat))])
    return arrays


def _numbers(text: str) -> list[tuple[float, float, int]]:
    """(value, half of the printed precision, significant digits) of each decimal in ``text``."""
    out = []
    for token in NUMBER.findall(text):
        mantissa, _, exponent = token.lower().lstrip("+-").partition("e")
        decimals = len(mantissa.partition(".")[2])
        digits = len(mantissa.replace(".", "").lstrip("0"))
        out.append((float(token), 0.5 * 10.0 ** (-decimals + int(exponent or 0)) * 1.0001, digits))
    return out


def leaked_values(text: str, arrays: list[np.ndarray]) -> list[str]:
    """The hidden values ``text`` prints (see the module doc)."""
    numbers = _numbers(text)
    found = []
    everything = np.sort(np.concatenate(arrays)) if arrays else np.array([])
    for value, tol, digits in numbers:  # one value to ten digits or more
        if digits >= ALONE_DIGITS:
            i = bisect.bisect_left(everything, value - tol)
            if i < len(everything) and everything[i] <= value + tol:
                found.append(f"{value!r} (a hidden value, to {digits} digits)")
    firsts = sorted((a[i], k, i) for k, a in enumerate(arrays) for i in range(len(a) - RUN + 1))
    keys = [f[0] for f in firsts]
    for j in range(len(numbers) - RUN + 1):  # three in a row
        run = numbers[j:j + RUN]
        if min(d for _, _, d in run) < RUN_DIGITS:
            continue
        (value, tol, _) = run[0]
        for _, k, i in firsts[bisect.bisect_left(keys, value - tol):bisect.bisect_right(keys, value + tol)]:
            if all(abs(arrays[k][i + n] - v) <= t for n, (v, t, _) in enumerate(run)):
                found.append(f"{[v for v, _, _ in run]} (hidden values in a row)")
                break
    return found


def solution_lines(assignment: str) -> list[str]:
    """The solution code of ``assignment`` a learner does not see in the released notebook."""
    (source,) = (SOLUTIONS / assignment).glob("*.ipynb")
    released = (RELEASE / assignment / source.name).read_text()
    lines = {line.strip() for cell in nbformat.read(source, as_version=4).cells if cell.cell_type == "code"
             for region in SOLUTION_REGION.findall(cell.source) for line in region.splitlines()}
    return sorted(line for line in lines if len(line) >= 12 and json.dumps(line)[1:-1] not in released)


def leaks(result, html: str, own_code: bool) -> list[str]:
    """Everything the graded submission's feedback and autograded notebook give away."""
    nb = nbformat.reads(result.autograded, as_version=4)
    texts = {"feedback": page_text(html), "autograded notebook": notebook_text(nb)}
    key = submitted_key(result)
    secrets = [plan.secret_key().decode(), key.hex()]
    values = hidden_values(nb, key)
    assert values, "no hidden values drawn: the check would pass whatever the page says"
    found = ["feedback (its HTML): the secret or the key" for s in secrets if s in html]
    for where, text in texts.items():
        found += [f"{where}: the secret or the key" for s in secrets if s in text]
        found += [f"{where}: {v}" for v in leaked_values(text, values)]
        if not own_code:
            found += [f"{where}: solution code {line!r}" for line in solution_lines(result.assignment)
                      if line in text]
    return found


def planted(result, html: str) -> str:
    """``html`` with the first hidden array of ``result`` printed into it, as numpy prints it:
    what ``leaks`` must find (the test that it can)."""
    array = next(a for a in hidden_values(nbformat.reads(result.autograded, as_version=4), submitted_key(result))
                 if len(a) >= RUN)
    return html.replace("</body>", f"<pre>{np.array2string(array[:6])}</pre></body>")

