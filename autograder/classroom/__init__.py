"""Grading a whole class, spread over processes or a Dask cluster [trusted]

``intake`` takes in what learners handed in (whose each notebook is; no link followed),
``identity`` says when two learner ids are one (and refuses both), ``files`` reads a learner's
file only if it is a regular one,
``grade`` makes the tasks, ``jobs`` is what travels to a worker and back, ``worker`` grades one
task at a time, ``pools`` spreads them over local processes or a Dask cluster, ``journal``
keeps every outcome until nbgrader's gradebook holds it. After grading: ``regrade`` grades an
assignment again after the grader changed, ``late`` prices late work (from a submission time
learners cannot set back), ``export`` writes the CSVs Canvas and Moodle import, ``solutions``
releases the model solutions once the work is due."""
