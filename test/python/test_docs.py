"""Every code block of README.md and docs/*.md runs (issue 38): one test per block, named
`<page>:<line>:<language>`, so a block that breaks fails its own test.

A fence's info string is the block's language, then options (`/```sh slow/`):

- `python` and `sh`: run in the order of the page, in one subprocess per page (this file
  run as a script). The python blocks share one namespace; the sh blocks run under
  `bash -e -o pipefail` with build/bin, then the environment's bin, first on PATH. Both run in a temporary directory
  that mirrors the repository root (a symbolic link per top-level entry, `build` and
  `.venv` to the build and environment under test), so a block written "from the
  repository root" runs as written, and what it writes (`tanhmax.so`) stays there for the
  blocks after it. Kernels compiled by `attn.compile` go to $ATTN_CACHE_DIR, the
  session's cache (conftest.session_compiles), so a kernel other tests built is reused.
  Options: `slow` (minutes of training or building: run only with ATTN_DOCS_SLOW=1),
  `cuda` (needs a CUDA device: run only where torch sees one).
- `mlir`: a complete module, parsed and verified by build/bin/attn-opt. Options:
  `continues` (the block is verified after the page's previous mlir block, whose
  symbols it uses), `excerpt=PATH` (an abridged copy of PATH: PATH is verified, and each
  line of the block other than `...` is a line of PATH, in order).
- `c++`: `excerpt=PATH`: the block's lines are consecutive lines of PATH (leading
  whitespace aside), a source file that the build compiles (and ctest runs).
- `python excerpt=PATH`: not run here but checked the same way against PATH, a test or
  a program a test runs (named in a test under test/python/): code that only makes sense
  inside a larger program (several processes, a training loop).
- `text`: output, grammar or diagrams; not run.

The README's setup and test commands are not run here: CI runs them (.ci/run).
docs/TUTORIAL.md's python blocks are one program that test_tutorial.py runs and checks.
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("ATTN_BUILD_DIR", str(REPO / "build"))).resolve()
PAGES = [REPO / "README.md"] + sorted((REPO / "docs").glob("*.md"))
LANGUAGES = {"python", "sh", "mlir", "c++", "text"}
RUN_BY_CI = ("bash scripts/setup.sh && bash scripts/demo.sh   # install every dependency, build, "
             "compile TanhMax, train with it\n"
             "bash scripts/test.sh                            # the whole test suite: lit, "
             "ctest, pytest\n")
RUN_BY_OTHER_TESTS = {("docs/TUTORIAL.md", "python"): "test_tutorial.py"}


class Block:
    def __init__(self, page, line, info, text):
        self.page, self.line, self.text = page, line, text
        words = info.split()
        self.language = words[0] if words else ""
        self.options = dict(w.split("=", 1) if "=" in w else (w, True) for w in words[1:])

    @property
    def id(self):
        return f"{self.page}:{self.line}:{self.language or 'none'}"


def blocks_of(path):
    """The fenced blocks of a Markdown page, with the line of their opening fence."""
    page = str(path.relative_to(REPO))
    lines = path.read_text().split("\n")
    blocks, n = [], 0
    while n < len(lines):
        opening = re.match(r"^```(.*)$", lines[n])
        if opening:
            end = next((m for m in range(n + 1, len(lines)) if lines[m].rstrip() == "```"), None)
            assert end is not None, f"{page}:{n + 1}: a code block is never closed"
            blocks.append(Block(page, n + 1, opening.group(1).strip(), "\n".join(lines[n + 1:end]) + "\n"))
            n = end
        n += 1
    return blocks


def skip_reason(block):
    """Why this environment does not run the block, or None."""
    if block.options.get("slow") and os.environ.get("ATTN_DOCS_SLOW") != "1":
        return "slow (minutes): run with ATTN_DOCS_SLOW=1"
    if block.options.get("cuda"):
        import torch
        if not torch.cuda.is_available():
            return "SKIP: no CUDA device"
    return None


def mirror_of_repository(directory):
    """`directory` with a link per top-level entry of the repository, `build` and `.venv`
    pointing at the build and the environment under test."""
    for entry in REPO.iterdir():
        if entry.name not in {"build", ".venv", ".git"}:
            (directory / entry.name).symlink_to(entry)
    (directory / "build").symlink_to(BUILD)
    (directory / ".venv").symlink_to(Path(sys.prefix))


def run_page(page, results_path):
    """Runs `page`'s python and sh blocks in order here (the subprocess of one page) and
    writes {block id: [status, message, seconds]}."""
    namespace = {"__name__": "__docs__"}
    # As in an activated environment (`source .venv/bin/activate`): its python3 first,
    # which attn-compile --cuda-targets runs for attn.triton_aot.
    env = dict(os.environ, PATH=os.pathsep.join([str(BUILD / "bin"), str(Path(sys.executable).parent),
                                                 os.environ["PATH"]]))
    results = {}
    for block in blocks_of(REPO / page):
        if (block.language not in ("python", "sh") or block.text == RUN_BY_CI
                or block.options.get("excerpt")):
            continue
        reason = skip_reason(block)
        if reason:
            results[block.id] = ["skipped", reason, 0.0]
            continue
        start = time.monotonic()
        try:
            if block.language == "python":
                # Padding puts a traceback's line numbers on the page's lines.
                exec(compile("\n" * block.line + block.text, page, "exec"), namespace)
            else:
                run = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", block.text], env=env,
                                     capture_output=True, text=True, timeout=900)
                if run.returncode != 0:
                    raise RuntimeError(f"exit status {run.returncode}\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}")
            results[block.id] = ["passed", "", time.monotonic() - start]
        except BaseException:  # noqa: BLE001 - every failure is the block's result
            results[block.id] = ["failed", traceback.format_exc()[-6000:], time.monotonic() - start]
    Path(results_path).write_text(json.dumps(results))


if __name__ == "__main__":
    os.environ.setdefault("MPLBACKEND", "Agg")
    run_page(sys.argv[1], sys.argv[2])
    sys.exit(0)

import pytest  # noqa: E402  (the page runner above needs only the standard library)

ALL_BLOCKS = [b for page in PAGES for b in blocks_of(page)]
_page_results = {}


def page_results(page):
    """The results of `page`'s python and sh blocks, from one subprocess per page."""
    if page not in _page_results:
        with tempfile.TemporaryDirectory(prefix="attn-docs-") as tmp:
            work = Path(tmp) / "repo"
            work.mkdir()
            mirror_of_repository(work)
            out = Path(tmp) / "results.json"
            run = subprocess.run([sys.executable, __file__, page, str(out)], cwd=work,
                                 capture_output=True, text=True, timeout=1800)
            _page_results[page] = (json.loads(out.read_text()) if out.exists() else {},
                                   run.stdout[-3000:] + run.stderr[-3000:])
    return _page_results[page]


def attn_opt(text, tmp_path):
    source = tmp_path / "block.mlir"
    source.write_text(text)
    run = subprocess.run([str(BUILD / "bin" / "attn-opt"), str(source), "-o", os.devnull],
                         capture_output=True, text=True)
    assert run.returncode == 0, f"attn-opt refuses the block:\n{run.stderr[-3000:]}\n--- block:\n{text}"


def stripped_lines(text, comments=True):
    """The non-blank lines of `text` without their indentation (and, unless `comments`,
    without trailing `//` comments)."""
    lines = (line if comments else re.sub(r"\s*//.*$", "", line) for line in text.split("\n"))
    return [line.strip() for line in lines if line.strip()]


def previous_mlir(block):
    """The page's mlir blocks that `block` continues, in order, ending with it."""
    chain = [block]
    page_blocks = [b for b in ALL_BLOCKS if b.page == block.page and b.language == "mlir"]
    at = page_blocks.index(block)
    while chain[0].options.get("continues"):
        at -= 1
        assert at >= 0, f"{block.id} continues no earlier mlir block"
        chain.insert(0, page_blocks[at])
    return chain


@pytest.mark.parametrize("block", ALL_BLOCKS, ids=[b.id for b in ALL_BLOCKS])
def test_block(block, tmp_path):
    assert block.language in LANGUAGES, (
        f"{block.id}: a code block needs one of the languages {sorted(LANGUAGES)} "
        f"(`text` for output), got {block.language!r}")
    if block.language == "text":
        return
    if block.text == RUN_BY_CI:
        return   # CI runs the README's two commands (.ci/run)
    runner = RUN_BY_OTHER_TESTS.get((block.page, block.language))
    if runner:
        module = __import__(runner[:-3])
        assert block.text.strip() in module.program(), f"{block.id} is not part of {runner}'s program"
        return
    if block.language == "python" and block.options.get("excerpt"):
        check_excerpt_of_tested_program(block)
    elif block.language in ("python", "sh"):
        results, log = page_results(block.page)
        status, message, _ = results.get(block.id, ["failed", f"the page's runner did not reach it:\n{log}", 0.0])
        if status == "skipped":
            pytest.skip(message)
        assert status == "passed", f"{block.id} fails:\n{message}"
    elif block.language == "mlir":
        excerpt = block.options.get("excerpt")
        if excerpt:
            source = (REPO / excerpt).read_text()
            attn_opt(source, tmp_path)
            remaining = iter(stripped_lines(source, comments=False))
            for line in stripped_lines(block.text, comments=False):
                if line != "...":
                    assert any(line == s for s in remaining), f"{block.id}: {line!r} is not in {excerpt} (in order)"
        else:
            attn_opt("\n".join(b.text for b in previous_mlir(block)), tmp_path)
    elif block.language == "c++":
        excerpt = block.options.get("excerpt")
        assert excerpt, f"{block.id}: a c++ block names the compiled file it is part of (excerpt=PATH)"
        path = REPO / excerpt
        named = any(path.name in cmake.read_text() for cmake in path.parent.glob("CMakeLists.txt"))
        assert named, f"{excerpt} is not compiled by its directory's CMakeLists.txt"
        wanted, have = stripped_lines(block.text), stripped_lines(path.read_text())
        assert any(have[n:n + len(wanted)] == wanted for n in range(len(have))), (
            f"{block.id} is not verbatim in {excerpt}")


def check_excerpt_of_tested_program(block):
    """A python excerpt's lines are consecutive lines of its file, which the tests run."""
    excerpt = block.options["excerpt"]
    path = REPO / excerpt
    tests = sorted((REPO / "test" / "python").glob("test_*.py"))
    tested = path in tests or any(path.name in test.read_text() for test in tests)
    assert tested, f"{block.id}: {excerpt} is neither a test nor named by one under test/python"
    wanted, have = stripped_lines(block.text), stripped_lines(path.read_text())
    assert any(have[n:n + len(wanted)] == wanted for n in range(len(have))), (
        f"{block.id} is not verbatim in {excerpt}")


def test_every_page_has_its_blocks_collected():
    """The collector sees the blocks (a test that cannot fail is a defect)."""
    assert len(ALL_BLOCKS) > 30
    assert {b.language for b in ALL_BLOCKS} >= {"python", "sh", "mlir", "c++", "text"}


def heading_anchors(path):
    """The anchors GitHub gives the headings of a Markdown page."""
    anchors, fenced = set(), False
    for line in path.read_text().split("\n"):
        fenced ^= line.startswith("```")
        heading = not fenced and re.match(r"^#{1,6} (.*)$", line)
        if heading:
            anchors.add(re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower()).replace(" ", "-"))
    return anchors


LINKED_PAGES = PAGES + [REPO / "bench" / "RESULTS.md"]


@pytest.mark.parametrize("page", LINKED_PAGES, ids=[str(p.relative_to(REPO)) for p in LINKED_PAGES])
def test_links_name_existing_files_and_headings(page):
    broken = []
    for target, anchor in re.findall(r"\]\(([^)#\s]*)(?:#([^)\s]*))?\)", page.read_text()):
        if re.match(r"^[a-z]+:", target):
            continue   # a URL
        path = (page.parent / target).resolve() if target else page
        if not path.exists():
            broken.append(f"{target}: no such file")
        elif anchor and path.suffix == ".md" and anchor not in heading_anchors(path):
            broken.append(f"{target}#{anchor}: no such heading")
    assert not broken, f"{page.relative_to(REPO)}: " + "; ".join(broken)
