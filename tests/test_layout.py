"""The layout holds: no circle among the imports of ``course_lib`` or of ``autograder``, imports
inside functions included (each module above the modules it builds on), and no module takes a
private name (``_run``) of another. Every module says in its first line what it is for (and, in
``autograder``, on which side it runs), and every import inside a function says why it is there.

The graph is read from the source with ``ast``: ``import course_lib.x``, ``from course_lib import
x`` and ``from course_lib.x import y`` each draw an arrow to the module named, and to the
packages above it, whose ``__init__`` Python runs first.
"""
import ast
import io
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _module_of(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules(package: str) -> dict[str, Path]:
    return {_module_of(p): p for p in (ROOT / package).rglob("*.py")}


def _resolve(name: str, modules: dict) -> str | None:
    """The longest prefix of the dotted ``name`` that is one of ``modules``."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in modules:
            return candidate
    return None


def _import_runs(tree: ast.AST) -> list[tuple[bool, list[ast.stmt]]]:
    """Every run of consecutive import statements in ``tree``, at the top or inside a function,
    with whether it is inside a function."""
    runs = []

    def visit(node, inside):
        inside = inside or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        for value in ast.iter_fields(node):
            items = value[1] if isinstance(value[1], list) else [value[1]]
            run = []
            for item in items:
                if isinstance(item, (ast.Import, ast.ImportFrom)):
                    run.append(item)
                    continue
                if run:
                    runs.append((inside, run))
                    run = []
                if isinstance(item, ast.AST):
                    visit(item, inside)
            if run:
                runs.append((inside, run))

    visit(tree, False)
    return runs


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    """(module, the names taken from it) for every import in ``path``, at the top or inside a
    function; ``import a.b`` takes no name."""
    found = []
    for _, run in _import_runs(ast.parse(path.read_text())):
        for node in run:
            if isinstance(node, ast.Import):
                found += [(a.name, []) for a in node.names]
            elif node.module and not node.level:
                found.append((node.module, [a.name for a in node.names]))
    return found


def import_graph(package: str) -> dict[str, set[str]]:
    """module -> the modules of ``package`` it imports (at the top or inside a function)."""
    modules = _modules(package)
    graph = {}
    for name, path in modules.items():
        targets = set()
        for module, taken in _imports(path):
            for n in [module] + [f"{module}.{t}" for t in taken]:
                target = _resolve(n, modules)
                while target and target != package:  # the packages above run first
                    targets.add(target)
                    target = target.rpartition(".")[0]
        graph[name] = targets - {name} - {n for n in targets if name.startswith(n + ".")}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_course_lib_has_no_import_circle():
    graph = import_graph("course_lib")
    assert "course_lib.attention" in graph and "course_lib.flash" in graph["course_lib.attention"]
    assert not circles(graph), circles(graph)


def test_autograder_has_no_import_circle():
    graph = import_graph("autograder")
    assert "autograder.classroom.jobs" in graph["autograder.classroom.journal"]
    assert not circles(graph), circles(graph)


def test_no_module_imports_a_private_name_of_another():
    taken = []
    for package in ("autograder", "course_lib"):
        for name, path in _modules(package).items():
            for module, names in _imports(path):
                if module.startswith(package):
                    taken += [f"{name}: {module}.{t}" for t in names
                              if t.startswith("_") and not t.startswith("__")]
    assert not taken, taken


def test_the_circle_finder_finds_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_the_kernel_imports_only_itself_numpy_and_the_standard_library():
    """What the sandbox stages reaches no reference, no judge and no registry, whatever runs:
    the standard library, numpy, IPython's display (the graded cell shows its outputs),
    cloudpickle (the graded cell hands the grader the learner's function to run alone, under a
    memory limit: ``fresh``) and autograder.kernel itself."""
    import sys
    allowed = set(sys.stdlib_module_names) | {"numpy", "IPython", "cloudpickle", "__future__"}
    # the class race's harness trains the learner's torch model, in a process of its own that no
    # graded cell runs in: torch, and the race's trainer (no reference of any exercise)
    also = {"race.py": {"torch", "course_lib.race"}}
    outside = {f"{path.name}: {name}" for path in (ROOT / "autograder" / "kernel").glob("*.py")
               for name, _ in _imports(path)
               if name.split(".")[0] not in allowed and not name.startswith("autograder.kernel")
               and name not in also.get(path.name, ())}
    assert not outside, outside
    assert {module for module, _ in _imports(ROOT / "autograder" / "__init__.py")} <= {"autograder.kernel", "autograder.kernel.cases",
                                                               "autograder.check_cell",
                                                               "autograder.grading", "course_lib.runmode"}


def test_the_sandbox_stages_exactly_the_kernel_folder():
    from autograder.pipeline.sandbox import Sandbox
    with Sandbox(isolate=False) as box:
        staged = {p.relative_to(box.site / "autograder").as_posix()
                  for p in (box.site / "autograder").rglob("*") if p.is_file()}
    kernel = {f"kernel/{p.name}" for p in (ROOT / "autograder" / "kernel").glob("*.py")}
    assert staged == {"__init__.py"} | kernel
    assert {"kernel/cases.py", "kernel/repair.py", "kernel/__init__.py"} <= staged


# ------------------------------------------------------------- what each module says of itself
SANDBOX, LEARNER, JUDGE, TRUSTED = "[sandbox]", "[learner's kernel]", "[trusted; also the check cell]", "[trusted]"
# the side of every module in a folder of autograder (its __init__ included) ...
SIDE_OF_FOLDER = {"kernel": SANDBOX, "judge": JUDGE, "exercises": JUDGE, "pipeline": TRUSTED,
                  "classroom": TRUSTED, "hub": TRUSTED, "race": TRUSTED}
# ... and of every module at the top, each chosen by reading it, and the folders' exceptions
SIDE_OF_MODULE = {
    "autograder": LEARNER, "autograder.check_cell": LEARNER,
    "autograder.picture": JUDGE,  # drawn by the check cell, and by the grader for the report
    "autograder.lab": TRUSTED,  # the Jupyter server's extension: it runs ``autograder validate``
    **{f"autograder.{name}": TRUSTED for name in ("authoring", "cli", "config", "grading",
                                                  "paths", "release", "startup", "terminal", "validate")},
    "autograder.exercises.adequacy": TRUSTED,  # for authors and the tests, never in the check cell
}


def _first_line(path: Path) -> str:
    doc = ast.get_docstring(ast.parse(path.read_text()), clean=False) or ""
    return doc.split("\n")[0].strip()


def _side(module: str) -> str | None:
    """The tag ``module``'s first line ends with: its own, else its folder's (none at the top)."""
    parts = module.split(".")
    return SIDE_OF_MODULE.get(module) or (SIDE_OF_FOLDER.get(parts[1]) if len(parts) > 1 else None)


def test_every_autograder_module_says_what_it_is_for_and_its_side():
    """The docstring's first line says what the module is for and ends with its side's tag."""
    wrong = {name: (_side(name), _first_line(path)) for name, path in _modules("autograder").items()
             if _side(name) is None or not _first_line(path).endswith(_side(name))
             or not _first_line(path).removesuffix(_side(name)).strip()}
    assert not wrong, "\n".join(f"{name}: wants {side}: {line!r}" for name, (side, line) in sorted(wrong.items()))


def test_every_course_lib_module_says_what_it_is_for():
    silent = [name for name, path in _modules("course_lib").items() if not _first_line(path)]
    assert not silent, silent


def _comment_lines(source: str) -> tuple[set[int], set[int]]:
    """(lines holding a comment, lines holding nothing but one)."""
    comments = {t.start[0] for t in tokenize.generate_tokens(io.StringIO(source).readline)
                if t.type == tokenize.COMMENT}
    lines = source.splitlines()
    return comments, {n for n in comments if lines[n - 1].lstrip().startswith("#")}


def test_every_import_inside_a_function_says_why():
    """An import inside a function keeps start-up fast, or keeps the sandbox's imports to
    ``autograder.kernel``; a comment on its line, or on the line above it (or above the first of a
    run of imports) says which."""
    silent = []
    for package in ("autograder", "course_lib"):
        for path in _modules(package).values():
            source = path.read_text()
            comments, comment_lines = _comment_lines(source)
            for inside, run in _import_runs(ast.parse(source)):
                if not inside or run[0].lineno - 1 in comment_lines:
                    continue
                silent += [f"{path.relative_to(ROOT)}:{node.lineno}" for node in run
                           if node.lineno - 1 not in comment_lines
                           and not comments & set(range(node.lineno, node.end_lineno + 1))]
    assert not silent, silent


def test_the_tests_mirror_the_code():
    """tests/ holds a folder per package folder it tests (and notebooks/ for the notebooks):
    whoever changes autograder/pipeline/ finds its tests under tests/autograder/pipeline/."""
    tests = ROOT / "tests"
    folders = {p.parent.relative_to(tests) for p in tests.rglob("test_*.py")}
    assert Path("autograder/pipeline") in folders and Path("course_lib") in folders
    strays = [str(f) for f in folders
              if f != Path(".") and f != Path("notebooks") and not (ROOT / f).is_dir()]
    assert not strays, f"test folders with no code folder of the same name: {strays}"
    loose = sorted(p.name for p in tests.glob("test_*.py"))
    assert loose == ["test_layout.py", "test_packaging.py"], loose  # about the repository as a whole
