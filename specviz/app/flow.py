"""The app's pages: the one table of them (file, title, icon, url path, what each teaches), in class order.

Everything that lists pages reads :data:`LESSONS`: app.py's navigation (the sidebar, in this
order), Home (each page with its line), and the "Next: ..." link that ends every page
(:func:`next_lesson`; the last lesson leads back to Home). Titles and url paths are part of the
app's interface: shared links and the browser tests use them.
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
    file: str  # the page's file (in app_pages/, not pages/: see docs/design.md)
    title: str  # its title in the sidebar, the browser tab and the Next links
    icon: str  # its sidebar icon
    url_path: str  # its url path ("" for Home, the default page)
    teaches: str  # one line, for Home

    def page_options(self) -> dict[str, object]:
        """Keywords of ``st.Page`` for this page: title, icon, and its url path or default=True for Home."""
        where = {"url_path": self.url_path} if self.url_path else {"default": True}
        return {"title": self.title, "icon": self.icon, **where}


LESSONS: tuple[Lesson, ...] = (
    Lesson(
        "app_pages/home.py",
        "Home",
        ":material/home:",
        "",
        "What speculative sampling is, the rule in four steps, and where to start.",
    ),
    Lesson(
        "app_pages/one_round.py",
        "One round, step by step",
        ":material/casino:",
        "one-round",
        "One verification played step by step: drafts from q, each coin against p/q, the residual or the bonus, "
        "and the histogram of many rounds converging to p.",
    ),
    Lesson(
        "app_pages/exact.py",
        "Why it is exact",
        ":material/balance:",
        "why-exact",
        "Why the output is exactly p: min(p, q) plus (1 − a)·residual on your own p and q, each mistake's exact law; "
        "sample 1, 1,000 or 100,000 times and trace one coin.",
    ),
    Lesson(
        "app_pages/bug_lab.py",
        "Bug lab",
        ":material/bug_report:",
        "bug-lab",
        "Predict whether the end-to-end chi-square test catches a classic mistake, run it, and read its power.",
    ),
    Lesson(
        "app_pages/find_bug.py",
        "Find the bug",
        ":material/search:",
        "find-the-bug",
        "Twenty histograms, one from a broken verifier: where the eye stops seeing what the test still sees.",
    ),
    Lesson(
        "app_pages/tokens.py",
        "Tokens per step",
        ":material/trending_up:",
        "tokens-per-step",
        "What the rule buys: expected tokens per target pass against K, measured beside the closed form.",
    ),
    Lesson(
        "app_pages/verifiers.py",
        "Verifiers",
        ":material/gavel:",
        "verifiers",
        "Every rule side by side in the exact court: chain, block, trees, and lossy rules with their TV.",
    ),
    Lesson(
        "app_pages/batch.py",
        "Batch",
        ":material/view_column:",
        "batch",
        "A real batched verifier on ragged rows, NumPy against PyTorch on the same uniforms, with timings.",
    ),
    Lesson(
        "app_pages/settings.py",
        "Sampling settings",
        ":material/tune:",
        "sampling-settings",
        "Temperature, top-k and top-p: which p and q the rule must see to stay lossless.",
    ),
    Lesson(
        "app_pages/text.py",
        "Real text",
        ":material/edit_note:",
        "real-text",
        "Speculative sampling writing English with two character n-gram models, and staying exact.",
    ),
    Lesson(
        "app_pages/interview.py",
        "Interview walkthrough",
        ":material/school:",
        "interview",
        "The questions interviewers ask, each answered from a computed check, with a cheat sheet.",
    ),
)


def next_lesson(url_path: str) -> Lesson | None:
    """The lesson after the page at ``url_path`` (after the last one: Home); None for a page not in the table."""
    if not isinstance(url_path, str):
        raise InputError("url_path", "a page's url path (str)", type(url_path).__name__)
    paths = [lesson.url_path for lesson in LESSONS]
    if url_path not in paths:
        return None
    return LESSONS[(paths.index(url_path) + 1) % len(LESSONS)]
