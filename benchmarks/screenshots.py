"""Remake the README's page screenshots from the running app.

    python benchmarks/screenshots.py [--out docs] [--only verifiers real-text]

Starts `streamlit run app.py` on loopback and drives Debian's Chromium with Playwright (the
harness of tests/browser.py), at a 1280 x 800 window, and writes one PNG per page into
``--out``. Pages that need a click to show what README says about them get it first:
the Interview walkthrough answers its first question (so a reveal shows) and Real text runs
to 200 characters (so generated text shows). Each image is then reduced to a 256-colour
palette to keep it to a few hundred KB. Not a test: it asserts nothing about the pages beyond
their title being on screen and no exception box; look at the images before committing them.
"""

from __future__ import annotations

import argparse
import io
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import browser  # noqa: E402

WIDTH, HEIGHT = 1280, 800
MAX_BYTES = 400_000  # a README image larger than this is worth a look


def answer_first_question(page: object) -> None:
    """Type an answer to the walkthrough's first question and check it, so the reveal shows."""
    box = page.get_by_label("Your answer").first  # type: ignore[attr-defined]
    box.fill("0.7")
    box.press("Enter")  # commit the number input before the click reads it
    page.wait_for_timeout(500)  # type: ignore[attr-defined]
    browser.click_button(page, "Check")
    browser.wait_idle(page, "Right")
    # The reveal and its live widget sit below the question: start the view at the question.
    page.locator("[data-testid='stMain'] h3").first.evaluate("e => e.scrollIntoView({block: 'start'})")  # type: ignore[attr-defined]
    page.wait_for_timeout(500)  # type: ignore[attr-defined]


def run_to_200(page: object) -> None:
    browser.click_button(page, "Run to 200 characters")
    browser.wait_idle(page, ": emitted")  # the last round's caption


# name (file stem and url path), the text its page shows once rendered, what to do before the shot
SHOTS: dict[str, tuple[str, Callable[[object], None] | None]] = {
    "verifiers": ("Verifiers", None),
    "sampling-settings": ("Sampling settings", None),
    "interview": ("Interview walkthrough", answer_first_question),
    "real-text": ("Real text", run_to_200),
}


def shrink(png: bytes) -> bytes:
    """The same picture as a 256-colour palette PNG (UI screenshots have few colours)."""
    from PIL import Image

    img = Image.open(io.BytesIO(png)).convert("RGB")
    out = io.BytesIO()
    img.quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(out, format="PNG", optimize=True)
    return out.getvalue()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=browser.ROOT / "docs")
    ap.add_argument("--only", nargs="*", choices=sorted(SHOTS), default=sorted(SHOTS))
    args = ap.parse_args()
    if browser.missing():
        sys.exit(f"cannot run: {browser.missing()}")
    args.out.mkdir(parents=True, exist_ok=True)
    with browser.streamlit_server() as url, browser.browser_page(WIDTH, HEIGHT) as page:
        for name in args.only:
            text, before = SHOTS[name]
            page.goto(f"{url}/{name}")  # type: ignore[attr-defined]
            browser.wait_idle(page, text, timeout_ms=60_000)
            if before is not None:
                before(page)
                browser.wait_idle(page, timeout_ms=60_000)
            problems = browser.exceptions(page) + browser.dialogs(page)
            if problems:
                sys.exit(f"{name}: the page shows {problems}")
            page.mouse.move(5, HEIGHT - 5)  # type: ignore[attr-defined]  # no hover effects or chart toolbars
            page.wait_for_timeout(300)  # type: ignore[attr-defined]
            data = shrink(page.screenshot(full_page=False))  # type: ignore[attr-defined]
            path = args.out / f"{name}.png"
            path.write_bytes(data)
            flag = "  (large: look at it)" if len(data) > MAX_BYTES else ""
            print(f"{path}: {len(data) / 1000:.0f} KB{flag}")


if __name__ == "__main__":
    main()
