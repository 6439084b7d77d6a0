"""The Python front-end (attn.frontend): the IR it prints (names, shared subexpressions,
source comments, locations), its round trip through attn-opt, and its errors, which name
the construct and the user's file:line — its own (TraceError) and the compiler's
(diagnostics at the loc() of the Python line)."""
import math
import re

import numpy as np
import pytest
import torch

import attn
from attn import exp, sigmoid, tanh, where
from conftest import REPO

HERE = __file__


def line_of(tag):
    """The line of this file holding the comment `# <tag>` (once)."""
    with open(HERE, encoding="utf-8") as f:
        found = [n for n, text in enumerate(f, 1) if text.rstrip().endswith(f"# {tag}")]
    assert len(found) == 1, f"tag {tag!r} on lines {found}"
    return found[0]


def region_ops(text, region):
    """The op lines of one region of the printed IR (after its `^bb0`, up to the yield)."""
    start = text.index(f"{region} {{")
    body = text[text.index("^bb0", start):]
    return [line for line in body[:body.index("attn.yield")].splitlines()[1:] if line.strip()]


def op_names(lines):
    """['%exp_s = math.exp', ...] without operands, types and locations."""
    return [re.match(r"\s*(%\S+ = \S+)", line).group(1) for line in lines]


# ------------------------------------------------------------------------- names, CSE


def test_values_are_named_after_their_ops_and_operands():
    n = attn.normalizer(numerator=lambda s: exp(s) - exp(-s),
                        denominator=lambda s: exp(s) + exp(-s), name="tanhmax")
    text = str(n)
    assert op_names(region_ops(text, "numerator")) == [
        "%exp_s = math.exp", "%neg_s = arith.negf", "%exp_neg_s = math.exp", "%g = arith.subf"]
    assert op_names(region_ops(text, "denominator"))[-1] == "%den = arith.addf"
    assert "attn.yield %g : f32" in text and "attn.yield %den : f32" in text


def test_a_denominator_that_is_the_numerator_is_written_sum():
    """denominator="sum", or a function that traces to the numerator's ops (whatever its
    Python spelling), prints `denominator sum`; a different function prints its region."""
    def g(s, tau):
        return exp(tau * s)

    same = attn.normalizer(numerator=g, denominator=lambda s, tau: exp(tau * s), epsilon=1.0,
                           params={"tau": 1.0})
    named = attn.normalizer(numerator=g, denominator="sum", epsilon=1.0, params={"tau": 1.0})
    for n in (same, named):
        assert "  denominator epsilon 1.0 sum\n" in str(n)
    assert attn.opt(attn.kernel(same)) == attn.opt(attn.kernel(named))
    other = attn.normalizer(numerator=g, denominator=lambda s: exp(s), params={"tau": 1.0})
    assert "denominator {" in str(other)


def test_values_are_named_after_python_variables():
    def numerator(s, tau):
        scaled = tau * s
        positive = exp(scaled)
        return positive - helper(scaled)

    def helper(x):
        flipped = -x
        return exp(flipped)

    n = attn.normalizer(numerator=numerator, denominator=lambda s, tau: exp(tau * s),
                        params={"tau": 1.5}, name="n")
    assert op_names(region_ops(str(n), "numerator")) == [
        "%scaled = arith.mulf", "%positive = math.exp", "%flipped = arith.negf",
        "%exp_flipped = math.exp", "%g = arith.subf"]


def test_constants_positions_and_results_have_stable_names():
    m = attn.mask(lambda i, j: (i - j) // 4 <= 2)
    sc = attn.score("dot", mod=lambda s, i, j: s * 0.125 + 0.5 * (i - j) + sigmoid(s))
    mask_ops = op_names(region_ops(str(m), "attn.mask @mask"))
    assert mask_ops == ["%c4 = arith.constant", "%c2 = arith.constant", "%sub_i_j = arith.subi",
                        "%floordiv = arith.floordivsi", "%keep = arith.cmpi"]
    names = op_names(region_ops(str(sc), "mod"))
    for expected in ("%c0.125 = arith.constant", "%half = arith.constant", "%one = arith.constant",
                     "%sub_i_j_i64 = arith.index_cast", "%sub_i_j_f = arith.sitofp",
                     "%sigmoid_s = arith.divf", "%score = arith.addf"):
        assert expected in names, (expected, names)


def test_shared_subexpressions_are_emitted_once():
    n = attn.normalizer(numerator=lambda s: exp(s) * exp(s) + exp(s) * (s + 2.0) * (2.0 + s),
                        denominator=lambda s: exp(s), name="n")
    ops = [line.split("=")[1].split()[0] for line in region_ops(str(n), "numerator")]
    assert ops.count("math.exp") == 1
    assert ops.count("arith.addf") == 2          # s + 2.0 == 2.0 + s, plus the outer sum
    assert ops.count("arith.constant") == 1      # 2.0 once
    assert ops.count("arith.mulf") == 3          # exp·exp, exp·(s+2), ·(2+s)


def test_unused_values_are_not_emitted():
    def numerator(s):
        unused = tanh(s) * 3.0  # noqa: F841
        return exp(s)

    ops = region_ops(str(attn.normalizer(numerator=numerator, denominator=lambda s: exp(s))),
                     "numerator")
    assert op_names(ops) == ["%g = math.exp"]


def test_reverse_operators_keep_the_operand_order():
    sc = attn.score(mod=lambda s: (1.0 - s) / (2.0 ** s) + 3 // s + s ** -2)
    text = "\n".join(region_ops(str(sc), "mod"))
    assert re.search(r"arith.subf %one, %s ", text)
    assert re.search(r"math.powf %two, %s ", text)
    assert re.search(r"arith.divf %c3.0, %s ", text)     # 3 // s = floor(3.0 / s)
    assert re.search(r"%mul_s_s = arith.mulf %s, %s ", text)
    assert re.search(r"arith.divf %one, %mul_s_s ", text)  # s ** -2 = 1 / (s·s)


def test_each_region_carries_its_python_source_and_locations():
    n = attn.normalizer(numerator=lambda s: exp(s), denominator=1.0, name="src")  # src-line
    line = line_of("src-line")
    col = open(HERE, encoding="utf-8").read().splitlines()[line - 1].index("exp(s)") + 1
    text = str(n)
    assert f"// test_frontend.py:{line}: lambda s: exp(s)\n" in text
    aliases = dict(re.findall(r"^#(\S+) = (loc\(.*\))$", text, re.M))
    assert set(re.findall(r"loc\(#(\S+)\)", text)) == set(aliases)   # every op has one
    exp_loc = re.search(r"math.exp %s : f32 loc\(#(\S+)\)", text).group(1)
    assert aliases[exp_loc] == f'loc("{HERE}":{line}:{col})'


def test_a_def_region_shows_its_whole_source():
    def numerator(s):
        e = exp(s)
        return e * e

    text = str(attn.normalizer(numerator=numerator, denominator=lambda s: exp(s)))
    assert "//   def numerator(s):\n  //       e = exp(s)\n  //       return e * e\n" in text


# ------------------------------------------------------------------- through attn-opt


def _everything():
    """A kernel using every kind of symbol, clause and value type."""
    norm = attn.normalizer(numerator=lambda s, tau: exp(tau * s),
                           denominator=lambda s, tau: exp(tau * s),
                           epsilon=1e-6, params={"tau": 1.0}, name="softmax1")
    p = attn.tensor_input("p", ("B", "H", "Nq"), learnable=True, init=0.5)
    doc = attn.tensor_input("doc", ("B", None), "i64")
    sc = attn.score("dot", feature=lambda x: where(x > 0, x + 1.0, exp(x)),
                    mod=lambda s, b, h, i, j, slope: s - slope * (j - p[b, h, i]) ** 2 + (i % 3) / 3,
                    params={"slope": 0.25}, weights={"W": ((8, 4), "identity")}, name="local")
    keep = attn.mask(lambda b, i, j: (((j <= i) & ~(i - j > 5)) | (abs(i - j) % 7 == 0))
                     & (doc[b, i] == doc[b, j]), name="band")
    return attn.kernel(norm, score=sc, mask=keep, name="everything")


def test_attn_opt_parses_prints_and_reparses_to_the_same_ir():
    printed = attn.opt(_everything())
    assert attn.opt(printed) == printed
    assert "attn.kernel @everything normalizer(@softmax1) score(@local) mask(@band)" in printed
    assert ("attn.score @local contract dot params(slope = 0.25) "
            "weights(W: 8x4 = identity)") in printed
    assert "attn.input @p learnable = 0.5 : tensor<?x?x?xf32> dims(B, H, Nq)" in printed
    assert "attn.input @doc : tensor<?x?xi64> dims(B, ?)" in printed
    assert "attn.read @p[%b, %h, %i] : f32" in printed
    assert "attn.read @doc[%b, %i] : i64" in printed


def test_tensor_input_extents_and_initial_values():
    """Extents name the call's dimensions, or are numbers or None; dims(...) is printed only
    where one is named; init= needs learnable=True."""
    def declared(*args, **kwargs):
        table = attn.tensor_input(*args, **kwargs)
        norm = attn.normalizer(numerator=lambda s, b, h: exp(s + table[h, 0]),
                               denominator=lambda s: exp(s), name="n")
        return [line for line in attn.opt(attn.kernel(norm)).splitlines()
                if "attn.input" in line][0].strip()
    assert declared("t", ("H", 4)) == "attn.input @t : tensor<?x4xf32> dims(H, 4)"
    assert declared("t", (None, 4)) == "attn.input @t : tensor<?x4xf32>"
    assert (declared("t", ("Hkv", "Nk"), learnable=True, init=-1)
            == "attn.input @t learnable = -1.0 : tensor<?x?xf32> dims(Hkv, Nk)")
    with pytest.raises(attn.TraceError, match=r"shape=\('H', 'N'\): expected 1 to 4 extents, "
                       r"each one of B, H, Hkv, Nq, Nk \(that dimension of the call\)"):
        attn.tensor_input("t", ("H", "N"))
    with pytest.raises(attn.TraceError, match=r"init=0.5 needs learnable=True"):
        attn.tensor_input("t", ("H",), init=0.5)
    with pytest.raises(attn.TraceError, match=r"init = inf is not finite"):
        attn.tensor_input("t", ("H",), learnable=True, init=math.inf)


def test_kernel_takes_functions_for_the_score_mod_and_the_mask():
    norm = attn.normalizer(numerator=lambda s: exp(s), denominator=lambda s: exp(s), name="soft")
    printed = attn.opt(attn.kernel(norm, score=lambda s, i, j: s - 0.5 * abs(i - j),
                                   mask=lambda i, j: j <= i))
    assert "attn.score @score contract scaled_dot mod {" in printed
    assert "arith.cmpi sle, %j, %i : index" in printed
    assert "attn.kernel @soft_attention normalizer(@soft) score(@score) mask(@mask)" in printed


def test_locations_survive_attn_opt():
    printed = attn.opt(_everything(), "--mlir-print-debuginfo")
    lines = {int(n) for n in re.findall(re.escape(f'loc("{HERE}":') + r"(\d+):\d+\)", printed)}
    start = _everything.__code__.co_firstlineno
    assert lines and all(start < n <= start + 13 for n in lines), lines


def test_score_clauses_print_as_the_dialect_reads_them():
    """Bahdanau's additive score (hidden, weights with a fill value) as in its .mlir file."""
    softmax = attn.normalizer(numerator=lambda s: exp(s), denominator=lambda s: exp(s),
                              name="softmax")
    additive = attn.score("additive", hidden=32, name="additive",
                          weights={"W_q": ((32, 32), "identity"), "W_k": ((32, 32), "identity"),
                                   "v": (32, 0.125)})
    traced = attn.kernel(softmax, score=additive, name="bahdanau_attention")
    assert attn.opt(traced) == attn.opt(str(REPO / "examples" / "families" / "bahdanau.mlir"))


def test_python_values_stay_python():
    """A Python condition picks its branch and unary + is the value itself: no ops."""
    sc = attn.score(mod=lambda s, i: where(3 > 2, +s, i))
    assert "attn.yield %s : f32" in str(sc) and not region_ops(str(sc), "mod")


def test_save_writes_what_attn_opt_reads(tmp_path):
    ir = _everything()
    path = ir.save(tmp_path / "everything.mlir")
    assert path.read_text() == str(ir) == ir.text
    assert attn.opt(str(path)) == attn.opt(ir)


# -------------------------------------------------------------- compiler diagnostics


def test_compiler_diagnostics_name_the_python_line():
    bad = attn.normalizer(numerator=lambda s: exp(s) + s,  # classify-error
                          denominator=lambda s: exp(s), name="bad")
    line = line_of("classify-error")
    with pytest.raises(RuntimeError) as opt_error:
        attn.opt(attn.kernel(bad), "--attn-classify-normalizer")
    with pytest.raises(RuntimeError) as compile_error:
        attn.compile(bad)
    for error in (opt_error, compile_error):
        assert re.search(rf"{re.escape(HERE)}:{line}:\d+: error: 'arith.addf' op in the numerator "
                         "of @bad mixes exp-factor degrees", str(error.value)), str(error.value)


def test_verifier_diagnostics_name_the_python_line():
    zero = attn.normalizer(numerator=lambda s: exp(s), denominator=0.0)  # verify-error
    with pytest.raises(RuntimeError, match=rf"{re.escape(HERE)}:{line_of('verify-error')}:\d+: "
                                           "error: 'attn.normalizer' op a constant denominator "
                                           "must not be 0"):
        attn.opt(attn.kernel(zero))


# -------------------------------------------------------------------- front-end errors


def raises_at(tag, pattern, build):
    """build() raises TraceError at this file's line tagged `tag`, matching `pattern`."""
    with pytest.raises(attn.TraceError) as error:
        build()
    message = str(error.value)
    assert message.startswith(f"{HERE}:{line_of(tag)}: "), message
    assert re.search(pattern, message, re.S), message
    return message


def test_python_if_on_a_symbolic_value():
    def numerator(s):
        if s > 0:  # if-error
            return s
        return -s

    raises_at("if-error", r"a Python `if` on `s > 0` needs a concrete True/False.*attn.where",
              lambda: attn.normalizer(numerator=numerator, denominator=1.0))


@pytest.mark.parametrize("tag,construct,fn", [
    ("ifexp-error", r"a conditional expression `s if s > 0 else -s`",
     lambda s: s if s > 0 else -s),  # ifexp-error
    ("and-error", r"Python `and` in `\(s > 0\) and \(s < 1\)`",
     lambda s: (s > 0) and (s < 1)),  # and-error
    ("not-error", r"Python `not` in `not s`", lambda s: not s),  # not-error
    ("bool-error", r"`bool\(s\)`", lambda s: bool(s)),  # bool-error
    ("assert-error", r"`assert s > 0`", None),
    ("while-error", r"a Python `while` on `s > 1`", None),
])
def test_other_python_conditionals(tag, construct, fn):
    def asserting(s):
        assert s > 0  # assert-error
        return s

    def looping(s):
        while s > 1:  # while-error
            s = s / 2
        return s

    fn = fn or {"assert-error": asserting, "while-error": looping}[tag]
    raises_at(tag, construct + " needs a concrete True/False",
              lambda: attn.normalizer(numerator=fn, denominator=1.0))


def test_math_module_functions():
    raises_at("math-error", r"`math.exp\(s\)` converts a symbolic value to a Python number; "
                            r"use attn.exp \(or torch.exp\)",
              lambda: attn.normalizer(numerator=lambda s: math.exp(s),  # math-error
                                      denominator=1.0))
    raises_at("float-error", r"`float\(s\)` converts a symbolic value",
              lambda: attn.normalizer(numerator=lambda s: float(s),  # float-error
                                      denominator=1.0))


def test_math_floor_and_round_are_traced():
    text = str(attn.score(mod=lambda s: math.floor(s) + round(s) + math.ceil(s) + math.trunc(s)))
    for op in ("math.floor", "math.roundeven", "math.ceil", "math.trunc"):
        assert op in text


def test_numpy_functions():
    raises_at("numpy-error", r"numpy.cumsum is not supported on symbolic values; use Python "
                             r"operators or the attn functions \(attn.exp, ",
              lambda: attn.normalizer(numerator=lambda s: np.cumsum(s),  # numpy-error
                                      denominator=1.0))
    raises_at("ufunc-error", r"numpy.arccos is not supported",
              lambda: attn.normalizer(numerator=lambda s: np.arccos(s),  # ufunc-error
                                      denominator=1.0))
    numpy_made = attn.normalizer(
        numerator=lambda s: np.exp(np.float32(2.0) * s) + np.maximum(s, 0.0)
        + np.where(np.less(s, 1.0), np.clip(s, -1.0, 0.5), np.rint(s)), denominator=1.0)
    torch_made = attn.normalizer(
        numerator=lambda s: torch.exp(2.0 * s) + torch.clamp(s, min=0.0)
        + torch.where(s < 1.0, torch.clamp(s, -1.0, 0.5), torch.round(s)), denominator=1.0)
    strip = lambda n: re.sub(r"\s*(//.*|loc\(.*\)|#.*)", "", str(n))
    assert strip(numpy_made) == strip(torch_made)


def test_torch_functions():
    raises_at("torch-error", r"torch.softmax is not supported on symbolic values; supported: "
                             r"torch.abs, torch.atan, .*torch.where, and Python operators",
              lambda: attn.normalizer(numerator=lambda s: torch.softmax(s, 0),  # torch-error
                                      denominator=1.0))
    raises_at("tensor-error", r"a tensor \(3,\) cannot be used in a traced region",
              lambda: attn.normalizer(numerator=lambda s: s * torch.ones(3),  # tensor-error
                                      denominator=1.0))


def test_indexing_with_a_position():
    table = [0.5, 1.0, 2.0]
    raises_at("index-error", r"`table\[j\]` needs a concrete integer",
              lambda: attn.score(mod=lambda s, j: s + table[j]))  # index-error
    raises_at("range-error", r"`range\(i\)` needs a concrete integer",
              lambda: attn.mask(lambda i, j: sum(range(i)) > j))  # range-error
    raises_at("int-error", r"`int\(i\)` converts a symbolic value to a Python number",
              lambda: attn.mask(lambda i, j: int(i) > j))  # int-error
    raises_at("len-error", r"`len\(s\)` asks for the length of a symbolic value",
              lambda: attn.score(mod=lambda s: s * len(s)))  # len-error
    raises_at("item-error", r"`s\[0\]` indexes a symbolic value, which is a scalar",
              lambda: attn.score(mod=lambda s: s[0]))  # item-error
    raises_at("for-error", r"the comprehension `\[t for t in s\]` iterates over a symbolic value",
              lambda: attn.score(mod=lambda s: [t for t in s]))  # for-error

    def mod(s):
        for t in s:  # loop-error
            return t

    raises_at("loop-error", r"a `for` loop over `s` iterates over a symbolic value, which is a "
                            r"scalar", lambda: attn.score(mod=mod))


def test_wrong_results():
    raises_at("mask-result", r"attn.mask @mask `lambda i, j: i - j` .* must return a condition "
                             r"\(a comparison such as j <= i.*got a position",
              lambda: attn.mask(lambda i, j: i - j))  # mask-result
    raises_at("numerator-result", r"numerator of attn.normalizer @n .* must return a number, "
                                  r"got a condition; use attn.where",
              lambda: attn.normalizer(numerator=lambda s: s > 0,  # numerator-result
                                      denominator=1.0, name="n"))
    raises_at("none-result", r"returned None; it must return a number",
              lambda: attn.score(mod=lambda s: print(s)))  # none-result


def test_unknown_arguments():
    raises_at("argument-error", r"the numerator of attn.normalizer @normalizer "
                                r"`lambda x: exp\(x\)` .* takes `x`, but its arguments are "
                                r"passed by name and are: s, b, h, i, j, bias \(declare params",
              lambda: attn.normalizer(numerator=lambda x: exp(x),  # argument-error
                                      denominator=1.0, params={"bias": 0.0}))
    raises_at("star-error", r"takes `\*args`",
              lambda: attn.mask(lambda *args: args[0] <= args[1]))  # star-error


def test_values_of_another_region_or_after_return():
    kept = []

    def numerator(s):
        kept.append(s)
        return exp(s)

    raises_at("cross-region", r"values of different regions are combined: the denominator of "
                              r"attn.normalizer @normalizer and the numerator",
              lambda: attn.normalizer(numerator=numerator,
                                      denominator=lambda s: s + kept[0]))  # cross-region
    raises_at("after-return", r"a value of the numerator of attn.normalizer @normalizer is used "
                              r"after that function returned",
              lambda: exp(kept[0]))  # after-return
    raises_at("outside", r"attn functions build traced regions: call them inside a function",
              lambda: exp(1.0))  # outside


def test_type_errors():
    raises_at("bool-arith", r"`\+` of a comparison result \(bool\); turn it into a number with "
                            r"attn.where\(cond, 1.0, 0.0\)",
              lambda: attn.score(mod=lambda s: s + (s > 0)))  # bool-arith
    raises_at("float-bits", r"`&` combines conditions \(comparison results\) or positions, "
                            r"not floats",
              lambda: attn.score(mod=lambda s, i: where((s & i) > 0, s, 0.0)))  # float-bits
    raises_at("where-cond", r"where\(\): the condition must be a comparison result \(bool\), got "
                            r"a float value",
              lambda: attn.score(mod=lambda s: where(s, s, 0.0)))  # where-cond
    raises_at("round-digits", r"round\(x, 2\): only round\(x\) is supported",
              lambda: attn.score(mod=lambda s: round(s, 2)))  # round-digits
    raises_at("f32-range", r"constant 1e\+300 does not fit f32",
              lambda: attn.score(mod=lambda s: s * 1e300))  # f32-range
    raises_at("f32-int-range", r"constant 1{401} does not fit f32",
              lambda: attn.score(mod=lambda s: s * int("1" * 401)))  # f32-int-range
    raises_at("nan", r"constant nan is not a number; expected a finite one",
              lambda: attn.score(mod=lambda s: s + float("nan")))  # nan
    # An integer past 64 bits is refused where it is written, not by attn-opt later.
    raises_at("index-range", r"integer constant 1180591620717411303424 does not fit index "
                             r"\(a signed 64-bit integer\)",
              lambda: attn.mask(lambda i, j: j <= i + 2**70))  # index-range


def test_declaration_errors():
    raises_at("contract", r"attn.score @score: contract='dott': expected one of dot, scaled_dot, "
                          "bilinear, additive, cosine",
              lambda: attn.score("dott"))  # contract
    raises_at("symbol", r"attn.mask: name='2nd' is not a symbol name",
              lambda: attn.mask(lambda i, j: j <= i, name="2nd"))  # symbol
    raises_at("epsilon", r"epsilon= is added to a summed denominator \(a function h\), but the "
                         r"denominator is 'count'",
              lambda: attn.normalizer(numerator=lambda s: s, denominator="count",  # epsilon
                                      epsilon=1e-6))
    raises_at("denominator", r"denominator='summed': expected a function h\(s, ...\), \"sum\" "
                             r"\(h = the numerator\), a number",
              lambda: attn.normalizer(numerator=lambda s: s, denominator="summed"))  # denominator
    raises_at("param-value", r"param tau = '1': expected its initial value, a number",
              lambda: attn.normalizer(numerator=lambda s: s, denominator=1.0,  # param-value
                                      params={"tau": "1"}))
    raises_at("param-name", r"param 's' has the name of a region argument",
              lambda: attn.normalizer(numerator=lambda s: s, denominator=1.0,  # param-name
                                      params={"s": 1.0}))
    raises_at("weight", r"weight 'W': \(\(8, 0\), 'identity'\): expected name: \(shape, init\)",
              lambda: attn.score("bilinear", weights={"W": ((8, 0), "identity")}))  # weight
    raises_at("kernel-arg", r"attn.kernel: normalizer='softmax': expected an attn.normalizer",
              lambda: attn.kernel("softmax"))  # kernel-arg
    raises_at("score-alone", r"<attn.Score @score contract scaled_dot params=\[\]> is not a kernel",
              lambda: attn.compile(attn.score(mod=lambda s: s)))  # score-alone


def test_a_compiled_front_end_kernel_runs_in_the_module():
    """attn.MultiheadAttention takes the front-end's normalizer (default score) directly."""
    tanhmax = attn.normalizer(numerator=lambda s: exp(s) - exp(-s),
                              denominator=lambda s: exp(s) + exp(-s), name="tanhmax")
    mha = attn.MultiheadAttention(16, 2, batch_first=True, normalizer=tanhmax)
    x = torch.randn(2, 5, 16)
    out, weights = mha(x, x, x)
    assert out.shape == (2, 5, 16) and weights.shape == (2, 5, 5)
    assert mha.kernel.name == "tanhmax_attention" and (weights < 0).any()
