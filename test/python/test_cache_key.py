"""attn.compile's cache key means the kernel: the Python front-end writes each op's
file:line:col and its source line into the IR, so an edit that only moves a traced
kernel to other lines must find the artifact already built, while any change of the
kernel itself (an op, a constant, a string attribute) must not."""
import os
import textwrap

import pytest

import attn
from attn.compiler import kernel_key_text

SCRIPT = textwrap.dedent("""\
    import attn
    from attn import exp
    traced = attn.kernel(attn.normalizer(numerator=lambda s: exp(s) - exp(-s),
                                         denominator=lambda s: exp(s) + exp(-s),
                                         name="tanhmax"))
""")


def trace(script, filename):
    """The IR that `script`, saved as `filename`, traces."""
    scope = {}
    exec(compile(script, filename, "exec"), scope)  # noqa: S102 - the test's own text
    return str(scope["traced"])


def test_moving_a_traced_kernel_to_other_lines_keeps_its_artifact(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTN_CACHE_DIR", str(tmp_path / "cache"))
    first = trace(SCRIPT, "train.py")
    moved = trace("\n\n# a comment the user added\n\n" + SCRIPT, "train.py")
    assert first != moved and "train.py\":3:" in first and "train.py\":7:" in moved
    assert kernel_key_text(first) == kernel_key_text(moved)
    path = attn.compile(first, dtypes=("f32",)).path
    built = os.stat(path).st_mtime_ns
    assert attn.compile(moved, dtypes=("f32",)).path == path
    assert os.stat(path).st_mtime_ns == built
    assert len(list((tmp_path / "cache").glob("*.so"))) == 1


def test_a_changed_kernel_gets_its_own_artifact(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTN_CACHE_DIR", str(tmp_path / "cache"))
    first = trace(SCRIPT, "train.py")
    changed = trace(SCRIPT.replace("exp(s) + exp(-s)", "exp(s) + exp(-s) + 1.0"), "train.py")
    assert kernel_key_text(first) != kernel_key_text(changed)
    paths = {attn.compile(text, dtypes=("f32",)).path for text in (first, changed)}
    assert len(paths) == 2


@pytest.mark.parametrize("ir, key", [
    # comments, locations and their alias definitions go; the ops stay
    ('#a_1_2 = loc("x.py":1:2)\n  %0 = math.exp %s : f32 loc(#a_1_2) // e^s\n',
     "  %0 = math.exp %s : f32"),
    # nested and fused locations are removed whole
    ('attn.yield %0 : f32 loc(fused["x.py":1:2, callsite("f"("y.py":3:4))])',
     "attn.yield %0 : f32"),
    # string literals are kept whole, even when they hold "//" or "loc("
    ('attn.input @t {doc = "a // b \\" loc(c)"} // gone', 'attn.input @t {doc = "a // b \\" loc(c)"}'),
    # an identifier ending in "loc" is not a location
    ("%myloc(%0) loc(#x)", "%myloc(%0)"),
])
def test_key_text_drops_exactly_locations_and_comments(ir, key):
    assert kernel_key_text(ir) == key
