"""The class race: learners' training entries re-run in the sandbox, ranked on held-out text. [trusted]

``verify`` trains and scores one entry on each of its random seeds; ``board`` ranks a
class of them and writes the leaderboard (CSV, an offline HTML page); ``heldout`` says which text is scored.
"""
