"""Fuzzes the runtime with bad tensors and bad artifacts, from a fixed seed.

    .venv/bin/python test/python/runtime_fuzz.py --seed 1 --cases 300 [--only tensors|artifacts]

Every case must either work or raise RuntimeError / ValueError / TypeError / IndexError
with a message; a crash (the process dies of a signal), an internal assertion or a
result of the wrong shape fails. Each case is printed before it runs, so the last line
printed names the case that crashed. test_fuzz.py runs a brief fixed-seed round in the
test suite; scripts/fuzz.sh runs long ones.

Tensor cases start from a valid call of a compiled kernel (multimax: 8 params;
luong_general: a 32x32 weight; luong_local: a learnable tensor input) and change one
to three things: dtypes, ranks, extents, strides, devices, params, key lengths, tensor
inputs, values. Artifact cases change a compiled artifact: truncated or bytes flipped (which the
checksum must catch), or truncated, its manifest text or the ELF structures the runtime
checks edited, then resealed with attn-seal; an artifact that still loads must then run
a valid call.
"""
import argparse
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

import attn
from attn.paths import compiler_path

REPO = Path(__file__).resolve().parents[2]
SOURCES = {"multimax": REPO / "examples" / "normalizers" / "multimax.mlir",
           "luong_general": REPO / "examples" / "families" / "luong_general.mlir",
           "luong_local": REPO / "examples" / "families" / "luong_local.mlir"}
ALLOWED = (RuntimeError, ValueError, TypeError, IndexError)
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64,
          torch.bool, torch.complex64]


class Failure(Exception):
    pass


def say(text):
    print(text, flush=True)


# ----------------------------------------------------------------------------- tensors

def valid_call(rng, kernel):
    """Arguments of a call `kernel` accepts: (q, k, v, params, is_causal, key_lengths,
    inputs) as a dict; the tensor inputs as a list in argument order, the call's size where
    the manifest names a dimension, any extent where it has '?' (reads are clamped to the
    extents)."""
    dtype = rng.choice([torch.float32, torch.float64])
    head_dim = kernel.manifest.get("head_dim", 0) or rng.choice([1, 3, 8, 16])
    B, H, Nq, Nk = rng.randint(1, 2), rng.randint(1, 2), rng.randint(1, 9), rng.randint(1, 9)
    dv = rng.randint(1, 8)
    gen = torch.Generator().manual_seed(rng.randrange(2**31))
    randn = lambda *shape: torch.randn(*shape, generator=gen, dtype=dtype)  # noqa: E731
    named = {"B": B, "H": H, "Hkv": H, "Nq": Nq, "Nk": Nk}
    inputs = []
    for declared in kernel.inputs:
        shape = [rng.randint(1, 9) if extent is None else named.get(extent, extent)
                 for extent in declared["shape"]]
        inputs.append(randn(*shape) if declared["element"] == "float" else
                      torch.randint(-4, 9, shape, generator=gen,
                                    dtype=getattr(torch, {"i8": "int8", "i32": "int32",
                                                          "i64": "int64"}[declared["element"]])))
    return dict(q=randn(B, H, Nq, head_dim), k=randn(B, H, Nk, head_dim), v=randn(B, H, Nk, dv),
                params=kernel.initial_params(dtype), is_causal=rng.random() < 0.5,
                key_lengths=None, inputs=inputs or None)


def mutate(rng, call):
    """Changes one thing of `call` in place; returns what it did and whether it changed
    values only (so that a successful call may legitimately return NaN)."""
    tensor_names = [n for n in ("q", "k", "v", "params") if call[n] is not None]
    tensor_names += [f"inputs[{n}]" for n in range(len(call["inputs"] or []))]
    name = rng.choice(tensor_names)
    if name.startswith("inputs["):
        # Mutate a copy of the list: one input, like any other tensor, through `name`.
        call["inputs"] = list(call["inputs"])
        position = int(name[len("inputs["):-1])
        get = lambda: call["inputs"][position]  # noqa: E731

        def put(value):
            call["inputs"][position] = value
    else:
        get = lambda: call[name]  # noqa: E731

        def put(value):
            call[name] = value
    t = get()
    kind = rng.choice(["dtype", "rank", "extent", "stride", "expand", "meta", "none", "values",
                       "key_lengths", "key_lengths_dtype", "inputs", "causal", "grad",
                       "empty"])
    if kind == "dtype":
        put(t.to(rng.choice(DTYPES)) if t.dtype != torch.bool else t.float())
    elif kind == "rank":
        put(t.unsqueeze(0) if t.dim() < 2 or rng.random() < 0.5 else t.flatten(0, 1))
    elif kind == "extent" and t.dim() > 0:
        dim = rng.randrange(t.dim())
        shape = list(t.shape)
        shape[dim] = rng.choice([0, 1, shape[dim] + 1, shape[dim] + 3])
        put(torch.randn(shape, dtype=t.dtype) if t.is_floating_point() else
            torch.zeros(shape, dtype=t.dtype))
    elif kind == "stride" and t.dim() > 0:
        # The same values in a non-contiguous view: every second element of a larger
        # tensor, or a transposed copy transposed back.
        if t.dim() < 2 or rng.random() < 0.5:
            put(torch.stack([t, t], dim=-1)[..., 0])
        else:
            put(t.transpose(0, -1).contiguous().transpose(0, -1))
    elif kind == "expand" and t.dim() > 0 and t.shape[-1] > 0:
        put(t.narrow(-1, 0, 1).expand(t.shape))  # stride 0: overlapping memory
    elif kind == "meta":
        put(t.to("meta"))
    elif kind == "none" and name == "params":
        call[name] = None
    elif kind == "values" and t.is_floating_point() and t.numel() > 0:
        flat = t.clone().reshape(-1)
        flat[rng.randrange(flat.numel())] = rng.choice([float("nan"), float("inf"), -float("inf"),
                                                         1e30, -1e30])
        put(flat.reshape(t.shape))
        return f"{name}: {kind}", True
    elif kind == "key_lengths":
        B = call["q"].shape[0] if call["q"].dim() > 0 else 1
        n = rng.choice([B, B, B + 1, 0])
        call["key_lengths"] = torch.tensor([rng.randint(-3, 12) for _ in range(n)], dtype=torch.int64)
        return "key_lengths", False
    elif kind == "key_lengths_dtype":
        call["key_lengths"] = torch.ones(call["q"].shape[0] if call["q"].dim() else 1,
                                         dtype=rng.choice(DTYPES))
        return "key_lengths dtype", False
    elif kind == "inputs":
        # A list of the wrong length, or one input of a random shape.
        inputs = list(call["inputs"] or [])
        if not inputs or rng.random() < 0.3:
            call["inputs"] = inputs + [torch.randn(2)] if rng.random() < 0.5 else inputs[:-1]
        else:
            inputs[rng.randrange(len(inputs))] = torch.randn(
                [rng.randint(0, 3) for _ in range(rng.randint(0, 5))])
            call["inputs"] = inputs
        return "inputs", False
    elif kind == "causal":
        call["is_causal"] = rng.choice([True, False, 2, None])
        return "is_causal", False
    elif kind == "grad" and t.is_floating_point():
        put(t.detach().requires_grad_())
    elif kind == "empty":
        put(torch.empty(0))
    return f"{name}: {kind}", False


def run_call(rng, kernel, call, values_changed):
    q, k, v = call["q"], call["k"], call["v"]

    def accepted(what):
        return Failure(f"{what} accepted q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}")
    how = rng.choice(["forward", "backward", "weights", "stats"])
    args = (q, k, v, call["params"], call["is_causal"], call["key_lengths"], call["inputs"])
    if how == "forward":
        out = kernel(*args)
    elif how == "backward":
        grads = [t.detach().requires_grad_() if isinstance(t, torch.Tensor) and t.is_floating_point()
                 and t.device.type == "cpu" else t for t in args[:4]]
        out = kernel(*grads, *args[4:])
        out.sum().backward()
    elif how == "weights":
        out = kernel.attention_weights(q, k, *args[3:])
        if q.dim() != 4 or k.dim() != 4:
            raise accepted(how)
        if out.shape != (q.shape[0], q.shape[1], q.shape[2], k.shape[2]):
            raise Failure(f"attention_weights returned {tuple(out.shape)} for q {tuple(q.shape)}, "
                          f"k {tuple(k.shape)}")
        return
    else:
        out = kernel.forward_with_stats(*args)[0]
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise accepted(how)
    if out.shape != (q.shape[0], q.shape[1], q.shape[2], v.shape[3]):
        raise Failure(f"{how} returned {tuple(out.shape)} for q {tuple(q.shape)}, v {tuple(v.shape)}")
    inputs_finite = all(t is None or not t.is_floating_point() or t.device.type == "meta"
                        or bool(torch.isfinite(t).all())
                        for t in (q, k, v, call["params"], *(call["inputs"] or [])))
    if not values_changed and inputs_finite and out.device.type == "cpu" and \
            not bool(torch.isfinite(out).all()):
        raise Failure(f"{how} returned non-finite values for finite inputs")


def expect_clean(action):
    """Runs `action`; an allowed exception with a message is fine, anything else fails."""
    try:
        action()
        return "ok"
    except Failure:
        raise
    except ALLOWED as e:
        message = str(e)
        if not message.strip() or "INTERNAL ASSERT" in message:
            raise Failure(f"{type(e).__name__} without a clear message: {message!r}") from e
        return type(e).__name__


def tensor_case(rng, kernels, index):
    name = rng.choice(sorted(kernels))
    kernel = kernels[name]
    call = valid_call(rng, kernel)
    changes, values_changed = [], False
    for _ in range(rng.randint(1, 3)):
        what, values = mutate(rng, call)
        changes.append(what)
        values_changed |= values
    say(f"tensor case {index}: {name}: {', '.join(changes)}")
    return expect_clean(lambda: run_call(rng, kernel, call, values_changed))


# --------------------------------------------------------------------------- artifacts

def manifest_span(data):
    """The JSON manifest's bytes: the object whose first member is "abi", up to its NUL."""
    start = data.rindex(b"{", 0, data.index(b'"abi": '))
    return start, data.index(b"\0", start)


def u(data, offset, size):
    return int.from_bytes(data[offset:offset + size], "little")


def attn_symbol_info_offsets(data):
    """Offsets of the st_info bytes (binding and type) of the attn_* and
    _mlir_ciface_attn_* entries of the dynamic symbol table (64-bit ELF)."""
    shoff, shnum = u(data, 40, 8), u(data, 60, 2)
    for i in range(shnum):
        sh = shoff + 64 * i
        if u(data, sh + 4, 4) != 11:  # SHT_DYNSYM
            continue
        symbols, size, link = u(data, sh + 24, 8), u(data, sh + 32, 8), u(data, sh + 40, 4)
        strings = u(data, shoff + 64 * link + 24, 8)
        found = []
        for entry in range(symbols, symbols + size, 24):
            start = strings + u(data, entry, 4)
            name = bytes(data[start:data.index(b"\0", start)])
            if name.startswith((b"attn_", b"_mlir_ciface_attn_")):
                found.append(entry + 4)
        return found
    return []


def elf_edits(rng, data):
    """(offset, byte) edits of the ELF structures the runtime checks before dlopen: the
    identification, type and machine; the section headers, by which it finds the dynamic
    symbols; the types of the attn symbols. (Other structures, which only the dynamic
    loader reads, are trusted once sealed: see the trust model in docs/artifacts.md.)"""
    where = rng.choice(["ident", "sections", "symbol"])
    if where == "ident":
        return [(rng.choice([4, 5, 16, 17, 18, 19]), rng.randrange(256))]
    if where == "sections":
        shoff, shnum = u(data, 40, 8), u(data, 60, 2)
        offsets = list(range(40, 48)) + list(range(58, 64)) + list(range(shoff, shoff + 64 * shnum))
        return [(rng.choice(offsets), rng.randrange(256)) for _ in range(rng.randint(1, 2))]
    offset = rng.choice(attn_symbol_info_offsets(data))
    return [(offset, (data[offset] & 0xF0) | rng.choice([0, 1, 2, 3, 4, 5, 6, 10]))]


def artifact_case(rng, originals, seal, scratch, index):
    name = rng.choice(sorted(originals))
    data = bytearray(originals[name].read_bytes())
    kind = rng.choice(["truncate", "truncate (resealed)", "flip", "manifest", "manifest", "elf"])
    sealed = kind in ("truncate (resealed)", "manifest", "elf")
    edits = []  # (offset, new byte)
    if kind.startswith("truncate"):
        data = data[:rng.randrange(len(data))]
        edits.append((len(data), None))
    elif kind == "flip":
        for _ in range(rng.randint(1, 8)):
            edits.append((rng.randrange(len(data)), None))
            data[edits[-1][0]] ^= 1 << rng.randrange(8)
    elif kind == "manifest":
        start, end = manifest_span(data)
        for _ in range(rng.randint(1, 3)):
            edits.append((rng.randrange(start, end), ord(rng.choice('0123456789abcdefxz_=[]{}":,. -#\n\0\t'))))
    else:
        data = data[:-48]  # the ELF image without its trailer: attn-seal adds a new one
        edits = elf_edits(rng, data)
    for offset, byte in edits:
        if byte is not None:
            data[offset] = byte
    path = scratch / f"case{index}-{name}.so"
    path.write_bytes(bytes(data))
    if sealed:
        subprocess.run([seal, str(path)], check=True)
    say(f"artifact case {index}: {name}: {kind}{' (resealed)' if kind in ('manifest', 'elf') else ''} at "
        + ", ".join(f"{o}" + ("" if b is None else f"={b:#04x}") for o, b in edits))

    def load_and_run():
        kernel = attn.load(str(path))
        run_call(rng, kernel, valid_call(rng, kernel), values_changed=False)

    outcome = expect_clean(load_and_run)
    if not sealed and outcome == "ok":
        raise Failure(f"a {kind} artifact without a valid checksum was loaded")
    return outcome


# -------------------------------------------------------------------------------- main

def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--cases", type=int, default=200, help="cases of each kind")
    parser.add_argument("--only", choices=["tensors", "artifacts"])
    args = parser.parse_args()
    rng = random.Random(args.seed)
    torch.manual_seed(args.seed)
    # The cases' shapes are tiny: split every call over two threads anyway, so that bad
    # inputs also go through the helpers and split-K (attn.min_thread_work_ns).
    torch.set_num_threads(2)
    attn.set_min_thread_work_ns(0)
    compiler = compiler_path()
    seal = os.path.join(os.path.dirname(os.path.realpath(compiler)), "attn-seal")
    outcomes = {}
    with tempfile.TemporaryDirectory(prefix="attn-fuzz-") as scratch:
        scratch = Path(scratch)
        originals = {}
        for name, source in SOURCES.items():
            originals[name] = scratch / f"{name}.so"
            subprocess.run([compiler, str(source), "-o", str(originals[name]), "--dtypes=f32,f64"],
                           check=True)
        kernels = {name: attn.load(str(path)) for name, path in originals.items()}
        for i in range(args.cases):
            if args.only != "artifacts":
                outcome = tensor_case(rng, kernels, i)
                outcomes[("tensors", outcome)] = outcomes.get(("tensors", outcome), 0) + 1
            if args.only != "tensors":
                outcome = artifact_case(rng, originals, seal, scratch, i)
                outcomes[("artifacts", outcome)] = outcomes.get(("artifacts", outcome), 0) + 1
    summary = ", ".join(f"{kind} {outcome}: {n}" for (kind, outcome), n in sorted(outcomes.items()))
    say(f"runtime_fuzz: seed {args.seed}, {args.cases} cases of each kind: {summary}")


if __name__ == "__main__":
    try:
        main()
    except Failure as e:
        say(f"FAILED: {e}")
        sys.exit(1)
