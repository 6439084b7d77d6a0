"""Shared fixtures for the Python tests of attn.

The build directory is $ATTN_BUILD_DIR (default <repo>/build); it must hold
bin/attn-compile and runtime/libattn_runtime.so. A missing build is a test *failure*
(not a skip): CI must notice it.
"""
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("ATTN_BUILD_DIR", str(REPO / "build"))).resolve()
EXAMPLES = REPO / "examples" / "normalizers"
ATTN_COMPILE = BUILD / "bin" / "attn-compile"
RUNTIME_LIB = Path(os.environ.get("ATTN_RUNTIME_LIB") or BUILD / "runtime" / "libattn_runtime.so").resolve()
# Artifacts compiled beforehand on another machine (scripts/gpu-artifacts.sh), for a GPU
# machine that has no compiler: <dir>/<name>.so (with GPU code), <dir>/<name>-cpu.so.
PREBUILT = Path(os.environ["ATTN_PREBUILT_ARTIFACTS"]) if os.environ.get("ATTN_PREBUILT_ARTIFACTS") else None


def prebuilt_artifact(name):
    """The prebuilt artifact `name` (fails the test when $ATTN_PREBUILT_ARTIFACTS lacks it)."""
    path = PREBUILT / f"{name}.so"
    if not path.exists():
        pytest.fail(f"{path} not found: scripts/gpu-artifacts.sh builds it", pytrace=False)
    return str(path)

# The attn package itself is installed in the project's environment (scripts/setup.sh);
# these are the tests' own helpers.
for p in (REPO / "test" / "reference", REPO / "test" / "python"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

# Exercise the runtime's parallel paths (at::parallel_for over batch x head x query
# blocks) even where torch defaults to one thread: $ATTN_TEST_THREADS, default 2.
torch.set_num_threads(int(os.environ.get("ATTN_TEST_THREADS", "2")))

NORMALIZER_NAMES = ["softmax", "tanhmax", "multimax", "sigsoftmax",
                    "sigmoid", "relu", "softplus", "expressive", "linear"]


def _load_runtime():
    """Import the Python wrapper and make sure torch.ops.attn is registered."""
    if not RUNTIME_LIB.exists():
        pytest.fail(f"attn runtime not built: {RUNTIME_LIB} does not exist "
                    f"(set ATTN_BUILD_DIR or build with `ninja -C {BUILD}`)", pytrace=False)
    os.environ.setdefault("ATTN_BUILD_DIR", str(BUILD))
    os.environ.setdefault("ATTN_RUNTIME_LIB", str(RUNTIME_LIB))   # for the wrapper
    try:
        import attn  # noqa: F401  (installed editable by scripts/setup.sh)
    except Exception as e:  # pragma: no cover - reported as a failure
        pytest.fail(f"cannot import attn (run the tests with the environment scripts/setup.sh "
                    f"made, e.g. .venv/bin/python -m pytest): {e!r}", pytrace=False)
    attn._ensure_runtime()   # torch.ops.attn.* and their fakes (attn.ops)
    return attn


@pytest.fixture(autouse=True, scope="session")
def split_every_call():
    """The tests' shapes are small: under the default attn.min_thread_work_ns() most of
    their calls would run on the calling thread alone, and the split paths (query
    blocks, backward query splits, split-K and its merge) would go untested. 0 splits
    every call as far as its sizes allow; test_work_sharing.py checks the default."""
    attn = _load_runtime()
    before = attn.set_min_thread_work_ns(0)
    yield
    attn.set_min_thread_work_ns(before)


# attn-compile takes seconds per artifact and many test files compile the same IR (a
# family's kernel is checked for GQA, positions, query splits, block sparsity...): each
# distinct IR text is compiled once per session, its artifact (or its diagnostics) kept
# in _COMPILED, and every caller gets a copy of its own (tests damage, move and delete
# their artifacts).
_COMPILED = {"store": None, "by_text": {}}


@pytest.fixture(autouse=True, scope="session")
def session_compiles(tmp_path_factory):
    """compile_source's store, and $ATTN_CACHE_DIR (attn.compile's cache) for every test
    that does not point it elsewhere itself: the suite compiles each kernel once, leaves
    the user's ~/.cache/attn alone and never reuses an artifact of an earlier session."""
    _COMPILED["store"] = tmp_path_factory.mktemp("compiled")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ATTN_CACHE_DIR", str(tmp_path_factory.mktemp("attn-cache")))
        yield


def compile_source(source, out_dir, name):
    """attn-compiles `source` (a .mlir path, or IR text) into out_dir/<name>.so and returns
    that path; a compile error fails the test with the compiler's diagnostics."""
    if isinstance(source, str):
        path = out_dir / f"{name}.mlir"
        path.write_text(source)
        source = path
    artifact = out_dir / f"{name}.so"
    text = Path(source).read_text()
    if text not in _COMPILED["by_text"]:
        if not ATTN_COMPILE.exists():
            pytest.fail(f"attn-compile not built: {ATTN_COMPILE} does not exist", pytrace=False)
        r = subprocess.run([str(ATTN_COMPILE), str(source), "-o", str(artifact)],
                           capture_output=True, text=True)
        if r.returncode != 0 or not artifact.exists():
            _COMPILED["by_text"][text] = (f"attn-compile {source} failed (rc={r.returncode}):\n"
                                          f"{r.stdout[-4000:]}\n{r.stderr[-4000:]}")
        else:
            stored = _COMPILED["store"] / f"{hashlib.sha256(text.encode()).hexdigest()}.so"
            shutil.copyfile(artifact, stored)
            _COMPILED["by_text"][text] = stored
            return artifact
    compiled = _COMPILED["by_text"][text]
    if isinstance(compiled, str):
        pytest.fail(compiled, pytrace=False)
    shutil.copyfile(compiled, artifact)
    return artifact


def kernels_from(source_of):
    """A module-scoped fixture `compiled`: compiled(name) compiles source_of(name) (see
    compile_source) on first use and returns it loaded (attn.Kernel)."""

    @pytest.fixture(scope="module")
    def compiled(attn_mod, tmp_path_factory):
        out, cache = tmp_path_factory.mktemp("kernels"), {}

        def get(name):
            if name not in cache:
                cache[name] = attn_mod.load(compile_source(source_of(name), out, name))
            return cache[name]

        return get

    return compiled


@pytest.fixture(scope="session")
def attn_mod():
    return _load_runtime()


class _Artifacts:
    """Compiles examples/normalizers/<name>.mlir once per session, on first use."""

    def __init__(self, outdir: Path):
        self.outdir = outdir
        self.paths = {}

    def __call__(self, name: str) -> str:
        if PREBUILT is not None:
            return prebuilt_artifact(f"{name}-cpu")
        if name not in self.paths:
            self.paths[name] = str(compile_source(EXAMPLES / f"{name}.mlir", self.outdir, name))
        return self.paths[name]


@pytest.fixture(scope="session")
def artifacts(tmp_path_factory, attn_mod):
    return _Artifacts(tmp_path_factory.mktemp("artifacts"))


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    try:
        import helpers
    except ImportError:
        return
    if not helpers.ERROR_LOG:
        return
    tr = terminalreporter
    tr.write_sep("-", "worst error vs float64 reference: max abs err / fraction of tolerance")
    for (name, dt), errs in sorted(helpers.ERROR_LOG.items()):
        cols = "  ".join(f"{n} {a:.1e}/{r:.1e}" for n, (a, r) in errs.items())
        tr.write_line(f"{name:>10} {dt}: {cols}")
