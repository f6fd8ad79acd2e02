"""The judge: exercises, the verdict, the diagnoses that name a mistake. [trusted; also the check cell]

Exercises and their cases, the verdict, and the diagnoses that name a mistake (listed ones, a
mutant of the reference, a fix of the learner's code, where and what differs). Runs in the
grader's process and in the learner's check cell, never in the sandbox; no files, no nbgrader.
"""
