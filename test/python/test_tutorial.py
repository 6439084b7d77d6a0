"""docs/TUTORIAL.md runs as written: its `python` blocks, in order, are one program, run
here in a fresh directory (matplotlib's Agg backend); it must train the model it promises
and draw the attention map, and it must be as short as the tutorial says."""
import os
import re
import subprocess
import sys

from conftest import REPO

TUTORIAL = REPO / "docs" / "TUTORIAL.md"


def program():
    return "\n".join(re.findall(r"^```python\n(.*?)^```$", TUTORIAL.read_text(), re.M | re.S))


def test_the_program_is_as_short_as_the_tutorial_says():
    code = [line for line in program().splitlines()
            if line.strip() and not line.lstrip().startswith("#")]
    claimed = int(re.search(r"in (\d+) lines of Python", TUTORIAL.read_text()).group(1))
    assert len(code) == claimed < 30


def test_the_tutorial_trains_and_plots(tmp_path, attn_mod):
    (tmp_path / "tutorial.py").write_text(program())
    env = dict(os.environ, MPLBACKEND="Agg")
    run = subprocess.run([sys.executable, "tutorial.py"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    out = run.stdout
    assert "attn.normalizer @softmax1 params(tau = 1.0) {" in out
    assert re.search(r"// tutorial.py:\d+: lambda s, tau: exp\(tau \* s\)", out)
    assert "algorithm: online" in out
    accuracy = float(re.search(r"accuracy (\S+)", out).group(1))
    assert accuracy >= 0.95, out[-500:]
    weights = [float(t) for t in re.search(r"weight per query: (.*)", out).group(1).split()]
    assert max(weights[:2]) < 0.95 and min(weights[2:]) > 0.99, weights   # the "off" side
    assert (tmp_path / "attention_map.png").stat().st_size > 10_000
