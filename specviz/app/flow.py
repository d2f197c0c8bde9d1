"""The order a class walks the pages in, and what each one teaches: the one place both live.

Home lists :data:`LESSONS` with their lines; the app ends every page with a "Next: ..." link to
:func:`next_lesson` (the last lesson leads back to Home). The navigation menu keeps its own order
in app.py; tests/test_app_classroom.py checks that the two name the same pages.
"""

from __future__ import annotations

from typing import NamedTuple

from ..errors import InputError


class EndOfPage(Exception):  # noqa: N818 (not an error: the page is done)
    """Raised by a page with nothing more to show, where it would call ``st.stop()``.

    ``st.stop()`` ends the whole run, so the app could not add the "Next" link after the page;
    app.py catches this instead and goes on to the link.
    """


class Lesson(NamedTuple):
    file: str  # the page's file, as app.py registers it
    url_path: str  # its url path ("" for Home)
    teaches: str  # one line, for Home


LESSONS: tuple[Lesson, ...] = (
    Lesson("app_pages/home.py", "", "What speculative sampling is, the rule in four steps, and where to start."),
    Lesson(
        "app_pages/one_round.py",
        "one-round",
        "One verification played step by step: drafts from q, each coin against p/q, the residual or the bonus, "
        "and the histogram of many rounds converging to p.",
    ),
    Lesson(
        "app_pages/exact.py",
        "why-exact",
        "Why the output is exactly p: min(p, q) plus (1 − a)·residual on your own p and q, each mistake's exact law; "
        "sample 1, 1,000 or 100,000 times and trace one coin.",
    ),
    Lesson(
        "app_pages/bug_lab.py",
        "bug-lab",
        "Predict whether the end-to-end chi-square test catches a classic mistake, run it, and read its power.",
    ),
    Lesson(
        "app_pages/find_bug.py",
        "find-the-bug",
        "Twenty histograms, one from a broken verifier: where the eye stops seeing what the test still sees.",
    ),
    Lesson(
        "app_pages/tokens.py",
        "tokens-per-step",
        "What the rule buys: expected tokens per target pass against K, measured beside the closed form.",
    ),
    Lesson(
        "app_pages/verifiers.py",
        "verifiers",
        "Every rule side by side in the exact court: chain, block, trees, and lossy rules with their TV.",
    ),
    Lesson(
        "app_pages/batch.py",
        "batch",
        "A real batched verifier on ragged rows, NumPy against PyTorch on the same uniforms, with timings.",
    ),
    Lesson(
        "app_pages/settings.py",
        "sampling-settings",
        "Temperature, top-k and top-p: which p and q the rule must see to stay lossless.",
    ),
    Lesson(
        "app_pages/text.py",
        "real-text",
        "Speculative sampling writing English with two character n-gram models, and staying exact.",
    ),
    Lesson(
        "app_pages/interview.py",
        "interview",
        "The questions interviewers ask, each answered from a computed check, with a cheat sheet.",
    ),
)


def next_lesson(url_path: str) -> Lesson | None:
    """The lesson after the page at ``url_path`` (after the last one: Home); None for a page not in the
    order (a page added to app.py but not here gets no link rather than an error on every run)."""
    if not isinstance(url_path, str):
        raise InputError("url_path", "a page's url path (str)", type(url_path).__name__)
    paths = [lesson.url_path for lesson in LESSONS]
    if url_path not in paths:
        return None
    return LESSONS[(paths.index(url_path) + 1) % len(LESSONS)]
