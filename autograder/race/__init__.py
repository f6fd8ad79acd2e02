"""The class race: learners' training entries re-run in the sandbox, ranked on held-out text. [trusted]

``verify`` trains and scores one entry on each of its random seeds, each process started by
``process`` (which tells the entry's faults from the grader's); ``board`` ranks a class of them
and writes the leaderboard (CSV, an offline HTML page); ``heldout`` says which text is scored;
``gradebook`` writes the race's points into the course's nbgrader gradebook; ``cluster`` runs
a race's seeds on a Dask cluster.
"""
