"""Input generation, compiled-kernel calls and comparison for the numerics tests."""
import ctypes
import math
import zlib

import torch

import general
import reference as ref

# Non-default parameter values: the multimax kinks (b1, d1, b2, d2) lie inside the score
# range used below, so every branch of σ and every parameter gradient is exercised.
TEST_PARAMS = {
    "multimax": [1.3, 0.7, -0.5, 0.4, 0.9, 1.2, -1.0, 0.8],
    "sigmoid": [0.7],
}

TOL_F64_ABS = 1e-9     # float64: max abs error
TOL_F32_REL = 2e-4     # float32: max abs error / max abs of the reference tensor
# A gradient that cancels to ~0 (one visible key: w = 1, so ds = g'(dO·v - D)/C = 0)
# is ~1e-17 in the reference, and "relative to max|ref|" is meaningless for it. For those,
# float32 errors are also accepted up to TOL_F32_TERMS times the term scale (the same
# formulas with every factor in absolute value, reference.design_backward(absolute=True)):
# rounding of any summation order is bounded by a few ulps of that scale.
TOL_F32_TERMS = 1e-5
TOL_F64_TERMS = 1e-12  # the same for float64 (used where terms are huge: |s| ~ 1e4)
# A float32 score within rounding of a kink (relu at s = 0, multimax at b_n, d_n) can
# take the other branch than in float64; with N = 1000² scores that happens. Such an
# error is no fault of the kernel: eager PyTorch in float32 makes exactly the same one.
# So float32 errors up to EAGER_F32_FACTOR times those of the eager float32 reference
# (the same formulas, run in float32) are accepted as well.
EAGER_F32_FACTOR = 2.0

GRAD_NAMES = ["O", "dq", "dk", "dv", "dparams"]


def seed_of(*parts) -> int:
    return zlib.crc32(repr(parts).encode()) & 0x7FFFFFFF


def case_params(name, dtype=torch.float64):
    nz = ref.NORMALIZERS[name]
    vals = TEST_PARAMS.get(name, nz.param_defaults)
    return torch.tensor(vals, dtype=dtype)


def make_inputs(name, B, H, Nq, Nk, d, dv, seed, padding=False, dtype=torch.float64):
    """Random q, k, v, dout (float64 master copies) scaled so that scores are O(1)-O(3)."""
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H, Nq, d, generator=gen, dtype=torch.float64)
    k = torch.randn(B, H, Nk, d, generator=gen, dtype=torch.float64)
    v = torch.randn(B, H, Nk, dv, generator=gen, dtype=torch.float64)
    dout = torch.randn(B, H, Nq, dv, generator=gen, dtype=torch.float64)
    score = ref.NORMALIZERS[name].score
    if score is ref.scaled_dot:
        # s = q·k/sqrt(d) has std σq·σk: 1.3² ≈ 1.7, |s| up to ~5
        q, k = 1.3 * q, 1.3 * k
    elif score is ref.squared_dot:
        # q·k has std σ²·sqrt(d); choose σ² = 1.2/sqrt(d) so (q·k)² is O(1)-O(3)
        sc = math.sqrt(1.2 / math.sqrt(d))
        q, k = sc * q, sc * k
    elif score is ref.elu_feature_dot:
        q, k = 0.7 * q, 0.7 * k       # entries cross 0: both branches of φ
    key_lengths = None
    if padding:
        key_lengths = torch.randint(1, Nk + 1, (B,), generator=gen, dtype=torch.int64)
        if Nk > 1:
            key_lengths[0] = max(1, Nk // 2)   # at least one batch really padded
    cast = lambda t: t.to(dtype)
    return cast(q), cast(k), cast(v), cast(dout), key_lengths


def compiled_grads(path, q, k, v, params, dout, is_causal=False, key_lengths=None):
    """Forward + backward through torch.ops.attn.attention."""
    q = q.detach().clone().requires_grad_(True)
    k = k.detach().clone().requires_grad_(True)
    v = v.detach().clone().requires_grad_(True)
    p = params.detach().clone().requires_grad_(True)
    O = torch.ops.attn.attention(path, q, k, v, p, is_causal, key_lengths)
    inputs = [q, k, v, p]
    grads = torch.autograd.grad(O, inputs, grad_outputs=dout, allow_unused=True)
    grads = [torch.zeros_like(x) if g is None else g for x, g in zip(inputs, grads)]
    return {"O": O.detach(), "dq": grads[0], "dk": grads[1], "dv": grads[2],
            "dparams": grads[3]}


def check_example_against_reference(path, name, q, k, v, params, dout, is_causal, key_lengths,
                                    dtype, context, names=None):
    """The artifact at `path` of example normalizer `name` against the float64 reference
    (check_close; in float32 also against the eager float32 reference), forward and
    backward, O and the gradients `names` (default every one)."""
    got = compiled_grads(path, q, k, v, params, dout, is_causal, key_lengths)
    want = reference_grads(name, q, k, v, params, dout, is_causal, key_lengths)
    eager = (eager_f32(name, q, k, v, params, dout, is_causal, key_lengths)
             if dtype == torch.float32 else None)
    check_close(got, want, dtype, eager=eager, names=names, context=context)


def reference_grads(name, q, k, v, params, dout, is_causal=False, key_lengths=None):
    """The float64 reference, whatever the dtype of the inputs."""
    f = lambda t: t.detach().to(torch.float64)
    return ref.attention_and_grads(name, f(q), f(k), f(v), f(params), f(dout),
                                   is_causal, key_lengths)


def errors(got, want, names=None):
    """{name: (max abs error, max abs error / max abs of reference)} for `names`
    (default GRAD_NAMES)."""
    out = {}
    for n in names or GRAD_NAMES:
        g, w = got[n].to(torch.float64), want[n]
        assert g.shape == w.shape, f"{n}: shape {tuple(g.shape)} != reference {tuple(w.shape)}"
        if w.numel() == 0:
            out[n] = (0.0, 0.0)
            continue
        err = (g - w).abs().max().item()
        if math.isnan(err) or not torch.isfinite(g).all():
            err = math.inf
        scale = w.abs().max().item()
        out[n] = (err, err / scale if scale > 0 else err)
    return out


# (normalizer, dtype name) -> {tensor name: (worst abs err, worst err / allowed)};
# printed at the end of the session by conftest.pytest_terminal_summary.
ERROR_LOG = {}


def log_errors(key, errs):
    slot = ERROR_LOG.setdefault(key, {})
    for n, (a, u) in errs.items():
        pa, pu = slot.get(n, (0.0, 0.0))
        slot[n] = (max(pa, a), max(pu, u))


def term_scale(name, q, k, v, params, dout, is_causal=False, key_lengths=None):
    """{tensor: max of the term scale} (see TOL_F32_TERMS)."""
    f = lambda t: t.detach().to(torch.float64)
    ts = ref.design_backward(name, f(q), f(k), f(v), f(params), f(dout), is_causal,
                             key_lengths, absolute=True)
    return {n: (t.abs().max().item() if t.numel() else 0.0) for n, t in ts.items()}


def eager_f32(name, q, k, v, params, dout, is_causal=False, key_lengths=None):
    """The reference evaluated in float32 (eager PyTorch, same formulas)."""
    f = lambda t: t.detach().to(torch.float32)
    return ref.attention_and_grads(name, f(q), f(k), f(v), f(params), f(dout), is_causal,
                                   key_lengths)


def check_close(got, want, dtype, floor=None, terms=None, eager=None, context="",
                log_key=None, names=None):
    """float64: max abs error <= max(1e-9 * max(1, floor[n]), 1e-12 * terms[n]);
    float32: max abs error <= max(2e-4 * max(max|ref|, floor[n]), 1e-5 * terms[n],
                                  2 * error of the eager float32 reference `eager`).
    floor / terms: {tensor name: scale} (or a number for every tensor); names: the
    tensors compared (default GRAD_NAMES)."""
    errs = errors(got, want, names)
    eager_errs = errors(eager, want, names) if eager is not None else None
    as_dict = lambda x: x if isinstance(x, dict) else {n: (x or 0.0) for n in names or GRAD_NAMES}
    floor, terms = as_dict(floor), as_dict(terms)
    bad, used = [], {}
    for n, (a, r) in errs.items():
        if dtype == torch.float64:
            allowed = max(TOL_F64_ABS * max(1.0, floor[n]), TOL_F64_TERMS * terms[n])
        else:
            ref_max = want[n].abs().max().item() if want[n].numel() else 0.0
            allowed = max(TOL_F32_REL * max(ref_max, floor[n]), TOL_F32_TERMS * terms[n])
            if eager_errs is not None:
                allowed = max(allowed, EAGER_F32_FACTOR * eager_errs[n][0])
        used[n] = (a, a / allowed if allowed > 0 else (0.0 if a == 0 else math.inf))
        if not a <= allowed:
            bad.append(f"{n}: max abs err {a:.3e} (rel {r:.3e}, allowed {allowed:.3e})")
    if log_key is not None:
        log_errors(log_key, used)
    assert not bad, f"{context} mismatch vs reference: " + "; ".join(bad)
    return errs


def check_tables_kernel(kernel, q, k, v, dout, tables, ref, is_causal, dtype, context):
    """A kernel with tensor inputs against its float64 reference `ref(q, k, v, *tables)`:
    O, dq, dk, dv and the gradient of every learnable input (floats of `dtype`; integer
    tables as given)."""
    learnable = [i["name"] for i in kernel.inputs if i["learnable"]]
    leaves = [t.to(dtype).clone().requires_grad_() for t in (q, k, v)]
    given = {n: (t.to(dtype).clone().requires_grad_(n in learnable) if t.is_floating_point()
                 else t) for n, t in tables.items()}
    O = kernel(*leaves, None, is_causal, None, inputs=given)
    grads = torch.autograd.grad(O, leaves + [given[n] for n in learnable],
                                grad_outputs=dout.to(dtype))
    got = {"O": O.detach(), "dq": grads[0], "dk": grads[1], "dv": grads[2]}
    got.update({f"d{n}": g for n, g in zip(learnable, grads[3:])})

    names = list(tables)
    want = general.attention_and_grads(ref, q, k, v, dout, [tables[n] for n in names])
    for index, n in enumerate(names):
        grad = want.pop(f"d{index}")
        if n in learnable:
            want[f"d{n}"] = grad
    check_close(got, want, dtype, context=context, names=list(got))


class _Memref2d(ctypes.Structure):
    _fields_ = [("allocated", ctypes.c_void_p), ("aligned", ctypes.c_void_p),
                ("offset", ctypes.c_int64), ("sizes", ctypes.c_int64 * 2),
                ("strides", ctypes.c_int64 * 2)]


class _Memref1d(ctypes.Structure):
    _fields_ = [("allocated", ctypes.c_void_p), ("aligned", ctypes.c_void_p),
                ("offset", ctypes.c_int64), ("sizes", ctypes.c_int64 * 1),
                ("strides", ctypes.c_int64 * 1)]


def memref_of(t):
    """The attn_memref1d/2d descriptor (abi.h) of a 1-D or 2-D tensor, for calling an
    artifact's C entry points directly through ctypes."""
    cls = _Memref2d if t.dim() == 2 else _Memref1d
    m = cls()
    m.allocated = m.aligned = t.data_ptr()
    m.offset = 0
    for n, (size, stride) in enumerate(zip(t.shape, t.stride())):
        m.sizes[n], m.strides[n] = size, stride
    return m


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on now (for MASTER_PORT)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_workers(worker, args, nprocs, deadline_s, what):
    """worker(rank, *args) in nprocs spawned processes; fails the test naming `what` when
    they are not done within deadline_s (killed: a test never hangs) or one raises."""
    import time

    import pytest
    import torch.multiprocessing as mp

    context = mp.start_processes(worker, args=args, nprocs=nprocs, join=False,
                                 start_method="spawn")
    deadline = time.monotonic() + deadline_s
    while not context.join(timeout=1):
        if time.monotonic() > deadline:
            for process in context.processes:
                process.kill()
            pytest.fail(f"{what}: the {nprocs} workers did not finish within {deadline_s} s")
