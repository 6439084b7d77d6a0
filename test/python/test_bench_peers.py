"""bench/bench.py's peers compute what our kernels compute: the bench's own equivalence
check (bench/peers.py: compare against our kernel, forward and every gradient a peer
produces) on tiny shapes, for every workload and peer. Catches a peer definition (score
mod, block mask, slope convention, composition, IREE module) that drifts from ours. The
torch.compile'd peers are checked through the functions they compile (FlexAttention's
unfused path, bench/eager.py); the bench checks the compiled ones at every timed shape."""
import sys

import pytest
import torch

from conftest import REPO

sys.path.insert(0, str(REPO / "bench"))
import peers  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")

N, D = 80, 64  # N: not a multiple of the tiles; D: the tiled kernels' head dim
WINDOW = 9     # the sliding window, narrowed so that N spans several windows
DTYPES = [torch.float32, torch.bfloat16]


@pytest.fixture(scope="module")
def ours(attn_mod):
    """workload name -> peers.Ours, compiled on first use (the bench's own compile path)."""
    kernels = {}
    mp = pytest.MonkeyPatch()
    mp.setattr(peers, "WINDOW", WINDOW)
    peers.prepare_torch_compile()

    def get(name):
        if name not in kernels:
            kernels[name] = peers.Ours(peers.compile_ours(peers.WORKLOADS[name])[0])
        return kernels[name]
    yield get
    mp.undo()


def cases():
    flex = [peers.Flex(dt, compiled=False) for dt in DTYPES]
    sdpa = [peers.Sdpa(dt) for dt in DTYPES]
    for w in peers.WORKLOADS.values():
        for causal in w.causal_modes:
            for peer in flex + sdpa + [peers.Eager()]:
                if peer.applies(w):
                    for pss in ("fwd", "fwd+bwd"):
                        yield pytest.param(w.name, causal, peer, pss,
                                           id=f"{w.name}-{'causal' if causal else 'full'}-{peer.name}-{pss}")


def check(ours, name, causal, peer, pss):
    x = peers.Inputs(peers.WORKLOADS[name], N, D, causal, seed=3, b=1, h=2)
    ref = ours(name).bind(x, pss)[0]()
    got = peer.bind(x, pss)[0]()
    result = peers.compare(got, ref, peers.TOLERANCE[peer.dtype])
    assert result["ok"], f"{peer.name} differs from ours: {result}"
    assert set(result["rel_err"]) >= ({"O", "dq", "dk", "dv"} if pss == "fwd+bwd" else {"O"})
    return peer


@pytest.mark.parametrize("name,causal,peer,pss", list(cases()))
def test_peer_matches_ours(ours, name, causal, peer, pss):
    try:
        check(ours, name, causal, peer, pss)
    except peers.Unsupported as e:
        assert isinstance(peer, peers.Flex) and pss == "fwd+bwd", e


def test_window_differs_from_full(ours):
    """The narrowed window really masks at this N (else the window checks prove nothing)."""
    x = peers.Inputs(peers.WORKLOADS["softmax"], N, D, False, seed=3, b=1, h=2)
    full = ours("softmax").bind(x, "fwd")[0]()
    window = ours("sliding_window").bind(x, "fwd")[0]()
    assert not peers.compare(window, full, 1e-2)["ok"]


def test_sdpa_runs_the_cpu_flash_kernels(ours):
    peer = check(ours, "softmax", True, peers.Sdpa(), "fwd+bwd")
    assert peer.backend == ["_scaled_dot_product_flash_attention_for_cpu",
                            "_scaled_dot_product_flash_attention_for_cpu_backward"]


@pytest.mark.parametrize("causal,tuned", [(False, True), (True, True), (False, False)])
def test_iree_matches_ours(ours, tmp_path, causal, tuned):
    pytest.importorskip("iree.runtime")
    peer = check(ours, "softmax", causal, peers.Iree(2, str(tmp_path), tuned), "fwd")
    assert peer.compile_s is not None
    with pytest.raises(peers.Unsupported):
        peer.bind(peers.Inputs(peers.WORKLOADS["softmax"], N, D, causal), "fwd+bwd")


def test_compare_catches_a_different_computation(ours):
    """A peer computing something else (softmax without the 1/sqrt(d) scale) fails."""
    class Unscaled(peers.Peer):
        name = "unscaled"

        def attention(self, q, k, v, p, causal):
            return torch.softmax(q @ k.transpose(-1, -2), -1) @ v
    with pytest.raises(AssertionError, match="differs from ours"):
        check(ours, "softmax", False, Unscaled(), "fwd")


def test_gemm_floor_is_timed_without_comparison(ours):
    """The `gemms` peer (the compositions' matrix products alone) computes (q·kᵀ)·v and
    its four backward products, is timed beside ours although it is not attention, and
    says it was not compared; report.py turns it into the floor table."""
    import bench
    import report

    x = peers.Inputs(peers.WORKLOADS["sigmoid"], N, D, False, seed=3, b=1, h=2)
    q, k, v, do, _ = (t.double() for t in x.as_dtype(torch.float32))
    got = peers.GemmFloor().bind(x, "fwd+bwd")[0]()
    s = q @ k.transpose(-1, -2)
    want = {"O": s @ v, "dv": s.transpose(-1, -2) @ do, "dq": (do @ v.transpose(-1, -2)) @ k,
            "dk": (do @ v.transpose(-1, -2)).transpose(-1, -2) @ q}
    assert peers.compare(got, want, 1e-5)["ok"]

    timed = [bench.Timed(p, p.bind(x, "fwd+bwd")[0], 0.0)
             for p in (ours("sigmoid"), peers.Eager(), peers.GemmFloor())]
    live = bench.measure_row(timed, budget=0.0, min_reps=2, max_reps=2)
    assert [t.name for t in live] == ["ours", "eager", "gemms"]
    assert live[2].verify["compared"] is False and live[1].verify["rel_err"]

    # flops: five products of 100 GFLOP; sgemm 1000 GFLOP/s.
    row = {"workload": "sigmoid", "n": report.TARGET_N, "d": 64, "causal": False,
           "pass": "fwd+bwd", "chunk": 0, "flops": 500e9,
           "impls": {"ours": {"ms": 1000.0}, "compiled": {"ms": 2100.0},
                     "gemms": {"ms": 1200.0}}}
    results = {"rows": [row], "chunks": [{"sgemm_start": [1000.0]}]}
    table = report.floor_table(results)
    assert "| sigmoid | 1000 | 2100 | 2.10× | 1200 (0.50) | 0.70 | 1.00 |" in table, table
