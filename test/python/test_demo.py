"""The training demo (examples/train): the model with compiled softmax attention and the
same model with eager torch softmax attention, from the same init on the same data, agree
step by step; training lowers the loss; the C++ demo attn-train runs."""
import importlib.util
import re
import subprocess

import pytest
import torch

from conftest import BUILD, REPO

_spec = importlib.util.spec_from_file_location("attn_train_demo",
                                               REPO / "examples" / "train" / "train.py")
demo = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(demo)


def _args(artifact=None, reference=False, resume=False, **kw):
    argv = ["--steps", "3", "--base", "8", "--tau", "2", "--seq-len", "16", "--batch", "8",
            "--d-model", "32", "--heads", "2", "--layers", "2"]
    for k, v in kw.items():
        argv += [f"--{k.replace('_', '-')}", str(v)]
    if resume:
        argv.append("--resume")
    if reference:
        argv.append("--reference-softmax")
    elif artifact:
        argv += ["--artifact", artifact]
    return demo.parser().parse_args(argv)


@pytest.mark.parametrize("dtype,rtol", [(torch.float64, 1e-10), (torch.float32, 1e-5)],
                         ids=["f64", "f32"])
def test_compiled_softmax_matches_reference_softmax(artifacts, dtype, rtol):
    path = artifacts("softmax")
    got = demo.train(_args(path), dtype, log=None)
    want = demo.train(_args(reference=True), dtype, log=None)
    assert len(got) == len(want) == 3
    for (s, lg, ag), (_, lw, aw) in zip(got, want):
        assert abs(lg - lw) <= rtol * abs(lw), f"step {s}: loss {lg!r} vs reference {lw!r}"
        assert ag == aw, f"step {s}: accuracy {ag} vs reference {aw}"


def test_parameters_match_after_steps(artifacts):
    """After 3 Adam steps every weight of both models agrees (float64)."""
    path = artifacts("softmax")
    a = _args(path)
    b = _args(reference=True)
    ma, oa = demo.build_model(a, torch.float64)
    mb, ob = demo.build_model(b, torch.float64)
    gen_a, gen_b = (torch.Generator().manual_seed(a.seed + 1) for _ in range(2))
    for _ in range(3):
        for m, o, g in ((ma, oa, gen_a), (mb, ob, gen_b)):
            x = demo.nt_batch(a.batch, a.seq_len, a.base, a.tau, g)
            loss, _ = demo.loss_and_accuracy(m, x, a.tau)
            o.zero_grad()
            loss.backward()
            o.step()
    pb = dict(mb.named_parameters())
    for n, p in ma.named_parameters():
        if n.endswith("attention.params"):
            continue                          # softmax has none (size 0)
        assert torch.allclose(p, pb[n], rtol=0, atol=1e-9), n


# stick_breaking_left_over: the paper's stick-breaking, a scan normalizer.
@pytest.mark.parametrize("normalizer", ["softmax", "stick_breaking_left_over"])
def test_loss_falls(artifacts, normalizer):
    hist = demo.train(_args(artifacts(normalizer), steps=50, lr=1e-2), torch.float32, log=None)
    losses = [l for _, l, _ in hist]
    first, last = sum(losses[:5]) / 5, sum(losses[-5:]) / 5
    assert last < first - 0.1, f"loss did not fall over 50 steps: {first:.4f} -> {last:.4f}"


def test_learnable_normalizer_params_train(artifacts):
    """With MultiMax the 8 normalizer parameters receive gradients and move."""
    a = _args(artifacts("multimax"), steps=3)
    model, opt = demo.build_model(a, torch.float32)
    p0 = [p.detach().clone() for n, p in model.named_parameters()
          if n.endswith("attention.params")]
    assert p0 and all(p.numel() == 8 for p in p0)
    g = torch.Generator().manual_seed(0)
    for _ in range(3):
        x = demo.nt_batch(a.batch, a.seq_len, a.base, a.tau, g)
        loss, _ = demo.loss_and_accuracy(model, x, a.tau)
        opt.zero_grad()
        loss.backward()
        opt.step()
    p1 = [p.detach() for n, p in model.named_parameters() if n.endswith("attention.params")]
    assert all(not torch.equal(x, y) for x, y in zip(p0, p1))


def test_cpp_demo_runs(artifacts):
    exe = BUILD / "bin" / "attn-train"
    if not exe.exists():
        pytest.fail(f"{exe} not built (the top-level CMakeLists.txt must "
                    f"add_subdirectory(examples/train))", pytrace=False)
    r = subprocess.run([str(exe), artifacts("softmax"), "--steps", "60", "--base", "8",
                        "--seq-len", "16", "--batch", "16", "--d-model", "32",
                        "--log-every", "20", "--lr", "1e-2"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    m = re.search(r"mean loss first 10 steps ([\d.]+) -> last 10 steps ([\d.]+)", r.stdout)
    assert m, r.stdout
    first, last = map(float, m.groups())
    assert last < first, r.stdout


def test_interrupted_run_resumes_exactly(artifacts, tmp_path):
    """SIGINT mid-run writes a checkpoint; --resume then finishes the run with the same
    losses as an uninterrupted one (same data stream, optimizer state, weights)."""
    import signal

    path = artifacts("softmax")
    full = demo.train(_args(path, steps=8), torch.float64, log=None)

    ckpt = tmp_path / "run.pt"
    interrupted = _args(path, steps=8, checkpoint=ckpt)
    real_step = demo.loss_and_accuracy

    def interrupt_after_step_3(model, x, tau):
        result = real_step(model, x, tau)
        if len(calls) == 2:
            signal.raise_signal(signal.SIGINT)      # as Ctrl-C during step 3
        calls.append(1)
        return result

    calls = []
    demo.loss_and_accuracy = interrupt_after_step_3
    try:
        with pytest.raises(demo.attn.training.Interrupted, match="at step 3"):
            demo.train(interrupted, torch.float64, log=None)
    finally:
        demo.loss_and_accuracy = real_step
    resumed = demo.train(_args(path, steps=8, checkpoint=ckpt, resume=True), torch.float64,
                         log=None)
    assert [s for s, _, _ in resumed] == list(range(1, 9))
    for (s, lf, af), (_, lr, ar) in zip(full, resumed):
        assert abs(lf - lr) <= 1e-12 * abs(lf) and af == ar, f"step {s}: {lf} vs {lr}"


def _attn_train(*argv, **kw):
    exe = BUILD / "bin" / "attn-train"
    small = ["--base", "8", "--seq-len", "16", "--batch", "8", "--d-model", "32"]
    return subprocess.run([str(exe), *map(str, argv), *small], capture_output=True, text=True,
                          timeout=300, **kw)


def test_cpp_demo_resumes_exactly(artifacts, tmp_path):
    # One intra-op thread: with two, LibTorch's tanh (the demo's feed-forward) sometimes
    # computes the worker's half of its first call in a process about 5e-5 off, so two
    # processes can differ before any checkpoint is involved. The checkpoint itself
    # must restore everything: the history (every digit) matches bit for bit.
    so, ckpt = artifacts("softmax"), tmp_path / "run.ckpt"
    full, split = tmp_path / "full.csv", tmp_path / "split.csv"
    one_thread = ("--threads", 1)
    assert _attn_train(so, "--steps", 8, "--history", full, *one_thread).returncode == 0
    first = _attn_train(so, "--steps", 4, "--checkpoint", ckpt, "--history", split, *one_thread)
    assert first.returncode == 0, first.stdout + first.stderr
    second = _attn_train(so, "--steps", 8, "--checkpoint", ckpt, "--resume", "--history", split,
                         *one_thread)
    assert second.returncode == 0 and "resumed from" in second.stdout, second.stdout + second.stderr
    want, got = full.read_text().split(), split.read_text().split()
    assert [row.split(",")[0] for row in got[1:]] == [str(s) for s in range(1, 9)]
    assert got == want


def test_cpp_demo_checkpoints_on_sigint(artifacts, tmp_path):
    import signal
    ckpt = tmp_path / "run.ckpt"
    exe = BUILD / "bin" / "attn-train"
    p = subprocess.Popen([str(exe), artifacts("softmax"), "--steps", "1000000", "--log-every", "1",
                          "--checkpoint", str(ckpt), "--base", "8", "--seq-len", "16",
                          "--batch", "8", "--d-model", "32"], stdout=subprocess.PIPE, text=True)
    try:
        line = "-"
        while line and not line.startswith("step"):   # until training has started
            line = p.stdout.readline()
        assert line, "attn-train ended before its first step"
        p.send_signal(signal.SIGINT)
        out, _ = p.communicate(timeout=120)
    finally:
        p.kill()
    assert p.returncode == 130 and "interrupted at step" in out, out
    assert ckpt.exists()
