"""One submission through nbgrader, step by step. [trusted]

In the trusted process, in order: ``submission`` (repair it against the source), ``plan`` (its
cases, from the secret), ``sandbox`` and ``execute`` (run it under bubblewrap), ``judge_outputs``
(score it), ``sanitize`` (make what it displayed inert), ``feedback`` (the report).
``config`` lists the nbgrader steps; ``header`` is the release's banner.
"""
