"""The ``autograder`` command: generate, submit, grade. [trusted]

    autograder generate [ASSIGNMENT ...]           regenerate notebooks/ from solutions/
    autograder submit NOTEBOOK [--json] [--race]   grade one notebook (exit 1 below full marks);
                                                   --race: then race its entry (notebook 06)
    autograder validate NOTEBOOK [--json]          nbgrader's Validate, answered by the grader
    autograder instructor-mode on|off              show nbgrader's instructor tools in JupyterLab
    autograder grade SUBMISSIONS -a ASSIGNMENT     grade a class into the gradebook, export CSV;
                                                   resumable, in parallel or on a Dask cluster
    autograder regrade ASSIGNMENT                  grade a class again after the grader changed
    autograder leaderboard ASSIGNMENT SUBMISSIONS  the class race: entries trained in the sandbox
                                                   under a CPU budget, ranked on held-out text;
                                                   --points N --gradebook: points as extra credit
    autograder export canvas|moodle --roster CSV   grades in the layout a school's gradebook imports
    autograder release-solutions ASSIGNMENT        the model solutions to the learners, once due
    autograder hub setup|remove COURSE_FILE        a JupyterHub for the courses a file describes
                                                   (users, exchange, formgraders; as root)
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from autograder.paths import REPO
from autograder.startup import quiet, skip_slow_imports
from autograder.terminal import shown


# Whatever a command prints that a learner may have written (a message, a file name, an id)
# goes through ``shown``: its control characters are escaped, never sent to the terminal.
# Each command imports what it runs, inside its function: the grader's modules import nbgrader
# (seconds), which ``autograder --help`` and ``instructor-mode`` never need.


def cmd_generate(args) -> int:
    from autograder.release import generate  # lazy: nbgrader (see above)

    for path in generate(args.assignments or None):
        print(shown(f"wrote {path}"))
    return 0


def cmd_submit(args) -> int:
    # lazy: nbgrader (see above)
    from autograder.grading import GradingError, grade_notebook
    from autograder.pipeline.sandbox import SandboxUnavailable

    notebook = Path(args.notebook)
    feedback = Path(args.feedback) if args.feedback else notebook.with_name(notebook.stem + "_feedback.html")
    try:
        result = grade_notebook(notebook, args.assignment, feedback_to=feedback)
    except (GradingError, SandboxUnavailable) as err:
        print(f"autograder: {shown(err)}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
    else:
        for note in result.notes:
            print(shown(note))
        print(shown(result.table()))
        for e in result.exercises:
            if e.points < e.max_points:
                print(f"\n{shown(e.id)}:\n  " + "\n  ".join(shown(m) for m in e.messages))
        print(f"\nFeedback report: {shown(result.feedback_html, layout=False)}")
    status = 0 if result.total >= result.max_total else 1
    return max(status, _race_own(notebook, sys.stderr if args.json else sys.stdout)) if args.race else status


def _race_own(notebook: Path, out) -> int:
    """``submit --race``: the notebook's race entry raced as the class race runs it, beside the
    course's entry (into ``race/`` next to the notebook); 2 where it cannot be raced."""
    # lazy: torch (see above)
    from autograder.pipeline.sandbox import SandboxUnavailable, isolation
    from autograder.race.heldout import Unseen
    from autograder.race.leaderboard import NoEntry, entry_source, race, summary

    try:
        entry_source(notebook)
        isolated, said = isolation()
        if not isolated:
            print(shown(said), file=out)
        ranked, line = race("06_gpt", notebook, notebook.parent / "race", isolate=isolated)
    except (NoEntry, Unseen, SandboxUnavailable, OSError) as err:
        print(f"autograder: not raced: {shown(err)}", file=sys.stderr)
        return 2
    print("\n" + shown(summary(ranked, line)), file=out)
    print(shown(f"race feedback: {notebook.parent / 'race' / 'feedback' / 'you.html'}"), file=out)
    return 0


def cmd_validate(args) -> int:
    # lazy: nbgrader (see above)
    from autograder.grading import GradingError
    from autograder.pipeline.sandbox import SandboxUnavailable
    from autograder.validate import CourseValidator

    validator = CourseValidator()
    try:
        if args.json:
            print(json.dumps(validator.validate(args.notebook), indent=2))
        else:
            validator.validate_and_print(args.notebook)
    except (GradingError, SandboxUnavailable) as err:
        print(f"autograder: {shown(err)}", file=sys.stderr)
        return 2
    return 1 if validator.results else 0


def cmd_instructor_mode(args) -> int:
    from autograder.lab import set_instructor_mode  # lazy: lab imports jupyter_server and tornado

    files = set_instructor_mode(args.state == "on")
    print(("wrote " if args.state == "on" else "removed ") + ", ".join(map(str, files)))
    print("Restart JupyterLab to see the change.")
    return 0


def cmd_grade(args) -> int:
    # lazy, and light: the workers start before nbgrader is imported (``classroom.grade``)
    from autograder.classroom.export import export_csv
    from autograder.classroom.grade import grade_submissions
    from autograder.pipeline.sandbox import ISOLATION_ENV

    skip_slow_imports()
    os.environ.setdefault(ISOLATION_ENV, "auto" if args.allow_unisolated else "required")
    course = Path(args.course) if args.course else _course_here()

    def run():
        summary = grade_submissions(Path(args.submissions), args.assignment, course, jobs=args.jobs,
                                    time_limit=args.time_limit, scheduler=args.scheduler,
                                    retry_failed=args.retry_failed, progress=not args.no_progress)
        print(shown(summary.report()))
        return summary, export_csv(course, Path(args.csv))
    done = _instructor_step(run)
    if isinstance(done, int):
        return done
    summary, csv = done
    print(shown(f"grades written to {csv}"))
    return 1 if summary.failed else 0


def cmd_leaderboard(args) -> int:
    # lazy: torch and nbgrader (see above)
    from autograder.classroom.pools import NoWorkers
    from autograder.pipeline.sandbox import SandboxUnavailable, isolation, ISOLATION_ENV
    from autograder.race.gradebook import GradebookError, check
    from autograder.race.heldout import Unseen
    from autograder.race.leaderboard import NoEntry, race, summary
    from autograder.race.verify import Rules

    os.environ.setdefault(ISOLATION_ENV, "auto" if args.allow_unisolated else "required")
    rules = Rules(budget=args.budget, seeds=args.seeds, params=args.params)
    out = Path(args.out)
    course = Path(args.course) if args.course else _course_here()
    if args.gradebook and args.points <= 0:
        print("autograder: --gradebook writes the race's points: say how many with --points N", file=sys.stderr)
        return 2
    try:
        if args.gradebook:  # before hours of racing, not after
            check(course, args.assignment)
        isolated, said = isolation()
        if not isolated:
            print(shown(said), file=sys.stderr)
        ranked, line = race(args.assignment, Path(args.submissions), out, rules,
                            Path(args.heldout) if args.heldout else None, jobs=args.jobs, isolate=isolated,
                            most=args.points, award=args.award, scheduler=args.scheduler)
    except (SandboxUnavailable, Unseen, NoEntry, GradebookError, NoWorkers, OSError) as err:
        print(f"autograder: {shown(err)}", file=sys.stderr)
        return 2
    print(shown(summary(ranked, line)))
    print(shown(f"leaderboard written to {out / 'leaderboard.html'} and {out / 'leaderboard.csv'}"))
    return _race_gradebook(course, args, ranked, line) if args.gradebook else 0


def _race_gradebook(course: Path, args, ranked, line: float) -> int:
    """``leaderboard --gradebook``: the race's points into the course's gradebook; 1 where some
    learner's could not be written, 2 where none could."""
    from autograder.race.gradebook import GradebookError, race_points, write_points  # lazy: as in cmd_leaderboard

    try:
        done = write_points(course, args.assignment, race_points(ranked, line, args.points, args.award))
    except GradebookError as err:
        print(f"autograder: {shown(err)}", file=sys.stderr)
        return 2
    print(shown(done.report()))
    return 1 if done.not_written else 0


def cmd_regrade(args) -> int:
    # lazy, and light: as in cmd_grade
    from autograder.classroom.regrade import regrade
    from autograder.pipeline.sandbox import ISOLATION_ENV

    skip_slow_imports()
    os.environ.setdefault(ISOLATION_ENV, "auto" if args.allow_unisolated else "required")
    course = Path(args.course) if args.course else _course_here()
    done = _instructor_step(lambda: regrade(args.assignment, course, release=args.release_feedback,
                                            jobs=args.jobs, time_limit=args.time_limit,
                                            scheduler=args.scheduler, progress=not args.no_progress))
    if isinstance(done, int):
        return done
    print(shown(done.report()))
    return 1 if done.summary.failed else 0


def cmd_export(args) -> int:
    from autograder.classroom.export import export  # lazy: nbgrader (see above)

    course = Path(args.course) if args.course else _course_here()
    out = Path(args.out or f"{args.layout}_grades.csv")
    try:
        done = export(args.layout, Path(args.roster), out, course, args.assignment, args.moodle_id)
    except (OSError, ValueError) as err:
        print(f"autograder: {shown(err)}", file=sys.stderr)
        return 2
    print(shown(done.report()))
    return 1 if done.unknown or done.collisions else 0


def cmd_release_solutions(args) -> int:
    from autograder.classroom.solutions import release_solutions  # lazy: nbgrader (see above)

    course = Path(args.course) if args.course else _course_here()
    name = _instructor_step(lambda: release_solutions(args.assignment, course, args.before_due_date))
    if isinstance(name, int):
        return name
    print(shown(f"released {name}: learners fetch it from their Assignment List "
                f"(or: nbgrader fetch_assignment {name})"))
    return 0


def _instructor_step(step):
    """``step()``, or the exit status of a command it stopped: 130 interrupted, 2 refused."""
    from autograder.pipeline.sandbox import SandboxUnavailable  # lazy: as in cmd_grade

    try:
        return step()
    except KeyboardInterrupt:
        print("\nautograder: interrupted; what was done is saved. Run the same command again "
              "to continue.", file=sys.stderr)
        return 130
    except Exception as err:
        from autograder.grading import GradingError  # lazy: nbgrader, not needed unless it failed
        if not isinstance(err, (GradingError, SandboxUnavailable)):
            raise
        print(f"autograder: {shown(err)}", file=sys.stderr)
        return 2


def cmd_hub(args) -> int:
    # lazy: the hub's set-up imports nbgrader (see above)
    from autograder.hub.course_file import CourseFileError, load
    from autograder.hub.setup import SetupError, remove, setup

    try:
        hub = load(args.course_file)
        done = setup(hub, Path(args.course_file).resolve()) if args.action == "setup" else remove(hub)
    except (CourseFileError, SetupError) as err:
        print(f"autograder: {shown(err)}", file=sys.stderr)
        return 2
    print(shown("\n".join(done)))
    if args.action == "setup":
        print(f"Start the hub: cd {hub.root} && {Path(sys.executable).parent / 'jupyterhub'} -f jupyterhub_config.py")
    return 0


def _course_here() -> Path:
    """The nbgrader course directory to grade into: the working directory if it is one."""
    return Path.cwd() if Path("nbgrader_config.py").exists() else REPO


def _class_options(p: argparse.ArgumentParser) -> None:
    """The options of the commands that grade a class (grade, regrade)."""
    p.add_argument("-j", "--jobs", type=int, default=2, help="notebooks graded in parallel here")
    p.add_argument("--course", help="the nbgrader course directory (default: the working directory "
                   "if it has an nbgrader_config.py, else this repository)")
    p.add_argument("--time-limit", type=float, default=180, metavar="SECONDS",
                   help="stop grading a submission after this long (default 180)")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="grade on a Dask cluster, e.g. tcp://HOST:8786, instead of --jobs here")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--allow-unisolated", action="store_true",
                   help="grade even where the sandbox (bubblewrap) cannot run (unsafe for a class)")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="autograder", description=__doc__.replace(" [trusted]", "", 1),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("generate", help="regenerate notebooks/ from solutions/")
    p.add_argument("assignments", nargs="*", help="e.g. 02_attention (default: all)")
    p.set_defaults(func=cmd_generate)

    p = sub.add_parser("submit", help="grade one notebook and write an HTML feedback report")
    p.add_argument("notebook")
    p.add_argument("-a", "--assignment", help="e.g. 02_attention (default: from the file name)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--feedback", help="where to write the HTML report (default: beside the notebook)")
    p.add_argument("--race", action="store_true", help="then race the notebook's race entry (notebook 06) "
                   "as the class race does, beside the course's entry (about 20 minutes)")
    p.set_defaults(func=cmd_submit)

    p = sub.add_parser("validate", help="check a notebook as the grader would (nbgrader's Validate)")
    p.add_argument("notebook")
    p.add_argument("--json", action="store_true", help="print nbgrader's result dictionary as JSON")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("instructor-mode", help="show (on) or hide (off) nbgrader's instructor "
                       "tools in this environment's JupyterLab")
    p.add_argument("state", choices=["on", "off"])
    p.set_defaults(func=cmd_instructor_mode)

    p = sub.add_parser("grade", help="grade a class into the gradebook, resumably (instructor)")
    p.add_argument("submissions", help="nbgrader submitted/ folder, a flat folder or a .zip of notebooks")
    p.add_argument("-a", "--assignment", required=True)
    p.add_argument("--csv", default="grades.csv", help="where to export the grades")
    p.add_argument("--retry-failed", action="store_true",
                   help="grade again the submissions an earlier run could not grade")
    _class_options(p)
    p.set_defaults(func=cmd_grade)

    p = sub.add_parser("leaderboard", help="the class race: train every entry in the sandbox under a "
                       "CPU budget, score it on held-out text, rank the class (instructor)")
    p.add_argument("assignment", help="the assignment whose notebooks hold the race entry (06_gpt)")
    p.add_argument("submissions", help="nbgrader submitted/ folder, a flat folder or a .zip of notebooks")
    p.add_argument("--out", default="race", help="where the leaderboard, feedback and runs go")
    p.add_argument("--budget", type=float, default=300.0, help="CPU seconds of training per seed")
    p.add_argument("--seeds", type=int, default=3, help="random seeds per entry")
    p.add_argument("--params", type=int, default=2_000_000, help="most numbers a trained model may hold")
    p.add_argument("--heldout", help="the text to score on (default: the play set-up keeps aside)")
    p.add_argument("--jobs", type=int, default=1, help="entries trained at once")
    p.add_argument("--scheduler", metavar="ADDRESS", help="race on a Dask cluster, e.g. tcp://HOST:8786, each "
                   "(entry, seed) on a worker, instead of --jobs here")
    p.add_argument("--points", type=float, default=0.0, help="points the CSV's points column gives (default 0)")
    p.add_argument("--award", choices=("line", "rank"), default="line",
                   help="line: all the points for beating the 5-gram; rank: by place, first to last")
    p.add_argument("--gradebook", action="store_true",
                   help="also write each learner's points into the course's nbgrader gradebook, as extra "
                   "credit on the graded cell above the race (the formgrader and nbgrader export count it)")
    p.add_argument("--course", help="the nbgrader course directory whose gradebook --gradebook writes "
                   "(as for grade)")
    p.add_argument("--allow-unisolated", action="store_true", help="run without the sandbox where it cannot start")
    p.set_defaults(func=cmd_leaderboard)

    p = sub.add_parser("regrade", help="grade every submission of an assignment again after the "
                       "grader changed; print whose score changed (instructor)")
    p.add_argument("assignment")
    p.add_argument("--release-feedback", action="store_true",
                   help="release the new feedback to the learners whose result changed")
    _class_options(p)
    p.set_defaults(func=cmd_regrade)

    p = sub.add_parser("export", help="the gradebook as the CSV Canvas or Moodle imports (instructor)")
    p.add_argument("layout", choices=["canvas", "moodle"])
    p.add_argument("--roster", required=True, help="CSV of the learners: a login and/or an e-mail "
                   "column (Canvas's own grades export will do)")
    p.add_argument("-a", "--assignment", action="append", help="only this assignment (repeatable)")
    p.add_argument("--moodle-id", choices=["email", "username", "idnumber"], default="email",
                   help="what identifies a learner to Moodle (default: email)")
    p.add_argument("--out", help="where to write it (default: LAYOUT_grades.csv)")
    p.add_argument("--course", help="the nbgrader course directory (as for grade)")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("release-solutions", help="release the model solutions through nbgrader's "
                       "exchange once the assignment is due (instructor)")
    p.add_argument("assignment")
    p.add_argument("--before-due-date", action="store_true",
                   help="release although learners may still hand it in")
    p.add_argument("--course", help="the nbgrader course directory (as for grade)")
    p.set_defaults(func=cmd_release_solutions)

    p = sub.add_parser("hub", help="set up (or remove) a JupyterHub for the courses a course file "
                       "describes: users, exchange, a formgrader per course (as root; docs/instructor.md)")
    p.add_argument("action", choices=["setup", "remove"])
    p.add_argument("course_file", help="the TOML file of the hub's courses (autograder/hub/course_file.py)")
    p.set_defaults(func=cmd_hub)

    args = parser.parse_args(argv)
    quiet()
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
