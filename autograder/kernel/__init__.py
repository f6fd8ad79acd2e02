"""What runs where the learner's code runs, and nothing else. [sandbox]

The grading sandbox stages this folder (with the package's ``__init__``) and no other part of
``autograder``.

    cases       the graded cell: ``record`` runs the learner's function on the cases the grader
                wrote and displays the outputs as data; ``run_cases`` (the check cell uses it too)
    calls       how a case calls the learner's function
    transport   arrays to JSON and back: the cases in, the outputs and the fixes out
    wire        the one reader of what crosses from the sandbox: JSON within strict limits
    hints       what a learner reads when their function raises
    repair      the search for one edit that fixes the learner's code (``contained``: a forked
                child with limits, so the search cannot hang the cell)
    operators   the edits, in the order ``changes`` makes them: ``slips`` (a learner's slips, also
                the reference's mutants), ``undoing`` and ``repeated`` (repair's changes that undo
                them); ``edits``: what they share, and how a change is applied
    fresh       a case run again alone in a process of its own, where the learner's code cannot
                forge what grades it (a script, run by itself); ``confine``: its memory limit,
                which counts every way to hold memory
    scratch     the sandbox's first step where the grader has no root: caps the files of /tmp
                before anything of the learner's runs (a script, run by itself)

These modules import the standard library, numpy and each other only (``tests/test_layout.py``):
no reference, no judge, no exercise registry is within reach of the learner's process.
"""
from autograder.kernel.cases import record, run_cases

__all__ = ["record", "run_cases"]  # the graded cell imports record from here
