"""What learners read names the three texts the course cites in a form they can follow.

README.md ("Sources") and notebook 00 §2 list the texts and their short forms: **Week 7** (the
lecture notebook *Deep Learning, Week 7: Transformers*), **the CS182 slides** (*CS182: Introduction
to Machine Learning – RNN LMs + Transformer LMs*) and **the blog post** (the blog post deriving the
Transformer's forward and backward passes). On text whose whitespace is collapsed:

1. "seed" only ever means a random seed: each "seed", "seeds" or "seeded" sits in one of the
   contexts of ``RANDOM_SEED`` ("a seed fixes", "secret seed", ``seed``...), so "seed 001",
   "the seed's formula" or "seed slides" fail;
2. no bare "the lecture notebook", "the lecture" or "the slides": "lecture notebook" stands only
   right before its title, "slide(s)" only as "CS182 slide(s)", right before the slides' title, or
   right before the quoted title of one slide (on the slide "Case Study: GPT-3");
3. a notebook, README.md and docs/*.md name a text in full before any short form of it. The
   docstrings, check messages and course_lib/README.md use the short forms alone.

Read: every cell of solutions/*/*.ipynb (markdown whole, code by its strings and comments; notebooks/
is generated from them), README.md, docs/*.md, course_lib/README.md, autograder/README.md, and the
string literals and comments of autograder/, course_lib/ and benchmarks/.
"""
import io
import re
import tokenize

import nbformat
import pytest

from helpers import REPO, SOLUTIONS

RANDOM_SEED = re.compile(
    r"(?i)\b(?:a|the same|other|fixed|secret|public|random|torch)[ -]seed(?:s|ed)?\b"
    r"|``seeds?``|\bseed\s*=|\bseed\)"
    # the class race's: counted or owned seeds (three seeds, per seed, its own seed), a key or flag
    r"|(?i:\b(?:one|two|three|few|\d+|per|each|every|own|its|race|race's|entry's|that|those|another|drawn)"
    r"\s+seeds?\b)|[\"']seeds?[\"']|--seeds\b"
    # in code: the seed a run answered for, a function of the seeds
    r"|\bseeds?\s*[{)]|\bseed\s+``seed``|\.seed\b")

BARE = {
    "lecture notebook without its title": r"lecture notebook(?! \*?Deep Learning, Week 7: Transformers)",
    "'the lecture' without saying which": r"(?i)\bthe lecture\b(?! notebook\b| slides\b)",
    "slides that are not the CS182 slides":
        r"(?i)(?<!CS182 )\bslides?\b(?! \*?CS182: Introduction| \"|'s title| title)",
}

# text: (its full form, with the words that may lead into it; a mention of it, full or short)
TEXTS = {
    "Week 7": (r"(?:lecture notebook \*?)?\*?Deep Learning, Week 7: Transformers", r"Week 7|lecture notebook"),
    "the CS182 slides": (r"(?:lecture slides \*?)?\*?CS182: Introduction to Machine Learning",
                         r"CS182|\bslides?\b"),
    "the blog post": (r"blog post deriving the Transformer's forward and backward passes", r"(?i)\bblog"),
}


def _strings_and_comments(source: str) -> str:
    """What a learner reads in Python source: its string literals (docstrings, messages) and
    comments. Source that does not tokenize (a cell magic) is read whole."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return source
    return "\n".join(t.string for t in tokens if t.type in (tokenize.STRING, tokenize.COMMENT))


def _notebook_text(path) -> str:
    nb = nbformat.read(path, as_version=4)
    return "\n".join(c.source if c.cell_type == "markdown" else _strings_and_comments(c.source)
                     for c in nb.cells)


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def problems(text: str, in_order: bool = False) -> list[str]:
    """What rules 1 and 2 (and 3 with ``in_order``) find wrong in ``text``, quoted in context."""
    text = _flat(text)
    found = []
    allowed = [m.span() for m in RANDOM_SEED.finditer(text)]
    for m in re.finditer(r"(?i)\bseed(?:s|ed)?\b", text):
        if not any(a <= m.start() and m.end() <= b for a, b in allowed):
            found.append(f"'seed' for a source: ...{text[max(0, m.start() - 40):m.end() + 40]}...")
    for what, pattern in BARE.items():
        for m in re.finditer(pattern, text):
            found.append(f"{what}: ...{text[max(0, m.start() - 40):m.end() + 40]}...")
    if in_order:
        for name, (full, mention) in TEXTS.items():
            first_full = next((m.start() for m in re.finditer(full, text)), len(text))
            shorts = re.sub(full, lambda m: "\0" * len(m.group()), text)
            early = next((m for m in re.finditer(mention, shorts) if m.start() < first_full), None)
            if early:
                found.append(f"{name} cited before it is named in full: "
                             f"...{text[max(0, early.start() - 40):early.end() + 40]}...")
    return found


def _units():
    """(name, text, whether rule 3 applies) for everything a learner reads."""
    for path in sorted(SOLUTIONS.glob("*/*.ipynb")):
        yield path.relative_to(REPO), _notebook_text(path), True
    for path in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        yield path.relative_to(REPO), path.read_text(), True
    for path in (REPO / "course_lib" / "README.md", REPO / "autograder" / "README.md"):
        yield path.relative_to(REPO), path.read_text(), False
    for folder in ("autograder", "course_lib", "benchmarks"):
        for path in sorted((REPO / folder).rglob("*.py")):
            yield path.relative_to(REPO), _strings_and_comments(path.read_text()), False


UNITS = list(_units())


@pytest.mark.parametrize("name, text, in_order", UNITS, ids=[str(u[0]) for u in UNITS])
def test_sources_are_named_so_a_learner_can_follow_them(name, text, in_order):
    found = problems(text, in_order)
    assert not found, f"{name}:\n" + "\n".join(found)


@pytest.mark.parametrize("old", [
    "the shift of the sinusoidal encoding (seed 001, eq. 12)",
    "\"\"\"Seed 000's backward in its own letters.\"\"\"",
    "(seeds 000 and 004)",
    "Seed slides: with Pre-LN, tricks like warm-up are less important.",
    "the seed's blog post writes GPT-3's block",
    "the form of the lecture notebook's eq. (4)",
    "(The slides write the column form)",
    "The two properties from the lecture, shown",
    "as in the seed's W [h_{t-1}, x_t]",
    "(the seed counts from t = 1)",
])
def test_the_old_references_fail(old):
    assert problems(old)


def test_a_short_form_before_the_full_name_fails_in_a_notebook():
    named = ("the lecture notebook *Deep Learning, Week 7: Transformers*, §5 Positional encoding; "
             "later Week 7, eq. (12)")
    assert not problems(named, in_order=True)
    assert problems("Week 7, eq. (12), and then the lecture notebook *Deep Learning, Week 7: "
                    "Transformers*", in_order=True)
    assert problems("the blog's letters", in_order=True)


@pytest.mark.parametrize("fine", [
    "a seed fixes every roll", "drawn from a secret seed", "secret-seeded hidden cases",
    "drawn once from ``seed`` so that", "the same seed for each", "with other seeds, depths",
    "(torch seeds 0, 1, ...)", "print(sample(seed=0))", "Week 7, §5, eq. (12)",
    "the CS182 slides' \"In-Class Poll\"", "the CS182 slide \"Case Study: GPT-3\"",
])
def test_random_seeds_and_the_short_forms_pass(fine):
    assert not problems(fine)
